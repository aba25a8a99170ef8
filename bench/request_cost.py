#!/usr/bin/env python3
"""What one API request costs the API server, by how the client talks to it.

`bench/throughput.py` charges the operator's side more API-server CPU per trial than the
Job's for the same writes. Two differences in how they talk were left to test (issue
#22): the operator authenticates with a service account's bearer token and speaks
HTTP/1.1 (urllib3, one connection per thread); the controller-manager authenticates with
a client certificate and speaks HTTP/2 (one connection, many streams). This sends the
same request (a GET of one ConfigMap at `resourceVersion=0`, served from the watch cache,
as the operator's eval GETs are) `--requests` times, one at a time, from each client in
turn, and measures the API server's CPU over each batch net of its idle rate:

- `urllib3-h1-cert`: urllib3 over HTTP/1.1 with the cluster admin's client certificate;
- `urllib3-h1-token`: the same with a service account's bearer token (the operator's);
- `httpx-h2-cert` and `httpx-h1-cert`: httpx over HTTP/2 and HTTP/1.1, client certificate.

Rounds rotate the order of the clients; the JSON line gives microseconds of API-server
CPU per request for each (median over rounds) and the client's wall time per request.

    hack/cluster/up.sh && python bench/request_cost.py [--requests 2000] [--rounds 5]
    python bench/request_cost.py --smoke   # what CI runs
"""

from __future__ import annotations

import argparse
import base64
import json
import ssl
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import urllib3
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from throughput import BenchError, ClusterProcess, Kube, machine_info  # noqa: E402

# A client: (name, one GET of `path` returning its HTTP status).
Client = tuple[str, Callable[[str], int]]


def log(message: str) -> None:
    print(f"[request_cost {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def clients(kubeconfig: Path, token: str, files: Path) -> tuple[str, list[Client]]:
    """The API server's URL and the four clients (certificate files written to `files`)."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    paths = {}
    for name, key in (
        ("ca", cluster["certificate-authority-data"]),
        ("crt", user["client-certificate-data"]),
        ("key", user["client-key-data"]),
    ):
        paths[name] = files / name
        paths[name].write_bytes(base64.b64decode(key))
    ca, crt, key = (str(paths[name]) for name in ("ca", "crt", "key"))
    server = str(cluster["server"])
    cert = urllib3.PoolManager(ca_certs=ca, cert_file=crt, key_file=key)
    bearer = urllib3.PoolManager(ca_certs=ca)
    auth = {"Authorization": f"Bearer {token}"}
    context = ssl.create_default_context(cafile=ca)
    context.load_cert_chain(crt, key)
    h2 = httpx.Client(http2=True, verify=context)
    h1 = httpx.Client(http2=False, verify=context)

    def httpx_get(client: httpx.Client, version: str) -> Callable[[str], int]:
        def get(url: str) -> int:
            response = client.get(url)
            if response.http_version != version:
                raise BenchError(f"asked for {version}, got {response.http_version}")
            return response.status_code

        return get

    return server, [
        ("urllib3-h1-cert", lambda url: cert.request("GET", url).status),
        ("urllib3-h1-token", lambda url: bearer.request("GET", url, headers=auth).status),
        ("httpx-h2-cert", httpx_get(h2, "HTTP/2")),
        ("httpx-h1-cert", httpx_get(h1, "HTTP/1.1")),
    ]


def setup(kube: Kube, ns: str) -> str:
    """A namespace with one ConfigMap and a service account that may read it; its token."""
    kube.create("/api/v1/namespaces", {"metadata": {"name": ns}})
    kube.create(f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "cm"}, "data": {}})
    kube.create(f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": "reader"}})
    kube.create(
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
        {
            "metadata": {"name": "reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "view",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": ns}],
        },
    )
    answer = kube.create(
        f"/api/v1/namespaces/{ns}/serviceaccounts/reader/token",
        {"spec": {"expirationSeconds": 3600}},
    )
    return str(answer["status"]["token"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per batch")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kubeconfig", type=Path, default=REPO / ".cluster" / "kubeconfig")
    parser.add_argument("--smoke", action="store_true", help="20 requests, 1 round (CI)")
    args = parser.parse_args(argv)
    idle_s = 5.0
    if args.smoke:
        args.requests, args.rounds, idle_s = 20, 1, 1.0
    kube = Kube(args.kubeconfig)
    apiserver = ClusterProcess(REPO / ".cluster" / "run", "kube-apiserver")
    ns = f"passhat-request-cost-{uuid.uuid4().hex[:6]}"
    token = setup(kube, ns)
    cpu: dict[str, list[float]] = {}
    wall: dict[str, list[float]] = {}
    try:
        with tempfile.TemporaryDirectory() as files:
            server, every = clients(args.kubeconfig, token, Path(files))
            url = f"{server}/api/v1/namespaces/{ns}/configmaps/cm?resourceVersion=0"
            for round_ in range(args.rounds):
                idle = apiserver.idle_rate(idle_s, quiet=0.1, wait_s=12 * idle_s)
                shift = round_ % len(every)
                for name, get in every[shift:] + every[:shift]:
                    for _ in range(20):  # NB: warm: connections open, caches filled
                        if get(url) != 200:
                            raise BenchError(f"{name}: GET {url} failed")
                    time.sleep(1.0)
                    cpu0, start = apiserver.cpu_seconds(), time.monotonic()
                    for _ in range(args.requests):
                        get(url)
                    seconds = time.monotonic() - start
                    time.sleep(0.5)  # NB: the last responses' bookkeeping
                    spent = apiserver.cpu_seconds() - cpu0 - idle * (seconds + 0.5)
                    cpu.setdefault(name, []).append(max(0.0, spent) / args.requests * 1e6)
                    wall.setdefault(name, []).append(seconds / args.requests * 1e6)
                    log(f"round {round_ + 1}: {name} {cpu[name][-1]:.0f} us API server CPU")
    finally:
        kube.delete(f"/api/v1/namespaces/{ns}")
    result: dict[str, Any] = {
        "requests": args.requests,
        "rounds": args.rounds,
        "apiserver_cpu_us_per_request": {k: round(statistics.median(v)) for k, v in cpu.items()},
        "apiserver_cpu_us_runs": {k: [round(x) for x in v] for k, v in cpu.items()},
        "client_wall_us_per_request": {k: round(statistics.median(v)) for k, v in wall.items()},
        "machine": machine_info(kube),
    }
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"request_cost: {exc}", file=sys.stderr)
        sys.exit(1)
