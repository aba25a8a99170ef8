"""Helpers for tests that run the real operator against the test cluster.

Shared by the operator's fault tests, the surface tests and the benchmark smoke test:
- `install_crd(kubectl)`: apply the generated CRD from `crds/` and wait until established.
- `OperatorProcess`: `passhat operator` as a subprocess scoped to some namespaces, with its
  log in a file, that can be SIGKILLed and started again.
- `eval_manifest(...)`: a ConsistencyEval whose trials run on kwok nodes.
- `Scripter`: decides how each kwok trial pod ends from its (task, trial, attempt).
- `expected_ledger(...)`: the ledger a script implies, computed without the operator.
- `get_eval`, `wait_for_condition`, `trial_pods`, `delete_evals` (teardown while the
  operator still runs, so no eval keeps its namespace Terminating).
- `held_pods`, `kept_attempts`, `ledger_attempts`: finished trial pods are kept (released,
  labelled recorded) until their eval is deleted; these say which.

How kwok trials are scripted: the template asks kwok to keep every pod running
(`passhat.dev/fake-run-forever: "true"`, copied by the operator from the template); the
`Scripter` thread lists the eval's pods and patches each new one's annotations with the
exit code the script gives for its labels (and `fake-run-forever: "false"`), after which
kwok's pod-complete stage ends the pod. So outcomes depend on (task, trial, attempt)
only, never on timing, and the final status of a run is known in advance. The scripter
keeps working while the operator is down (kills) and while the API server restarts.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from passhat.trials.ledger import SlotLedger
from passhat.trials.outcomes import Outcome, Verdict
from tests.cluster.kube_helpers import raw_json

REPO = Path(__file__).resolve().parents[2]
GROUP, VERSION, PLURAL = "passhat.dev", "v1alpha1", "consistencyevals"
CRD_FILE = REPO / "crds" / "consistencyevals.passhat.dev.yaml"
KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
EVAL_UID_LABEL = "passhat.dev/eval-uid"
RECORDED_LABEL = "passhat.dev/recorded"
TRIAL_FINALIZER = "passhat.dev/trial-accounting"
SCRIPTED = "passhat.dev/scripted"

# (task, trial, attempt) -> exit code of that attempt's pod (75 = infra error by default).
Script = Callable[[int, int, int], int]


def install_crd(kubectl: Callable[..., str]) -> None:
    """Apply the ConsistencyEval CRD from crds/ and wait until it is established."""
    kubectl("apply", "-f", str(CRD_FILE))
    kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=120s",
        "crd/consistencyevals.passhat.dev",
    )


@contextlib.contextmanager
def crd_kept(kubectl: Callable[..., str], *, interval_s: float = 1.0) -> Iterator[None]:
    """Install this tree's CRD and re-apply it every `interval_s` while the body runs.

    Other worktrees' cluster tests apply their own CRD to the shared cluster; while one
    without this tree's fields is in place the API server prunes them from every object it
    writes (a status write drops `status.graderCheck`, a create drops `spec.budget`)."""
    install_crd(kubectl)
    stop = threading.Event()

    def keep() -> None:
        while not stop.wait(interval_s):
            kubectl("apply", "-f", str(CRD_FILE), check=False)

    keeper = threading.Thread(target=keep, name="crd-keeper", daemon=True)
    keeper.start()
    try:
        yield
    finally:
        stop.set()
        keeper.join(timeout=10)


# `passhat <args>` via the CLI's main(); until the CLI has its `operator` subcommand,
# run_operator() directly with the namespaces from the arguments.
_LAUNCHER = """
import sys
try:
    from passhat.cli import main
except ImportError:
    from passhat.operator.main import OperatorOptions, run_operator
    args = sys.argv[1:]
    namespaces = [args[i + 1] for i, arg in enumerate(args) if arg == "--namespace"]
    run_operator(OperatorOptions(namespaces=namespaces, metrics_port=0))
