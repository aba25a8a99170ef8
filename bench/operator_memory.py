"""The operator's peak RSS while it creates the pods of one eval with large params.

Issue #17: an eval of one task with large params at a large `parallelism` must not take
the operator's memory (one pass used to build every pod body at once: ~1 GiB for 900 KiB
of params at `parallelism: 1000`, before params were capped at 64 KiB). This runs
the operator's reconcile pass (`EvalLoop` over the real `Kube`, its kubernetes client and
urllib3) in a child process against a minimal API server in another child process on
localhost (it answers the eval, paged LISTs, pod POSTs echoing the pod back as the API
server does, status and pod PATCHes, DELETEs; it keeps only pod metadata, or with
`--full-pods` whole pods, which its LISTs then return as the API server would), passes
until every pod is created and then `--more-passes` more (each LISTs every pod), and
prints the measured process's peak RSS (VmHWM) and its RSS before the first pass. The
last line is JSON: `{"runs": [...]}`, one object per version measured.

To compare two versions of the code, give each as `--tree DIR` (a directory holding a
`passhat` package, e.g. `git archive HEAD passhat | tar -x -C DIR`); it is put first on
the measured process's PYTHONPATH.

    python bench/operator_memory.py                          # 63 KiB x parallelism 1000
    python bench/operator_memory.py --parallelism 10000 --full-pods --more-passes 2
    python bench/operator_memory.py --tree /tmp/before --tree /tmp/after
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE, NAME, UID = "bench", "big", "uid-bench-1"


def eval_body(params_kib: int, parallelism: int) -> dict[str, Any]:
    """Tasks whose params hold `params_kib` KiB each, `parallelism` trials in all (at most
    1,000 per task), all at once."""
    tasks = -(-parallelism // 1000)
    return {
        "apiVersion": "passhat.dev/v1alpha1",
        "kind": "ConsistencyEval",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "uid": UID,
            "generation": 1,
            "resourceVersion": "1",
        },
        "spec": {
            "tasks": [
                {"id": f"big-{index}", "params": {"blob": "x" * (params_kib * 1024)}}
                for index in range(tasks)
            ],
            "trials": -(-parallelism // tasks),
            "ks": [1],
            "parallelism": parallelism,
            "trial": {
                "timeoutSeconds": 60,
                "template": {"spec": {"containers": [{"name": "agent", "image": "x"}]}},
            },
        },
    }


class Server(ThreadingHTTPServer):
    """The API server's part the pass talks to; pods kept as metadata only."""

    daemon_threads = True

    def __init__(self, body: dict[str, Any], *, full_pods: bool) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.eval = body
        self.full_pods = full_pods
        self.pods: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.rv = 1


