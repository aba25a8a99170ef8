"""`passhat operator` and `passhat report`: options, one-line errors, same output as score."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from passhat import cli
from passhat.operator import live, main
from passhat.operator.config import OperatorConfig
from passhat.operator.policy import TrialPolicy
from passhat.trials.ledger import SlotLedger
from passhat.trials.outcomes import Outcome, Verdict

TEMPLATE = {"spec": {"containers": [{"name": "t", "image": "busybox", "command": ["true"]}]}}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`passhat argv...` in-process: (exit code, stdout, stderr)."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code: int, err: str, *needles: str) -> None:
    """Exit 2 and a single stderr line naming every needle (no traceback)."""
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 or lines[0].startswith("usage:"), err
    for needle in needles:
        assert needle in lines[-1], err


def test_operator_options_reach_run_operator(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Flags become OperatorOptions: namespaces deduplicated, --set applied to the config."""
    seen: list[main.OperatorOptions] = []
    monkeypatch.setattr(main, "run_operator", seen.append)
    code, _, err = run(
        capsys,
        "operator",
        "-n",
        "a",
        "--namespace",
        "b",
        "-n",
        "a",
        "--metrics-port",
        "9100",
        "--allow-privileged-trials-in",
        "lab",
        "--allow-privileged-trials-in",
        "gpu-lab",
        "--allow-priority-class",
        "batch-low",
        "--allow-runtime-class",
        "gvisor",
        "--allow-tolerate-all",
        "--instance",
        "blue",
        "--set",
        "resync_interval_s=1.5",
        "--set",
        "max-listed-tasks=7",
    )
    assert code == 0, err
    (options,) = seen
    assert options.namespaces == ("a", "b")
    assert options.metrics_port == 9100 and options.instance == "blue"
    assert options.trial_policy == TrialPolicy(
        privileged_namespaces=frozenset({"lab", "gpu-lab"}),
        priority_classes=frozenset({"batch-low"}),
        runtime_classes=frozenset({"gvisor"}),
        tolerate_all=True,
    )
    assert options.config.resync_interval_s == 1.5 and options.config.max_listed_tasks == 7