else:
    sys.exit(main())
"""


class OperatorProcess:
    """`passhat operator` in a subprocess, watching `namespaces`, log in `log_path`."""

    def __init__(
        self,
        *,
        kubeconfig: Path,
        namespaces: Iterable[str],
        log_path: Path,
        extra_args: Iterable[str] = (),
    ) -> None:
        self.kubeconfig = kubeconfig
        self.namespaces = list(namespaces)
        self.log_path = log_path
        self.extra_args = list(extra_args)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def command(self) -> list[str]:
        """`passhat operator --metrics-port 0 --namespace NS ...` with this interpreter."""
        args = ["operator", "--metrics-port", "0", *self.extra_args]
        for namespace in self.namespaces:
            args += ["--namespace", namespace]
        return [sys.executable, "-c", _LAUNCHER, *args]

    def start(self) -> None:
        """Start (or start again after a kill); output appended to the log."""
        assert self.proc is None or self.proc.poll() is not None, "operator already running"
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig), PYTHONUNBUFFERED="1")
        with self.log_path.open("ab") as log:
            log.write(f"\n===== start #{self.starts + 1} at {time.time():.1f} =====\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO
            )
        self.starts += 1

    def kill(self) -> None:
        """SIGKILL: no cleanup, no graceful anything."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=60)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit within 30 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()

    def assert_running(self) -> None:
        """Fail with the log tail when the operator exited on its own."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            pytest.fail(f"the operator exited with {self.proc.returncode}:\n{self.log_tail()}")

    def log_tail(self, lines: int = 60) -> str:
        """The last lines of the operator's log."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


@contextlib.contextmanager
def operator_in(
    cluster: Any,
    kubectl: Callable[..., str],
    namespace: str,
    log_path: Path,
    *,
    extra_args: Iterable[str] = (),
) -> Iterator[OperatorProcess]:
    """A running operator scoped to `namespace` (CRD installed); on exit its evals are
    deleted while it still runs (so their pods are released), then it is stopped."""
    install_crd(kubectl)
    process = OperatorProcess(
        kubeconfig=cluster.kubeconfig,
        namespaces=[namespace],
        log_path=log_path,
        extra_args=extra_args,
    )
    process.start()
    try:
        yield process
    finally:
        if process.proc is not None and process.proc.poll() is None:
            delete_evals(kubectl, namespace)
        process.stop()


def delete_evals(kubectl: Callable[..., str], namespace: str, *, timeout_s: int = 180) -> None:
    """Delete every eval of `namespace` while the operator still runs (it releases the
    pods and kopf's finalizer); strip the finalizers of any eval still there after that."""
    kubectl(
        "delete",
        "consistencyevals",
        "--all",
        "-n",
        namespace,
        "--wait=true",
        f"--timeout={timeout_s}s",
        check=False,
    )
    names = kubectl("get", "consistencyevals", "-n", namespace, "-o", "name", check=False)
    for name in names.split():
        kubectl(
            "patch",
            name,
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"metadata":{"finalizers":null}}',
            check=False,
        )


