"""`passhat trial` (agent + grader -> result JSON + exit code) and `passhat regrade`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.local.local_helpers import RunEval, eval_doc, passhat


def _trial(tmp_path: Path, agent: str, *grader: str) -> tuple[int, dict[str, Any] | None, str]:
    result = tmp_path / "result.json"
    transcript = tmp_path / "transcript.log"
    proc = passhat(
        "trial",
        *grader,
        "--transcript",
        transcript,
        "--result",
        result,
        "--",
        "sh",
        "-c",
        agent,
    )
    data = json.loads(result.read_text()) if result.exists() else None
    return proc.returncode, data, proc.stdout


def test_agent_exit_code_without_grader(tmp_path: Path) -> None:
    """Without a grader the agent's exit code decides; its output is echoed and kept."""
    code, result, stdout = _trial(tmp_path, "echo working; exit 1")
    assert code == 1
    assert result is not None and result["outcome"] == "fail"
    assert stdout == "working\n"
    assert (tmp_path / "transcript.log").read_text() == "working\n"


def test_grader_reads_the_transcript(tmp_path: Path) -> None:
    """The grader sees the transcript on stdin and decides pass over the agent's output."""
    grader = ("--grader", "grep -q 'answer: 42'")
    code, result, _ = _trial(tmp_path, "echo 'answer: 42'", *grader)
    assert (code, result and result["outcome"]) == (0, "pass")
    code, result, _ = _trial(tmp_path, "echo 'answer: 41'", *grader)
    assert (code, result and result["outcome"]) == (1, "fail")


def test_grader_result_json_and_transcript_excerpt(tmp_path: Path) -> None:
    """A grader's result JSON line decides; the result file stays under 4 KiB."""
    grader = (
        "--grader",
        'test -s "$PASSHAT_TRANSCRIPT" && echo \'{"outcome": "fail", "score": 0.25}\'',
    )
    code, result, _ = _trial(tmp_path, "head -c 100000 /dev/zero | tr '\\0' x; echo END", *grader)
    assert code == 1
    assert result is not None and result["outcome"] == "fail" and result["score"] == 0.25
    assert result["transcript"].endswith("END\n")
    assert len((tmp_path / "result.json").read_bytes()) < 4096


def test_agent_infra_error_is_not_graded(tmp_path: Path) -> None:
    """An agent exiting 75 is an infra error (exit 75) and the grader is not run."""
    code, result, _ = _trial(tmp_path, "exit 75", "--grader", "exit 0")
    assert code == 75 and result is not None and result["outcome"] == "infra_error"


def test_broken_grader_is_an_infra_error(tmp_path: Path) -> None:
    """A grader that crashes (exit 2) tells nothing about the agent: infra error, exit 75."""
    code, result, _ = _trial(tmp_path, "echo hi", "--grader", "exit 2")
    assert code == 75 and result is not None and result["reason"].startswith("the grader")


def test_trial_inside_passhat_run(run_eval: RunEval, tmp_path: Path) -> None:
    """`passhat trial` as the container command: its result JSON reaches passhat run."""
    doc = eval_doc("", tasks=["even", "odd"], trials=2)
    container = doc["spec"]["trial"]["template"]["spec"]["containers"][0]
    agent = 'echo "trial $PASSHAT_TRIAL"'
    grader = 'grep -q "trial [02468]"'
    container["command"] = [
        *_python_passhat(),
        "trial",
        "--grader",
        grader,
        "--",
        "sh",
        "-c",
        agent,
    ]
    proc, out = run_eval(doc)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    assert sorted((r["trial"], r["outcome"], r["reason"]) for r in records) == [
        (0, "pass", "result"),
        (0, "pass", "result"),
        (1, "fail", "result"),
        (1, "fail", "result"),
    ]


def _python_passhat() -> list[str]:
    from tests.local.local_helpers import PASSHAT

    return list(PASSHAT)


def test_regrade_finds_grader_noise(run_eval: RunEval, tmp_path: Path) -> None:
    """regrade grades each graded transcript R times and reports the ones with pass and
    fail, with the task, trial, attempt and the verdict the run recorded."""
    proc, out = run_eval(eval_doc('echo "task $PASSHAT_TASK_ID"', tasks=["a", "b"], trials=2))
    assert proc.returncode == 0, proc.stderr
    # A grader that is noisy on task a only: every other grading of it fails.
    grader = 'if grep -q "task a"; then exit $((PASSHAT_GRADING % 2)); fi; exit 0'
    regrade = passhat("regrade", out, "--grader", grader, "--times", "2", "--format", "json")
    assert regrade.returncode == 0, regrade.stderr
    report = json.loads(regrade.stdout)
    assert report["transcripts"] == 4 and report["times"] == 2
    noisy = sorted((item["task_id"], item["trial"]) for item in report["noisy"])
    assert noisy == [("a", 0), ("a", 1)]
    assert {item["original"] for item in report["noisy"]} == {"pass"}
    assert report["noise_rate"] == 0.5

    sample = passhat("regrade", out, "--grader", "exit 0", "--sample", "3", "--seed", "7")
    assert sample.returncode == 0 and "regraded 3 transcripts" in sample.stdout
    assert "noise rate: 0.000" in sample.stdout


def test_regrade_of_a_missing_dir_exits_2(tmp_path: Path) -> None:
    """regrade on a directory that does not exist is a one-line error, exit 2."""
    proc = passhat("regrade", tmp_path / "nope", "--grader", "exit 0")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
