"""`passhat compare A B` opens trial files, run directories, bundles and ceval/NAME alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from passhat import cli
from passhat.operator import live
from passhat.trials.ledger import SlotLedger
from passhat.trials.outcomes import Outcome, Verdict

TEMPLATE = {"spec": {"containers": [{"name": "t", "image": "busybox", "command": ["true"]}]}}
# A: a passes both trials, b fails both; B (the cluster eval): a passes one, b both.
A_ROWS = [("a", "pass"), ("a", "pass"), ("b", "fail"), ("b", "fail")]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`passhat argv...` in-process: (exit code, stdout, stderr)."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _run_dir(tmp_path: Path) -> Path:
    """A run directory (a bundle has the same layout): trials.jsonl with trial and attempt."""
    out = tmp_path / "run"
    out.mkdir()
    lines = [
        {"task_id": t, "trial": i % 2, "attempt": 0, "outcome": o, "reason": "exit_code"}
        for i, (t, o) in enumerate(A_ROWS)
    ]
    (out / "trials.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return out


@pytest.fixture
def cluster_eval(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """`read_live_eval` answers eval ns/ev from a ledger; the calls it got are recorded."""
    ledger = SlotLedger(2, 2)
    for task, trial, outcome in [(0, 0, "pass"), (0, 1, "fail"), (1, 0, "pass"), (1, 1, "pass")]:
        ledger.record(task, trial, 0, Verdict(Outcome(outcome), "x"), final=True)
    obj: dict[str, Any] = {
        "metadata": {"name": "ev", "namespace": "ns"},
        "spec": {"tasks": [{"id": "a"}, {"id": "b"}], "trials": 2, "trial": {"template": TEMPLATE}},
        "status": {"ledger": ledger.pack()},
    }
    calls: list[tuple[str, str]] = []

    def read(name: str, namespace: str, *, kubeconfig: str | None = None) -> live.LiveEval:
        calls.append((namespace, name))
        if name != "ev":
            raise live.EvalNotFound(
                f'consistencyeval "{name}" not found in namespace "{namespace}"'
            )
        spec, task_ids, tallies = live.tallies_of(obj, {})
        return live.LiveEval(namespace, name, spec, task_ids, tallies, obj["status"])

    monkeypatch.setattr(live, "read_live_eval", read)
    return calls


def test_run_directory_against_a_cluster_eval(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cluster_eval: list[tuple[str, str]]
) -> None:
    """A run directory (A) against ceval/ev -n ns (B): a newly flaky, b newly passing,
    most significant first (b: 0/2 -> 2/2, p 0.33; a: 2/2 -> 1/2, p 1)."""
    run_dir = _run_dir(tmp_path)
    code, out, err = run(
        capsys, "compare", str(run_dir), "ceval/ev", "-n", "ns", "--format", "json"
    )
    assert code == 0, err
    document = json.loads(out)
    assert (document["a"], document["b"]) == ("run", "ns/ev")
    assert [(c["task_id"], c["change"]) for c in document["changes"]] == [
        ("b", "newly_passing"),
        ("a", "newly_flaky"),
    ]
    assert cluster_eval == [("ns", "ev")]
    # the same run as a trial file, and the cluster eval under the kind's long name
    code, from_file, _ = run(
        capsys,
        "compare",
        str(run_dir / "trials.jsonl"),
        "consistencyeval/ev",
        "-n",
        "ns",
        "--format",
        "json",
    )
    assert json.loads(from_file)["changes"] == document["changes"]


def test_bad_sources_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cluster_eval: list[tuple[str, str]]
) -> None:
    """ceval/ without a name, a missing eval, a missing file: exit 2, one line each."""
    run_dir = _run_dir(tmp_path)
    for b, says in [
        ("ceval/", "ceval/: expected ceval/NAME"),
        ("ceval/nope", 'consistencyeval "nope" not found in namespace "ns"'),
        (str(tmp_path / "missing.jsonl"), "missing.jsonl: no such file"),
    ]:
        code, _, err = run(capsys, "compare", str(run_dir), b, "-n", "ns")
        assert code == 2, err
        assert says in err and len(err.strip().splitlines()) == 1, err
