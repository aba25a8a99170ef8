"""The chart's records API: APIService → Service → the operator's records port, a serving
cert whose CA is the APIService's caBundle, and exactly the RBAC the design needs."""

from __future__ import annotations

import base64
import datetime
from typing import Any

import pytest
from cryptography import x509

from tests.unit.test_chart_render import NAMESPACED, RELEASE_NS, by_kind, operator_container, render


def named(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in by_kind(objects, kind) if o["metadata"]["name"] == name]
    return found


def test_api_service_reaches_the_operators_records_port() -> None:
    """APIService v1alpha1.records.passhat.dev → Service port 443 → container port
    records-api, which the operator is told to serve with the mounted cert."""
    objects = render()
    api = named(objects, "APIService", "v1alpha1.records.passhat.dev")
    assert api["spec"]["group"] == "records.passhat.dev" and api["spec"]["version"] == "v1alpha1"
    ref = api["spec"]["service"]
    assert ref["namespace"] == RELEASE_NS and ref["port"] == 443
    service = named(objects, "Service", ref["name"])
    (port,) = service["spec"]["ports"]
    assert port["port"] == 443 and port["targetPort"] == "records-api"
    (deployment,) = by_kind(objects, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    container = operator_container(objects)
    assert {"name": "records-api", "containerPort": 8443, "protocol": "TCP"} in container["ports"]
    args = container["args"]
    assert "--records-api-port=8443" in args
    assert "--records-api-cert=/etc/passhat/records-api/tls.crt" in args
    assert "--records-api-key=/etc/passhat/records-api/tls.key" in args
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["records-api-tls"]["mountPath"] == "/etc/passhat/records-api"
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["records-api-tls"]["secret"]["secretName"] == "ph-passhat-records-api-tls"


def test_serving_cert_names_the_service_and_chains_to_the_ca_bundle() -> None:
    """The cert is for <service>.<namespace>.svc (the name the aggregator dials), signed by
    the caBundle's CA, valid for years."""
    objects = render()
    api = named(objects, "APIService", "v1alpha1.records.passhat.dev")
    secret = named(objects, "Secret", "ph-passhat-records-api-tls")
    assert secret["type"] == "kubernetes.io/tls"
    ca = x509.load_pem_x509_certificate(base64.b64decode(api["spec"]["caBundle"]))
    assert secret["data"]["ca.crt"] == api["spec"]["caBundle"]
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    service = api["spec"]["service"]["name"]
    assert f"{service}.{RELEASE_NS}.svc" in sans.get_values_for_type(x509.DNSName)
    cert.verify_directly_issued_by(ca)
    left = cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    assert left > datetime.timedelta(days=3000)


@pytest.mark.parametrize("sets", [(), NAMESPACED], ids=["cluster-wide", "namespaced"])
def test_rbac_of_the_records_api(sets: tuple[str, ...]) -> None:
    """The operator may review access and read the front proxy's CA; every authenticated
    user passes the kube-apiserver's check of the two paths, and nothing more."""
    objects = render(*sets)
    delegator = named(objects, "ClusterRoleBinding", "ph-passhat-records-api-auth-delegator")
    assert delegator["roleRef"]["name"] == "system:auth-delegator"
    sa = {"kind": "ServiceAccount", "name": "ph-passhat", "namespace": RELEASE_NS}
    assert delegator["subjects"] == [sa]
    reader = named(objects, "RoleBinding", "ph-passhat-records-api-auth-reader")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "extension-apiserver-authentication-reader",
    }
    assert reader["subjects"] == [sa]
    role = named(objects, "ClusterRole", "ph-passhat-records-reader")
    assert role["rules"] == [
        {
            "apiGroups": ["records.passhat.dev"],
            "resources": ["evals/trials", "evals/transcript"],
            "verbs": ["get"],
        }
    ]
    binding = named(objects, "ClusterRoleBinding", "ph-passhat-records-reader")
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}
    ]


def test_switches() -> None:
    """enabled=false (or no records store) renders none of it; grantAuthenticatedUsers=false
    leaves the users' binding to the admin; rbac.create=false leaves the operator's bindings
    out."""
    for off in ("recordsApi.enabled=false", "records.store=none"):
        objects = render(off)
        assert not by_kind(objects, "APIService"), off
        assert not [a for a in operator_container(objects)["args"] if "records-api" in a], off
    objects = render("recordsApi.grantAuthenticatedUsers=false")
    assert not [o for o in objects if o["metadata"]["name"] == "ph-passhat-records-reader"]
    objects = render("rbac.create=false")
    assert by_kind(objects, "APIService")
    assert not [o for o in objects if "auth-delegator" in o["metadata"]["name"]]
    assert "--records-api-port=9443" in operator_container(render("recordsApi.port=9443"))["args"]