def test_operator_defaults_serve_every_namespace(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --namespace the operator is cluster-wide, metrics on 8080, no privilege."""
    seen: list[main.OperatorOptions] = []
    monkeypatch.setattr(main, "run_operator", seen.append)
    assert run(capsys, "operator")[0] == 0
    (options,) = seen
    assert options.namespaces == () and options.metrics_port == 8080
    assert options.trial_policy == TrialPolicy() and options.config == OperatorConfig()


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["operator", "--metrics-port", "70000"], ["--metrics-port"]),
        (["operator", "--set", "nonsense=1"], ["--set nonsense=1"]),
        (["operator", "--set", "write_threads=many"], ["write_threads=many"]),
        (["operator", "--set", "trial_policy=open"], ["--set trial_policy=open"]),
        (
            ["operator", "--allow-privileged-trials"],
            ["removed", "--allow-privileged-trials-in NS", "operator.privilegedNamespaces"],
        ),
        (["report", "x", "--level", "2"], ["--level"]),
    ],
)
def test_bad_options_are_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], needles: list[str]
) -> None:
    """A bad option exits 2 with one line naming it."""
    code, _, err = run(capsys, *argv)
    one_line_error(code, err, *needles)


def test_missing_credentials_are_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No kubeconfig and no in-cluster config: exit 2 naming the kubeconfig path."""
    missing = str(tmp_path / "no-kubeconfig")
    monkeypatch.setenv("KUBECONFIG", missing)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    for argv in (["operator", "--metrics-port", "0"], ["report", "x", "-n", "y"]):
        code, _, err = run(capsys, *argv)
        one_line_error(code, err, missing)


def test_metrics_port_in_use_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A taken --metrics-port exits 2 before anything starts."""
    monkeypatch.setattr(live, "load_client_config", lambda kubeconfig=None: object())
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = run(capsys, "operator", "--metrics-port", str(port))
    one_line_error(code, err, f"--metrics-port {port}")


def fake_live(monkeypatch: pytest.MonkeyPatch, obj: dict[str, Any]) -> None:
    """Make read_live_eval return `obj` as if read from a cluster."""

    def read(name: str, namespace: str, *, kubeconfig: str | None = None) -> live.LiveEval:
        spec, task_ids, tallies = live.tallies_of(obj, {})
        return live.LiveEval(namespace, name, spec, task_ids, tallies, obj.get("status") or {})

    monkeypatch.setattr(live, "read_live_eval", read)


def test_report_prints_what_score_prints(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """report --format json of a ledger == score --format json of the equivalent rows."""
    ledger = SlotLedger(3, 3)
    rows = []
    outcomes = {
        ("a", 0): [Outcome.PASS],
        ("a", 1): [Outcome.INFRA_ERROR, Outcome.FAIL],
        ("a", 2): [Outcome.PASS],
        ("b", 0): [Outcome.FAIL],
        ("b", 1): [Outcome.FAIL],
        ("b", 2): [Outcome.INFRA_ERROR, Outcome.INFRA_ERROR, Outcome.PASS],
        ("c", 0): [Outcome.PASS],
        ("c", 1): [Outcome.PASS],
        ("c", 2): [Outcome.PASS],
    }
    for (task, trial), attempts in outcomes.items():
        for attempt, outcome in enumerate(attempts):
            final = attempt == len(attempts) - 1
            ledger.record("abc".index(task), trial, attempt, Verdict(outcome, "x"), final=final)
            rows.append({"task_id": task, "trial": trial, "attempt": attempt, "outcome": outcome})
    obj = {
        "metadata": {"name": "ev", "namespace": "ns"},
        "spec": {
            "tasks": [{"id": t} for t in "abc"],
            "trials": 3,
            "ks": [3, 1],
            "trial": {"template": TEMPLATE},
        },
        "status": {
            "phase": "Succeeded",
            "progress": {"done": 9},
            "ledger": ledger.pack(),
            "conditions": [{"type": "Complete", "status": "True", "reason": "AllTrialsFinal"}],
        },
    }
    status: dict[str, Any] = obj["status"]  # type: ignore[assignment]
    fake_live(monkeypatch, obj)
    trials = tmp_path / "trials.jsonl"
    trials.write_text("".join(json.dumps(row) + "\n" for row in rows))
    code, score, err = run(capsys, "score", str(trials), "--k", "1", "--k", "3", "--format", "json")
    assert code == 0, err
    code, report, err = run(capsys, "report", "ev", "-n", "ns", "--format", "json")
    assert code == 0, err
    assert json.loads(report) == json.loads(score)
    assert json.loads(report)[0]["flaky"] == ["a", "b"]
    code, text, err = run(capsys, "report", "ev", "-n", "ns", "--no-intervals")
    assert code == 0, err
    assert "ns/ev: Succeeded, 9/9 trials final" in text
    status["graderCheck"] = {
        "phase": "Done",
        "noiseRate": 0.25,
        "maxNoiseRate": 0.1,
        "stable": False,
        "noisyTotal": 1,
        "judged": 4,
    }
    code, text, err = run(capsys, "report", "ev", "-n", "ns", "--no-intervals")
    assert code == 0, err
    assert (
        "ns/ev: Succeeded, 9/9 trials final; grader noise rate 0.250, max 0.1: NOT stable "
        "(1 of 4 regraded transcripts noisy, status.graderCheck)"
    ) in " ".join(text.split())


def test_report_k_above_trials_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asking a live eval of 2 trials for k=5 exits 2 naming --k."""
    obj = {
        "metadata": {"name": "ev", "namespace": "ns"},
        "spec": {"tasks": [{"id": "a"}], "trials": 2, "trial": {"template": TEMPLATE}},
    }
    fake_live(monkeypatch, obj)
    code, _, err = run(capsys, "report", "ev", "-n", "ns", "--k", "5")
    one_line_error(code, err, "--k 5")


def test_report_intervals_default_to_the_gates_confidence(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gate at confidence 0.8: the report prints 80% intervals (the status's) unless
    --level says otherwise; the verdict is in the title and on stderr, and sets the code."""
    ledger = SlotLedger(2, 2)
    for task in range(2):
        for trial in range(2):
            outcome = Outcome.PASS if task == 0 else Outcome.FAIL
            ledger.record(task, trial, 0, Verdict(outcome, "x"), final=True)
    message = "passHatK at k=2: lower bound 0.0000 of its 80% interval (estimate 0.5000), min 0.5"
    obj = {
        "metadata": {"name": "ev", "namespace": "ns", "generation": 1},
        "spec": {
            "tasks": [{"id": "a"}, {"id": "b"}],
            "trials": 2,
            "trial": {"template": TEMPLATE},
            "gate": {
                "metric": "passHatK",
                "k": 2,
                "min": 0.5,
                "statistic": "lowerBound",
                "confidence": 0.8,
            },
        },
        "status": {
            "ledger": ledger.pack(),
            "conditions": [
                {"type": "Complete", "status": "True", "reason": "AllTrialsFinal"},
                {
                    "type": "GatePassed",
                    "status": "False",
                    "reason": "GateMissed",
                    "message": message,
                },
            ],
        },
    }
    fake_live(monkeypatch, obj)
    code, text, err = run(capsys, "report", "ev", "-n", "ns")
    assert code == 1, err
    assert "[80% bootstrap intervals over tasks]" in text
    assert "; gate FAILED: passHatK at k=2" in text.splitlines()[0]
    assert f"passhat: gate FAILED: {message}" in err
    code, text, _ = run(capsys, "report", "ev", "-n", "ns", "--level", "0.9")
    assert "[90% bootstrap intervals over tasks]" in text


def test_report_wait_rides_out_api_errors_and_says_progress(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--wait: a running eval, then an API error (retried, said), then Complete: exit 0
    after one progress line; --wait 0 on a running eval: one read, exit 3."""
    from passhat.api.errors import UsageError
    from passhat.operator import command

    ledger = SlotLedger(1, 1)
    obj: dict[str, Any] = {
        "metadata": {"name": "ev", "namespace": "ns", "generation": 1},
        "spec": {"tasks": [{"id": "a"}], "trials": 1, "trial": {"template": TEMPLATE}},
        "status": {"ledger": ledger.pack(), "progress": {"done": 0, "running": 1}},
    }
    reads: list[str] = []

    def read(name: str, namespace: str, *, kubeconfig: str | None = None) -> live.LiveEval:
        reads.append(name)
        if len(reads) == 2:
            raise UsageError("cannot read consistencyeval ns/ev: 503 Service Unavailable")
        status = dict(obj["status"])
        if len(reads) >= 3:
            done = SlotLedger(1, 1)
            done.record(0, 0, 0, Verdict(Outcome.PASS, "x"), final=True)
            status = {
                "ledger": done.pack(),
                "progress": {"done": 1, "running": 0},
                "conditions": [{"type": "Complete", "status": "True", "reason": "AllTrialsFinal"}],
            }
        spec, task_ids, tallies = live.tallies_of({**obj, "status": status}, {})
        return live.LiveEval(namespace, name, spec, task_ids, tallies, status, generation=1)

    monkeypatch.setattr(live, "read_live_eval", read)
    monkeypatch.setattr(command, "WAIT_POLL_SECONDS", 0.0)
    code, _, err = run(capsys, "report", "ev", "-n", "ns", "--wait", "--no-intervals")
    assert code == 0, err
    assert len(reads) == 3
    assert "passhat: waiting for ns/ev: 0/1 trial slots final, 1 running" in err
    assert "503 Service Unavailable; retrying" in err
    monkeypatch.setattr(live, "read_live_eval", lambda *_, **__: _running(obj))
    code, _, err = run(capsys, "report", "ev", "-n", "ns", "--wait", "0", "--no-intervals")
    assert code == 3 and "did not finish within 0s" in err


def _running(obj: dict[str, Any]) -> live.LiveEval:
    """`obj` as read from a cluster (generation 1)."""
    spec, task_ids, tallies = live.tallies_of(obj, {})
    return live.LiveEval("ns", "ev", spec, task_ids, tallies, obj["status"], generation=1)