class Handler(BaseHTTPRequestHandler):
    server: Server

    def log_message(self, *_: Any) -> None:
        return

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(self, status: int, data: Any = None, *, raw: bytes | None = None) -> None:
        payload = raw if raw is not None else json.dumps(data or {}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        with self.server.lock:
            if "/consistencyevals/" in self.path:
                self._send(200, self.server.eval)
                return
            query = dict(urllib.parse.parse_qsl(self.path.partition("?")[2]))
            start = int(query.get("continue") or 0)
            end = start + int(query.get("limit") or 500)
            items = list(self.server.pods.values())
        more = {"continue": str(end)} if end < len(items) else {}
        self._send(200, {"items": items[start:end], "metadata": more})

    def do_POST(self) -> None:
        raw = self._body()
        pod = json.loads(raw)
        meta = pod["metadata"]
        with self.server.lock:
            if meta["name"] in self.server.pods:
                self._send(409, {"reason": "AlreadyExists"})
                return
            self.server.pods[meta["name"]] = {
                "metadata": {**meta, "uid": f"pod-{len(self.server.pods)}"},
                "spec": pod["spec"] if self.server.full_pods else {"containers": [{}]},
                "status": {"phase": "Pending"},
            }
        del pod
        self._send(201, raw=raw)  # NB: the API server answers with the created pod

    def do_PATCH(self) -> None:
        patch = json.loads(self._body())
        with self.server.lock:
            if self.path.endswith("/status"):
                self.server.rv += 1
                self.server.eval["status"] = patch.get("status")
                self.server.eval["metadata"]["resourceVersion"] = str(self.server.rv)
                self._send(200, {})
                return
        self._send(200, {})

    def do_DELETE(self) -> None:
        self._body()
        self._send(200, {})


def serve(params_kib: int, parallelism: int, *, full_pods: bool) -> None:
    """Run the API server, print its port, serve until stdin closes."""
    server = Server(eval_body(params_kib, parallelism), full_pods=full_pods)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()
    server.shutdown()


def rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure(port: int, parallelism: int, more_passes: int) -> None:
    """Run passes of the eval until every pod is created, then `more_passes` more; print
    one JSON line."""
    from kubernetes import client

    from passhat.operator.kube import Kube
    from passhat.operator.loop import EvalLoop
    from passhat.operator.pods import EvalRef

    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    kube = Kube(configuration)
    loop = EvalLoop(kube, EvalRef(NAMESPACE, NAME, UID))
    before = rss_kib("VmRSS")
    started = time.monotonic()
    created = passes = 0
    while created < parallelism and passes < 50:
        created += loop.run_pass().created
        passes += 1
    for _ in range(more_passes):
        loop.run_pass()
        passes += 1
    seconds = time.monotonic() - started
    message = ((kube.get_eval(NAMESPACE, NAME) or {}).get("status") or {}).get("message")
    kube.close()
    print(
        json.dumps(
            {
                "created": created,
                "passes": passes,
                "seconds": round(seconds, 2),
                "rss_before_mib": round(before / 1024, 1),
                "peak_rss_mib": round(rss_kib("VmHWM") / 1024, 1),
                "message": message,
            }
        ),
        flush=True,
    )


def one_run(tree: Path | None, args: argparse.Namespace) -> dict[str, Any]:
    """Start the server, measure one version of the code against it."""
    me = str(Path(__file__).resolve())
    sizes = ["--params-kib", str(args.params_kib), "--parallelism", str(args.parallelism)]
    server = subprocess.Popen(
        [sys.executable, me, "--serve", *sizes, *(["--full-pods"] if args.full_pods else [])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        more = str(args.more_passes)
        env = dict(os.environ)
        paths = [str(tree)] if tree is not None else []
        env["PYTHONPATH"] = os.pathsep.join([*paths, str(ROOT), env.get("PYTHONPATH", "")])
        out = subprocess.run(
            [sys.executable, me, "--measure", str(port), *sizes, "--more-passes", more],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    finally:
        server.communicate("")
    return {
        "tree": str(tree) if tree else "this checkout",
        "params_kib": args.params_kib,
        "full_pods": args.full_pods,
        **result,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # NB: the largest params allowed are 64 KiB as JSON (passhat.api.spec.MAX_PARAMS_BYTES)
    parser.add_argument("--params-kib", type=int, default=63)
    parser.add_argument("--parallelism", type=int, default=1000)
    parser.add_argument("--full-pods", action="store_true", help="LISTs return whole pods")
    parser.add_argument("--more-passes", type=int, default=0, help="passes after the creates")
    parser.add_argument("--tree", type=Path, action="append", default=[])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--measure", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.params_kib, args.parallelism, full_pods=args.full_pods)
        return
    if args.measure is not None:
        measure(args.measure, args.parallelism, args.more_passes)
        return
    results = [one_run(tree, args) for tree in args.tree or [None]]
    for result in results:
        if result["message"]:
            print(f"{result['tree']}: {result['message']}", file=sys.stderr)
        print(
            f"{result['tree']}: {result['created']} pods of {result['params_kib']} KiB params "
            f"in {result['passes']} passes, {result['seconds']} s; RSS before "
            f"{result['rss_before_mib']} MiB, peak {result['peak_rss_mib']} MiB",
            file=sys.stderr,
        )
    print(json.dumps({"runs": results}))


if __name__ == "__main__":
    main()
