"""Certificates for tests of the records API: CAs, serving and client certs (cryptography).

Shared by the unit tier (the HTTPS server with a fake front proxy) and the cluster tier
(the records API's serving cert for a test APIService, users with client certs of the
test cluster's CA).
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Ca", "load_ca", "make_ca"]


class Ca:
    """A CA that issues leaf certificates."""

    def __init__(self, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
        self.cert = cert
        self.key = key

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(
        self,
        cn: str,
        *,
        orgs: Sequence[str] = (),
        dns: Sequence[str] = (),
        ips: Sequence[str] = (),
        server: bool = False,
    ) -> tuple[bytes, bytes]:
        """(cert PEM, key PEM) of a client cert (or a server cert for `dns`/`ips`)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        names = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in orgs]
        names.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(names))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        sans: list[x509.GeneralName] = [x509.DNSName(name) for name in dns]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return cert.public_bytes(serialization.Encoding.PEM), key_pem

    def issue_files(
        self,
        directory: Path,
        name: str,
        cn: str,
        *,
        orgs: Sequence[str] = (),
        dns: Sequence[str] = (),
        ips: Sequence[str] = (),
        server: bool = False,
    ) -> tuple[str, str]:
        """`issue(...)` written to DIRECTORY/NAME.crt and .key; their paths."""
        cert, key = self.issue(cn, orgs=orgs, dns=dns, ips=ips, server=server)
        cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
        cert_path.write_bytes(cert)
        key_path.write_bytes(key)
        return str(cert_path), str(key_path)


def make_ca(name: str) -> Ca:
    """A new self-signed CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return Ca(cert, key)


def load_ca(cert_file: Path, key_file: Path) -> Ca:
    """An existing CA (e.g. the test cluster's, to make users with client certs)."""
    cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey), f"{key_file}: not an EC key"
    return Ca(cert, key)
