"""An Inspect task run as passhat trials, for real: `passhat init inspect`, `passhat run`,
each trial a real `inspect eval --model none` of one sample, graded from its log.

Needs inspect-ai (not a passhat dependency): `inspect` on PATH, or PASSHAT_TEST_INSPECT
naming it (docs/development.md); skipped without it. The task (tasks.py@trials) answers
by a plan keyed on the epoch, which under passhat is PASSHAT_TRIAL + 1: the randomness the
test controls, so `inspect eval --epochs 3` and three passhat trials see the same answers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.local.local_helpers import PASSHAT, passhat

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "tests" / "fixtures" / "inspect" / "tasks.py"
INSPECT = os.environ.get("PASSHAT_TEST_INSPECT") or shutil.which("inspect")

pytestmark = pytest.mark.skipif(INSPECT is None, reason="inspect-ai is not installed")


def _init(*args: str) -> dict[str, object]:
    assert INSPECT is not None
    done = passhat("init", "inspect", f"{TASKS}@trials", "--inspect-command", INSPECT, *args)
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)  # type: ignore[no-any-return]


def test_init_lists_the_samples_as_tasks() -> None:
    """The samples become the tasks; the trial is `passhat trial --inspect` of the task."""
    doc = _init("--trials", "3", "--k", "1", "--k", "3")
    spec = doc["spec"]
    assert isinstance(spec, dict)
    assert [t["id"] for t in spec["tasks"]] == ["steady", "wobbly", "broken"]
    assert (spec["trials"], spec["ks"]) == (3, [1, 3])
    (container,) = spec["trial"]["template"]["spec"]["containers"]
    assert container["command"] == [
        "passhat", "trial", "--inspect", f"{TASKS}@trials", "--model", "none",
    ]  # fmt: skip


def test_init_refuses_a_file_of_several_tasks() -> None:
    """A task file with several tasks: exit 2 naming them."""
    assert INSPECT is not None
    done = passhat("init", "inspect", str(TASKS), "--inspect-command", INSPECT)
    assert done.returncode == 2
    assert "holds several tasks (flaky, trials, alpha" in done.stderr


def test_run_equals_score_of_inspect_epochs(tmp_path: Path) -> None:
    """pass^k of `passhat run` over the init'd eval equals `passhat score` of the same task
    run by `inspect eval --epochs 3`; an Inspect sample error is an infra error, retried."""
    assert INSPECT is not None
    doc = _init("--trials", "3", "--k", "1", "--k", "2", "--k", "3")
    (container,) = doc["spec"]["trial"]["template"]["spec"]["containers"]  # type: ignore[index]
    # NB: this checkout's passhat and inspect-ai's venv, as an image would hold them
    container["command"] = [*PASSHAT, *container["command"][1:]]
    path = f"{Path(INSPECT).parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
    container["env"] = [
        {"name": "PATH", "value": path},
        {"name": "PYTHONPATH", "value": str(ROOT)},
    ]
    eval_file = tmp_path / "eval.yaml"
    eval_file.write_text(yaml.safe_dump(doc))
    run = passhat("run", eval_file, "--out", tmp_path / "out", "--format", "json", timeout=600)
    assert run.returncode == 0, run.stderr
    by_run = json.loads(run.stdout)

    logs = tmp_path / "logs"
    subprocess.run(
        [INSPECT, "eval", f"{TASKS}@trials", "--model", "none", "--epochs", "3",
         "--log-dir", str(logs), "--display", "none"],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (log,) = logs.glob("*.eval")
    score = passhat("score", log, "--k", "1", "--k", "2", "--k", "3", "--format", "json")
    assert score.returncode == 0, score.stderr
    # NB: the one infra error (retried) is passhat's: inspect --epochs never raised
    assert [row.pop("infra_error_rate") for row in by_run] == [0.1, 0.1, 0.1]
    assert by_run == [
        {key: value for key, value in row.items() if key != "infra_error_rate"}
        for row in json.loads(score.stdout)
    ]
    # the plan: steady 3/3, wobbly 2/3, broken 0/3 -> pass^3 = 1/3, pass^1 = 5/9
    by_k = {row["k"]: row for row in by_run}
    assert by_k[3]["pass_hat_k"] == pytest.approx(1 / 3)
    assert by_k[1]["pass_hat_k"] == pytest.approx(5 / 9)
    records = [json.loads(line) for line in (tmp_path / "out" / "trials.jsonl").open()]
    errors = [
        (r["task_id"], r["trial"], r["attempt"]) for r in records if r["outcome"] == "infra_error"
    ]
    # the Inspect sample error of wobbly's first attempt, graded from the log, retried
    assert errors == [("wobbly", 0, 0)]
    assert len(records) == 10


def test_bench_inspect_eval_memory_smoke() -> None:
    """bench/inspect_eval_memory.py makes a real log with Inspect and scores it (tiny: 4
    samples x 2 epochs of 8 KB); its JSON has the figures docs/scoring.md cites."""
    assert INSPECT is not None
    done = subprocess.run(
        [
            sys.executable, str(ROOT / "bench" / "inspect_eval_memory.py"),
            "--inspect", INSPECT, "--samples", "4", "--epochs", "2", "--output-kb", "8",
        ],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["samples"], result["epochs"], result["score_eval_exit"]) == (4, 2, 0)
    assert result["score_eval_peak_rss_mib"] > 0 and result["eval_mib"] > 0
