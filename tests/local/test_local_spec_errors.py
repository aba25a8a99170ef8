"""Bad specs and bad run directories exit 2 with one line naming the file and field."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.local.local_helpers import PASSHAT, TIMEOUT, eval_doc, passhat, write_eval


def _with(change: str) -> dict[str, Any]:
    doc = eval_doc("exit 0", tasks=["a", "b"], trials=2)
    spec, container = doc["spec"], doc["spec"]["trial"]["template"]["spec"]["containers"][0]
    if change == "k > trials":
        spec["ks"] = [1, 3]
    elif change == "unknown field":
        spec["trails"] = 3
    elif change == "no containers":
        spec["trial"]["template"]["spec"]["containers"] = []
    elif change == "duplicate task id":
        spec["tasks"].append({"id": "a"})
    elif change == "bad quantity":
        container["resources"] = {"limits": {"memory": "lots"}}
    elif change == "no command":
        del container["command"]
    elif change == "valueFrom":
        container["env"] = [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s"}}}]
    elif change == "missing program":
        container["command"] = ["no-such-program-passhat-test"]
    return doc


CASES = {
    "k > trials": "spec.ks[1]: k=3 is larger than trials=2",
    "unknown field": "spec.trails: unknown field",
    "no containers": "spec.trial.template.spec.containers",
    "duplicate task id": "spec.tasks[2].id",
    "bad quantity": "spec.trial.template.spec.containers[0].resources.limits.memory",
    "no command": "spec.trial.template.spec.containers[0].command: no command",
    "valueFrom": "spec.trial.template.spec.containers[0].env[0].valueFrom",
    "missing program": "spec.trial.template.spec.containers[0].command[0]",
}


@pytest.mark.parametrize("change", list(CASES))
def test_bad_spec_exits_2_naming_the_field(tmp_path: Path, change: str) -> None:
    """Each bad spec gives exit 2, one line with the file and the field path, no traceback."""
    path = write_eval(tmp_path / "eval.yaml", _with(change))
    proc = passhat("run", path, "--out", tmp_path / "out")
    assert proc.returncode == 2, proc.stderr
    assert CASES[change] in proc.stderr
    assert str(path) in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / "trials.jsonl").exists()


def test_existing_run_dir_needs_resume(tmp_path: Path) -> None:
    """Running into a directory that holds a run, without --resume, is refused with exit 2."""
    path = write_eval(tmp_path / "eval.yaml", eval_doc("exit 0", tasks=["a"], trials=1))
    out = tmp_path / "out"
    assert passhat("run", path, "--out", out).returncode == 0
    again = passhat("run", path, "--out", out)
    assert again.returncode == 2
    assert "--resume" in again.stderr and "Traceback" not in again.stderr
    assert passhat("run", path, "--out", out, "--resume").returncode == 0


def test_resume_with_a_changed_spec_is_refused(tmp_path: Path) -> None:
    """--resume refuses an eval that differs from the one the run started with."""
    path = write_eval(tmp_path / "eval.yaml", eval_doc("exit 0", tasks=["a"], trials=1))
    out = tmp_path / "out"
    assert passhat("run", path, "--out", out).returncode == 0
    write_eval(path, eval_doc("exit 0", tasks=["a"], trials=2))
    proc = passhat("run", path, "--out", out, "--resume")
    assert proc.returncode == 2 and "differs" in proc.stderr


def test_unwritable_run_dir_exits_2(tmp_path: Path) -> None:
    """An --out that cannot be created (a file is in the way) is a clear exit 2."""
    path = write_eval(tmp_path / "eval.yaml", eval_doc("exit 0", tasks=["a"], trials=1))
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = passhat("run", path, "--out", blocker / "out")
    assert proc.returncode == 2
    assert "cannot write the run directory" in proc.stderr and "Traceback" not in proc.stderr


def test_missing_eval_file_exits_2(tmp_path: Path) -> None:
    """A missing eval file is one line and exit 2."""
    proc = passhat("run", tmp_path / "nope.yaml", "--out", tmp_path / "out")
    assert proc.returncode == 2 and "nope.yaml" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_transcript_that_cannot_be_written_exits_2(tmp_path: Path) -> None:
    """A transcript path blocked by a file is a one-line error naming it, exit 2."""
    path = write_eval(tmp_path / "eval.yaml", eval_doc("exit 0", tasks=["a"], trials=1))
    out = tmp_path / "out"
    (out / "transcripts").mkdir(parents=True)
    (out / "transcripts" / "a").write_text("in the way")
    proc = passhat("run", path, "--out", out, "--resume")
    assert proc.returncode == 2, proc.stderr
    assert "cannot write the transcript" in proc.stderr and "transcripts/a/0-0.log" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_eval_from_a_pipe_runs_and_is_kept(tmp_path: Path) -> None:
    """`passhat run /dev/stdin` (or `<(...)`): the text is read once, run and copied."""
    text = yaml.safe_dump(eval_doc("exit 0", tasks=["a"], trials=2), sort_keys=False)
    out = tmp_path / "out"
    proc = subprocess.run(
        [*PASSHAT, "run", "/dev/stdin", "--out", str(out), "--format", "json"],
        input=text,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert (out / "spec.yaml").read_text() == text
    assert len((out / "trials.jsonl").read_text().splitlines()) == 2


def test_run_dir_with_nothing_recorded_can_be_started_again(tmp_path: Path) -> None:
    """A run directory whose start failed before any attempt (empty journal, no
    transcripts) does not need --resume: starting afresh there loses nothing."""
    path = write_eval(tmp_path / "eval.yaml", eval_doc("exit 0", tasks=["a"], trials=1))
    out = tmp_path / "out"
    (out / "transcripts").mkdir(parents=True)
    (out / "trials.jsonl").write_text("")
    (out / ".passhat.lock").write_text("")
    assert passhat("run", path, "--out", out).returncode == 0
    (out / "trials.jsonl").write_text("")  # a recorded transcript is still kept: refused
    assert passhat("run", path, "--out", out).returncode == 2