def eval_manifest(
    name: str,
    *,
    tasks: int,
    trials: int,
    parallelism: int,
    ks: list[int] | None = None,
    retries: int = 2,
    backoff_s: float = 0,
    scripted: bool = True,
    duration: str = "1s",
    gate: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A ConsistencyEval on kwok nodes; `scripted` pods wait for the Scripter to end them."""
    annotations = {"passhat.dev/fake-duration": duration}
    if scripted:
        annotations["passhat.dev/fake-run-forever"] = "true"
    spec: dict[str, Any] = {
        "tasks": [{"id": f"task-{index:03d}", "params": {"n": index}} for index in range(tasks)],
        "trials": trials,
        "parallelism": parallelism,
        "trial": {
            "timeoutSeconds": 3600,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "nodeSelector": {"type": "kwok"},
                    "tolerations": [KWOK_TOLERATION],
                    "containers": [{"name": "agent", "image": "localhost/passhat/fake:1"}],
                },
            },
        },
        "retry": {"infraErrors": retries, "backoffSeconds": backoff_s},
    }
    if ks is not None:
        spec["ks"] = ks
    if gate is not None:
        spec["gate"] = dict(gate)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConsistencyEval",
        "metadata": {"name": name},
        "spec": spec,
    }


def create_eval(
    api: client.ApiClient, namespace: str, manifest: Mapping[str, Any]
) -> dict[str, Any]:
    """Create the eval; returns it as stored."""
    custom = client.CustomObjectsApi(api)
    created = custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, dict(manifest)
    )
    assert isinstance(created, dict), f"creating an eval returned {created!r}, not an object"
    return created


def get_eval(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The eval as stored now (None when it does not exist)."""
    try:
        body = client.CustomObjectsApi(api).get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name
        )
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    assert isinstance(body, dict), f"reading eval {name} returned {body!r}, not an object"
    return body


def condition(body: Mapping[str, Any] | None, kind: str) -> str | None:
    """The status ("True"/"False") of condition `kind` of an eval, None when absent."""
    for item in ((body or {}).get("status") or {}).get("conditions") or []:
        if item.get("type") == kind:
            return str(item.get("status"))
    return None


def wait_for_condition(
    api: client.ApiClient,
    namespace: str,
    name: str,
    kind: str,
    *,
    timeout: float,
    operator: OperatorProcess | None = None,
    value: str = "True",
) -> dict[str, Any]:
    """Poll until the eval's condition `kind` has `value`; fail with the operator log."""
    deadline = time.monotonic() + timeout
    body: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        try:
            body = get_eval(api, namespace, name)
        except Exception:
            body = None  # NB: the API server may be restarting
        if condition(body, kind) == value:
            assert body is not None
            return body
        if operator is not None:
            operator.assert_running()
        time.sleep(1.0)
    status = json.dumps((body or {}).get("status"), indent=1)[:3000]
    log = operator.log_tail() if operator is not None else ""
    pytest.fail(f"{name}: condition {kind} never became {value} in {timeout:.0f}s\n{status}\n{log}")


def trial_pods(core: client.CoreV1Api, namespace: str) -> list[dict[str, Any]]:
    """Raw JSON of every trial pod in `namespace`."""
    response = core.list_namespaced_pod(
        namespace, label_selector=EVAL_UID_LABEL, _preload_content=False
    )
    items: list[dict[str, Any]] = raw_json(response)["items"]
    return items


def eval_pods(core: client.CoreV1Api, namespace: str, uid: str) -> list[dict[str, Any]]:
    """Raw JSON of the trial pods of the eval with `uid`."""
    return [
        p for p in trial_pods(core, namespace) if p["metadata"]["labels"][EVAL_UID_LABEL] == uid
    ]


def held_pods(core: client.CoreV1Api, namespace: str, uid: str) -> list[str]:
    """Names of the eval's trial pods that still hold the trial-accounting finalizer."""
    return [
        p["metadata"]["name"]
        for p in eval_pods(core, namespace, uid)
        if TRIAL_FINALIZER in (p["metadata"].get("finalizers") or [])
    ]


def kept_attempts(core: client.CoreV1Api, namespace: str, uid: str) -> list[tuple[int, int, int]]:
    """(task, trial, attempt) of each of the eval's trial pods, sorted, after checking that
    every one is a kept pod: ended, released (no finalizer), labelled recorded."""
    found = []
    for pod in eval_pods(core, namespace, uid):
        meta = pod["metadata"]
        labels = meta["labels"]
        assert labels.get(RECORDED_LABEL) == "true", meta["name"]
        assert TRIAL_FINALIZER not in (meta.get("finalizers") or []), meta["name"]
        # NB: a real kubelet moves the phase a moment after the containers' ends
        states = [c.get("state") or {} for c in pod["status"].get("containerStatuses") or []]
        ended = bool(states) and all("terminated" in state for state in states)
        assert ended or pod["status"].get("phase") in ("Succeeded", "Failed"), meta["name"]
        found.append(
            (
                int(labels["passhat.dev/task"]),
                int(labels["passhat.dev/trial"]),
                int(labels["passhat.dev/attempt"]),
            )
        )
    return sorted(found)


