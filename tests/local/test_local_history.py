"""`passhat history` over three real local runs of one suite, the third with a regression.

Each run is a real `passhat run` of the same eval (suite nightly, tasks a, b, c x 3
trials) in its own default run directory; only task b's outcome differs: it passes in
runs 1 and 2 and fails every trial in run 3. Its history must name b, and only b, as
regressed between runs 2 and 3, and say nothing changed between runs 1 and 2.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.local.local_helpers import eval_doc, passhat, write_eval

SCRIPT = """
case "$PASSHAT_TASK_ID" in
  a) exit 0 ;;
  b) exit {b} ;;
  c) exit $((PASSHAT_TRIAL % 2)) ;;
esac
exit 2
"""


def _run(tmp_path: Path, b_exit: int, *extra: str) -> Path:
    """One `passhat run` of the suite's eval in the default run directory; that directory."""
    doc = eval_doc(SCRIPT.format(b=b_exit), tasks=["a", "b", "c"], trials=3, suite="nightly")
    doc["metadata"]["name"] = "regression"
    path = write_eval(tmp_path / "eval.yaml", doc)
    done = passhat("run", path, "-q", "--format", "json", *extra, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    last = done.stderr.splitlines()[-1]
    return Path(last.removeprefix("passhat: run directory: "))


def test_history_of_three_runs_names_the_regressed_task(tmp_path: Path) -> None:
    """Runs 1 and 2 pass b, run 3 fails it: b regressed between runs 2 and 3, nothing else."""
    metrics = tmp_path / "metrics.prom"
    runs = [
        _run(tmp_path, 0),
        _run(tmp_path, 0),
        _run(tmp_path, 1, "--metrics-textfile", str(metrics)),
    ]
    for run in runs:
        info = json.loads((run / "run.json").read_text())
        assert (info["eval"], info["suite"]) == ("regression", "nightly")
        assert info["startedAt"] <= info["completedAt"]

    # NB: named newest first: the history orders them by their start
    base = tmp_path / "passhat-runs"
    done = passhat("history", *map(str, runs[::-1]), "--format", "json", "--k", "3")
    assert done.returncode == 0, done.stderr
    history = json.loads(done.stdout)
    assert history["suite"] == "nightly"
    assert [r["run"] for r in history["runs"]] == [str(run) for run in runs]
    assert [r["state"] for r in history["runs"]] == ["complete"] * 3
    pass_hat_3 = [r["by_k"][0]["pass_hat_k"] for r in history["runs"]]
    assert pass_hat_3 == [2 / 3, 2 / 3, 1 / 3]
    assert [r["flaky"] for r in history["runs"]] == [1, 1, 1]
    first, second = history["steps"]
    assert (first["changes"], first["unchanged"]) == ([], 3)
    assert [(c["task_id"], c["change"]) for c in second["changes"]] == [("b", "regressed")]
    assert (second["from"], second["to"]) == (str(runs[1]), str(runs[2]))

    # the directory of runs, as text, with the trend beside it
    plot = tmp_path / "trend.svg"
    text = passhat("history", str(base), "--plot", str(plot), "--format", "html")
    assert text.returncode == 0, text.stderr
    assert "run 2 → run 3" in text.stdout and '<td class="regressed">regressed</td>' in text.stdout
    ET.fromstring(plot.read_text())

    # the completed run's textfile carries its suite, for the dashboard's trend panel
    assert 'passhat_suite_pass_hat_k{k="3",namespace="local",suite="nightly"}' in (
        metrics.read_text()
    )
