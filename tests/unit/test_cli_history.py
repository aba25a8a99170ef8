"""`passhat history`: a suite on the cluster or run directories, one rendering for both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from passhat import cli
from passhat.operator import history_command, kube, live
from passhat.trials.ledger import SlotLedger
from passhat.trials.outcomes import Outcome, Verdict
from tests.unit.test_history_rundirs import make_run

TEMPLATE = {"spec": {"containers": [{"name": "t", "image": "busybox", "command": ["true"]}]}}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`passhat argv...` in-process: (exit code, stdout, stderr)."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def eval_object(
    name: str,
    created: str,
    *,
    b_passes: bool,
    suite: str | None = None,
    label: str | None = None,
    complete: bool = True,
) -> dict[str, Any]:
    """An eval of tasks a, b (2 trials) whose ledger says a passes and b as asked; its
    suite in spec.suite (`suite`) or the label (`label`)."""
    ledger = SlotLedger(2, 2)
    for task in (0, 1):
        for trial in (0, 1):
            outcome = Outcome.PASS if task == 0 or b_passes else Outcome.FAIL
            ledger.record(task, trial, 0, Verdict(outcome, "exit_code"), final=True)
    conditions = [{"type": "Complete", "status": "True" if complete else "False"}]
    meta = {"name": name, "namespace": "ns", "creationTimestamp": created}
    return {
        "metadata": {**meta, "labels": {"passhat.dev/suite": label} if label else {}},
        "spec": {
            "tasks": [{"id": "a"}, {"id": "b"}],
            "trials": 2,
            "trial": {"template": TEMPLATE},
            **({"suite": suite} if suite else {}),
        },
        "status": {"ledger": ledger.pack(), "conditions": conditions},
    }


class FakeKube:
    """What cluster_runs asks of the API server: the evals of a namespace."""

    evals: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, _config: Any) -> None:
        pass

    def list_evals(self, namespace: str | None) -> list[dict[str, Any]]:
        return [e for e in self.evals if e["metadata"]["namespace"] == namespace]

    def get_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    def close(self) -> None:
        pass


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> type[FakeKube]:
    """Three evals of suite nightly (two by spec.suite, one by label), another suite's."""
    FakeKube.evals = [
        eval_object("third", "2026-12-05T09:00:00Z", b_passes=False, suite="nightly"),
        eval_object("first", "2026-12-05T07:00:00Z", b_passes=True, label="nightly"),
        eval_object("second", "2026-12-05T08:00:00Z", b_passes=True, suite="nightly"),
        eval_object("weekly", "2026-12-05T06:00:00Z", b_passes=True, suite="weekly"),
        eval_object("running", "2026-12-05T10:00:00Z", b_passes=True, complete=False),
    ]
    monkeypatch.setattr(kube, "Kube", FakeKube)
    monkeypatch.setattr(live, "client_config", lambda kubeconfig=None: None)
    return FakeKube


def test_cluster_suite_in_creation_order_with_the_regression(
    capsys: pytest.CaptureFixture[str], cluster: type[FakeKube]
) -> None:
    """history nightly -n ns: its three evals oldest first, b regressed from second to third."""
    code, out, _ = run(capsys, "history", "nightly", "-n", "ns", "--format", "json")
    assert code == 0
    document = json.loads(out)
    assert [r["run"] for r in document["runs"]] == ["first", "second", "third"]
    assert [r["state"] for r in document["runs"]] == ["complete"] * 3
    assert document["steps"][0]["changes"] == []
    (change,) = document["steps"][1]["changes"]
    assert (change["task_id"], change["change"]) == ("b", "regressed")


def test_an_unknown_suite_and_no_cluster_say_both_readings(
    capsys: pytest.CaptureFixture[str], cluster: type[FakeKube]
) -> None:
    """A name with no eval (or a mistyped directory) is exit 2 naming both readings."""
    code, _, err = run(capsys, "history", "nightlyy", "-n", "ns")
    assert code == 2
    assert "nightlyy: no such directory; as a suite on the cluster: " in err
    assert 'no consistencyeval of suite "nightlyy" in namespace "ns"' in err


def test_a_running_eval_is_shown_as_running(cluster: type[FakeKube]) -> None:
    """eval_run: Complete=False and not terminal is `running`, with its creation time."""
    obj = eval_object("r", "2026-12-05T10:00:00Z", b_passes=True, complete=False)
    found = history_command.eval_run(obj, {})
    assert (found.title, found.state, found.suite) == ("r", "running", None)
    assert found.started == 1796464800.0


def test_directories_with_plot_and_suite_option(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """history DIR... --plot trend.svg writes the chart; --suite with a cluster suite is a
    usage error; --plot must name an .svg file."""
    make_run(tmp_path / "runs" / "r1")
    make_run(tmp_path / "runs" / "r2", started="2026-12-05T08:00:00Z", completed=None)
    plot = tmp_path / "trend.svg"
    code, out, err = run(capsys, "history", str(tmp_path / "runs"), "--plot", str(plot))
    assert code == 0, err
    assert plot.read_text().startswith("<svg") and f"wrote {plot}" in err
    assert "suite nightly, 2 runs" in out and "incomplete" in out
    code, _, err = run(capsys, "history", "nightly", "--suite", "x")
    assert code == 2 and "--suite: nightly already names the suite" in err
    code, _, err = run(capsys, "history", str(tmp_path / "runs"), "--plot", "t.png")
    assert code == 2 and "expected a file name ending in .svg" in err
