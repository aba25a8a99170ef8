"""The Inspect result adapter: a trial's outcome from the log `inspect eval` wrote, not its
exit code; the eval `passhat init inspect` writes. Logs from tests/fixtures/inspect."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from passhat.api.load import parse_eval
from passhat.cli import main
from passhat.harness.inspect_task import (
    INSPECT_ERROR,
    INSPECT_NO_LOG,
    eval_document,
    grade_log,
    inspect_command,
)
from passhat.trials.outcomes import Outcome

LOGS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "inspect"


def _dir_with(tmp_path: Path, name: str) -> Path:
    shutil.copyfile(LOGS / name, tmp_path / name)
    return tmp_path


def test_grade_from_the_sample_score(tmp_path: Path) -> None:
    """The sample's score decides (numeric: `one` 1.0 passes, `close` 0.99 fails)."""
    logs = _dir_with(tmp_path, "numeric.eval")
    assert grade_log(logs, sample_id="one").outcome is Outcome.PASS
    assert grade_log(logs, sample_id="close").outcome is Outcome.FAIL


def test_sample_error_is_an_infra_error(tmp_path: Path) -> None:
    """An Inspect sample error is an infra error (retried), whatever inspect's exit code."""
    grade = grade_log(_dir_with(tmp_path, "trial-error.eval"), sample_id="b")
    assert (grade.outcome, grade.reason) == (Outcome.INFRA_ERROR, INSPECT_ERROR)


def test_no_log_or_no_such_sample_is_an_infra_error(tmp_path: Path) -> None:
    """inspect eval that wrote nothing (it could not start), or not the sample asked for."""
    assert grade_log(tmp_path, sample_id="1").reason == INSPECT_NO_LOG
    grade = grade_log(_dir_with(tmp_path, "numeric.eval"), sample_id="nine")
    assert (grade.outcome, grade.reason) == (Outcome.INFRA_ERROR, INSPECT_NO_LOG)


def test_cut_short_log_is_an_infra_error(tmp_path: Path) -> None:
    """A log cut short (the pod killed while Inspect wrote it) is an infra error."""
    data = (LOGS / "numeric.eval").read_bytes()
    (tmp_path / "numeric.eval").write_bytes(data[: len(data) // 2])
    grade = grade_log(tmp_path, sample_id="one")
    assert grade.outcome is Outcome.INFRA_ERROR
    assert "cut short" in grade.message


def test_scorer_option_reaches_the_grade(tmp_path: Path) -> None:
    """--scorer includes: the `start` sample ("42 it is") passes, as it fails under match;
    a scorer the log lacks leaves the trial ungraded (infra error, its message says why)."""
    logs = _dir_with(tmp_path, "trial-start.eval")
    assert grade_log(logs, sample_id="start").outcome is Outcome.FAIL
    assert grade_log(logs, sample_id="start", scorer="includes").outcome is Outcome.PASS
    assert "no scorer 'nope'" in grade_log(logs, sample_id="start", scorer="nope").message


def test_two_epochs_of_the_sample_are_not_one_trial(tmp_path: Path) -> None:
    """A log with the sample twice (extra args gave --epochs) is not silently one trial."""
    grade = grade_log(_dir_with(tmp_path, "alpha.eval"), sample_id="1")
    assert (grade.outcome, grade.reason) == (Outcome.INFRA_ERROR, INSPECT_NO_LOG)


def test_inspect_command_is_one_sample_one_epoch() -> None:
    """The trial's inspect eval: the sample, one epoch, the log where the adapter reads."""
    command = inspect_command("t.py@x", sample_id="7", log_dir="/tmp/l", model="none")
    assert command[:3] == ["inspect", "eval", "t.py@x"]
    joined = " ".join(command)
    assert "--sample-id 7" in joined and "--epochs 1" in joined and "--log-dir /tmp/l" in joined


def test_eval_document_loads_as_a_consistency_eval() -> None:
    """What init prints is a valid ConsistencyEval: samples as tasks, trials, ks."""
    import yaml

    document = eval_document(
        task="/app/task.py@t",
        name="My_Task",
        sample_ids=[1, "two"],
        trials=5,
        ks=[5, 1],
        image="registry/inspect:1",
        model="none",
        scorer="includes",
        timeout_seconds=60,
        parallelism=2,
    )
    loaded = parse_eval(yaml.safe_dump(document))
    assert loaded.metadata.name == "my-task"
    assert [t.id for t in loaded.spec.tasks or []] == ["1", "two"]
    assert (loaded.spec.trials, loaded.spec.ks) == (5, [1, 5])
    assert document["spec"]["trial"]["template"]["spec"]["containers"][0]["command"][-2:] == [
        "--scorer",
        "includes",
    ]


def test_trial_inspect_needs_the_task_id(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`passhat trial --inspect` outside a trial (no PASSHAT_TASK_ID) is a usage error."""
    monkeypatch.delenv("PASSHAT_TASK_ID", raising=False)
    assert main(["trial", "--inspect", "t.py"]) == 2
    assert "PASSHAT_TASK_ID" in capsys.readouterr().err
