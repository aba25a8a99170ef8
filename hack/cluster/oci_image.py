#!/usr/bin/env python3
"""Write a single-layer OCI image tarball that ``ctr images import`` accepts.

The test cluster cannot pull images (its machines reach no registry), so every image it
runs is built here from files already on the machine and imported into containerd. The
format is the plain OCI layout: ``oci-layout``, ``index.json`` (whose manifest carries the
``io.containerd.image.name`` annotation so ctr names the image), and blobs for one
uncompressed layer, the config and the manifest. Output is byte-for-byte reproducible.

    oci_image.py --name localhost/passhat/busybox:test --out busybox.tar \\
        --file /bin/busybox:/bin/busybox --symlink busybox:/bin/sh --cmd /bin/sh
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass, field

PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BUSYBOX_APPLETS = [
    "sh",
    "ash",
    "cat",
    "chmod",
    "cp",
    "date",
    "dd",
    "echo",
    "env",
    "false",
    "grep",
    "head",
    "hostname",
    "id",
    "kill",
    "ls",
    "mkdir",
    "mv",
    "printf",
    "ps",
    "pwd",
    "rm",
    "rmdir",
    "seq",
    "sleep",
    "sort",
    "stat",
    "tail",
    "tee",
    "test",
    "timeout",
    "touch",
    "tr",
    "true",
    "uname",
    "wc",
    "whoami",
    "yes",
]


@dataclass
class Image:
    """What goes into the image: files (src on this machine → path in image), symlinks, dirs."""

    name: str
    files: list[tuple[str, str]] = field(default_factory=list)
    symlinks: list[tuple[str, str]] = field(default_factory=list)
    dirs: list[str] = field(default_factory=lambda: ["tmp"])
    texts: list[tuple[str, str]] = field(default_factory=list)
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=lambda: [PATH_ENV])


def _info(path: str, kind: bytes, mode: int, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(path.lstrip("/"))
    info.type, info.mode, info.size, info.mtime = kind, mode, size, 0
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def build_layer(image: Image) -> bytes:
    """Return the uncompressed layer tar; parent directories are added automatically."""
    buf = io.BytesIO()
    seen: set[str] = set()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def add_dirs(path: str, *, include_self: bool) -> None:
            parts = path.strip("/").split("/")
            upto = len(parts) if include_self else len(parts) - 1
            for i in range(1, upto + 1):
                d = "/".join(parts[:i])
                if d and d not in seen:
                    seen.add(d)
                    tar.addfile(_info(d, tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755))

        for d in image.dirs:
            add_dirs(d, include_self=True)
        for src, dst in image.files:
            add_dirs(dst, include_self=False)
            with open(src, "rb") as f:
                data = f.read()
            tar.addfile(_info(dst, tarfile.REGTYPE, 0o755, len(data)), io.BytesIO(data))
        for text, dst in image.texts:
            add_dirs(dst, include_self=False)
            data = text.encode()
            tar.addfile(_info(dst, tarfile.REGTYPE, 0o644, len(data)), io.BytesIO(data))
        for target, link in image.symlinks:
            add_dirs(link, include_self=False)
            info = _info(link, tarfile.SYMTYPE, 0o777)
            info.linkname = target
            tar.addfile(info)
    return buf.getvalue()


def _blob(tar: tarfile.TarFile, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    info = _info(f"blobs/sha256/{digest}", tarfile.REGTYPE, 0o644, len(data))
    tar.addfile(info, io.BytesIO(data))
    return f"sha256:{digest}"


def _json(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def write_oci_tar(image: Image, out: str) -> None:
    """Write the OCI layout tarball for `image` to the file `out`."""
    layer = build_layer(image)
    with tarfile.open(out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(_info("blobs", tarfile.DIRTYPE, 0o755))
        tar.addfile(_info("blobs/sha256", tarfile.DIRTYPE, 0o755))
        layer_digest = _blob(tar, layer)
        config = {
            "architecture": "amd64",
            "os": "linux",
            "config": {
                "Env": image.env,
                "Entrypoint": image.entrypoint or None,
                "Cmd": image.cmd or None,
            },
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
            "history": [{"created_by": "hack/cluster/oci_image.py"}],
        }
        config_bytes = _json(config)
        config_digest = _blob(tar, config_bytes)
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest,
                "size": len(config_bytes),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": layer_digest,
                    "size": len(layer),
                }
            ],
        }
        manifest_bytes = _json(manifest)
        manifest_digest = _blob(tar, manifest_bytes)
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": manifest_digest,
                    "size": len(manifest_bytes),
                    "platform": {"architecture": "amd64", "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": image.name,
                        "org.opencontainers.image.ref.name": image.name.rsplit(":", 1)[-1],
                    },
                }
            ],
        }
        layout = _json({"imageLayoutVersion": "1.0.0"})
        for name, data in (("oci-layout", layout), ("index.json", _json(index))):
            tar.addfile(_info(name, tarfile.REGTYPE, 0o644, len(data)), io.BytesIO(data))


def busybox_image(name: str, busybox: str = "/bin/busybox") -> Image:
    """A shell image from a static busybox with the applets the tests use."""
    passwd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\n"
    group = "root:x:0:\nnogroup:x:65534:\n"
    return Image(
        name=name,
        files=[(busybox, "/bin/busybox")],
        symlinks=[("busybox", f"/bin/{a}") for a in BUSYBOX_APPLETS],
        texts=[(passwd, "/etc/passwd"), (group, "/etc/group")],
        dirs=["tmp", "root", "proc", "sys", "dev", "etc"],
        cmd=["/bin/sh"],
    )


def _pair(value: str) -> tuple[str, str]:
    left, sep, right = value.partition(":")
    if not sep or not left or not right:
        raise argparse.ArgumentTypeError(f"expected A:B, got {value!r}")
    return left, right


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--name", required=True, help="image reference, e.g. localhost/x:tag")
    parser.add_argument("--out", required=True, help="tarball to write")
    parser.add_argument("--busybox", help="make a busybox shell image from this static binary")
    parser.add_argument("--file", type=_pair, action="append", default=[], help="SRC:DST")
    parser.add_argument("--symlink", type=_pair, action="append", default=[], help="TARGET:LINK")
    parser.add_argument("--dir", action="append", default=[], help="empty directory to create")
    parser.add_argument("--entrypoint", nargs="+", default=[])
    parser.add_argument("--cmd", nargs="+", default=[])
    args = parser.parse_args(argv)
    image = busybox_image(args.name, args.busybox) if args.busybox else Image(name=args.name)
    image.files += args.file
    image.symlinks += args.symlink
    image.dirs += args.dir
    image.entrypoint = args.entrypoint or image.entrypoint
    image.cmd = args.cmd or image.cmd
    try:
        write_oci_tar(image, args.out)
    except OSError as err:
        print(f"oci_image.py: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