def ledger_attempts(ledger: SlotLedger) -> list[tuple[int, int, int]]:
    """Every (task, trial, attempt) the ledger holds, sorted."""
    return [
        (task, trial, attempt)
        for task in range(ledger.n_tasks)
        for trial in range(ledger.trials)
        for attempt in range(ledger.attempts(task, trial))
    ]


def progress_done(body: Mapping[str, Any] | None) -> int:
    """`status.progress.done` of an eval (0 when absent)."""
    return int((((body or {}).get("status") or {}).get("progress") or {}).get("done") or 0)


class Scripter:
    """A thread that ends each new kwok trial pod with the exit code the script gives it."""

    def __init__(self, core: client.CoreV1Api, namespace: str, script: Script) -> None:
        self.core = core
        self.namespace = namespace
        self.script = script
        self.scripted: dict[str, str] = {}  # pod name -> uid
        self.reruns: list[str] = []  # names seen again with another uid: an attempt re-ran
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scripter", daemon=True)

    def __enter__(self) -> Scripter:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:  # NB: the API server may be restarting; try again
                self.errors += 1
            self._stop.wait(0.3)

    def step(self) -> None:
        """Script every pod that still waits for its outcome."""
        for pod in trial_pods(self.core, self.namespace):
            meta = pod["metadata"]
            seen = self.scripted.get(meta["name"])
            if seen is not None and seen != meta["uid"] and meta["name"] not in self.reruns:
                self.reruns.append(meta["name"])
            annotations = meta.get("annotations") or {}
            if annotations.get("passhat.dev/fake-run-forever") != "true" or meta.get(
                "deletionTimestamp"
            ):
                continue
            labels = meta["labels"]
            code = self.script(
                int(labels["passhat.dev/task"]),
                int(labels["passhat.dev/trial"]),
                int(labels["passhat.dev/attempt"]),
            )
            patch = {
                "metadata": {
                    "annotations": {
                        "passhat.dev/fake-run-forever": "false",
                        "passhat.dev/fake-exit-code": str(code),
                        SCRIPTED: "true",
                    }
                }
            }
            try:
                self.core.patch_namespaced_pod(meta["name"], self.namespace, patch)
            except ApiException as err:
                if err.status != 404:
                    raise
            self.scripted[meta["name"]] = meta["uid"]


def expected_ledger(
    script: Script, *, tasks: int, trials: int, retries: int, infra_codes: Iterable[int] = (75,)
) -> SlotLedger:
    """The ledger `script` implies: attempts until a pass/fail or retries run out."""
    infra = set(infra_codes)
    ledger = SlotLedger(tasks, trials)
    for task in range(tasks):
        for trial in range(trials):
            for attempt in range(retries + 1):
                code = script(task, trial, attempt)
                if code in infra:
                    verdict = Verdict(Outcome.INFRA_ERROR, "reported")
                    ledger.record(task, trial, attempt, verdict, final=attempt == retries)
                    continue
                outcome = Outcome.PASS if code == 0 else Outcome.FAIL
                ledger.record(task, trial, attempt, Verdict(outcome, "exit_code"), final=True)
                break
    return ledger


def passhat(cluster: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the `passhat` CLI of this interpreter against the test cluster."""
    return subprocess.run(
        [sys.executable, "-c", "import sys; from passhat.cli import main; sys.exit(main())", *args],
        capture_output=True,
        text=True,
        env=cluster.env(),
        timeout=300,
        check=False,
    )
