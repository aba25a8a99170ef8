"""`passhat regrade SOURCE` on the command line: sources, the spec's grader, errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from passhat.records.layout import transcript_relpath
from tests.unit.records_fake import install, one_line_error, run, sample_client
from tests.unit.regrade_helpers import write_run_dir

SPEC = """\
apiVersion: passhat.dev/v1alpha1
kind: ConsistencyEval
metadata: {name: ev}
spec:
  tasks: [{id: a}, {id: b}, {id: c}]
  trials: 4
  trial:
    template: {spec: {containers: [{name: t, image: busybox, command: ["true"]}]}}
  grading:
    grader:
      image: busybox
      command: [sh, -c, 'if grep -q "^task b "; then exit $((PASSHAT_GRADING % 2)); fi; exit 0']
"""


def test_the_spec_grader_is_used_without_grader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --grader the run's spec.grading.grader command grades (noisy on b: 4 of 12)."""
    run_dir = write_run_dir(tmp_path, spec=SPEC)
    code, out, err = run(capsys, "regrade", str(run_dir), "--times", "2", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["noise_rate"] == pytest.approx(4 / 12)
    assert {item["task_id"] for item in report["noisy"]} == {"b"}


def test_no_grader_anywhere_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No --grader and a spec without grading.grader: exit 2, saying what to give."""
    run_dir = write_run_dir(tmp_path, spec=SPEC.split("  grading:")[0])
    code, _, err = run(capsys, "regrade", str(run_dir))
    one_line_error(code, err, "--grader", "spec.grading.grader")


def test_a_cluster_eval_is_regraded_from_its_archive(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`regrade NAME -n NS` reads records and transcripts through the records API: only
    graded attempts' transcripts are fetched, each once, from the pinned uid."""
    client = sample_client()
    install(monkeypatch, client)
    argv = ("regrade", "ev", "-n", "ns", "--grader", "exit 1", "--times", "3")
    code, out, err = run(capsys, *argv, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["source"] == "ns/ev"
    assert (report["transcripts"], report["missing_transcripts"]) == (5, 1)
    assert report["infra_attempts_skipped"] == 2
    # passes recorded: flaky/one 0-1 and steady 0-0 (steady 1-0 has no transcript)
    assert report["disagree_with_original"] == pytest.approx(2 / 5)
    fetched = [c for c in client.calls if c[0] == "transcript"]
    assert len(fetched) == 6 and all(c[-1] == "0000-1111" for c in fetched)
    assert not any(c[1:4] in {("flaky/one", "0", "0"), ("broken", "1", "0")} for c in fetched)


def test_a_fifo_transcript_is_no_transcript(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A FIFO where a transcript should be would block the grader's read: not regraded."""
    run_dir = write_run_dir(tmp_path)
    log = run_dir / transcript_relpath("a", 0, 0)
    log.unlink()
    os.mkfifo(log)
    code, out, err = run(capsys, "regrade", str(run_dir), "--grader", "exit 0", "--times", "2")
    assert code == 0, err
    assert "1 sampled attempts have no transcript in" in out


@pytest.mark.parametrize(
    ("option", "value", "needle"),
    [
        ("--timeout", "0", "more than 0"),
        ("--parallelism", "0", "1 or more"),
        ("--sample", "0", "1 or more"),
        ("--times", "1", "at least 2"),
        ("--times", "0", "at least 2"),  # not "1 or more", then "at least 2" for 1
    ],
)
def test_bad_options_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, needle: str
) -> None:
    """A zero timeout, parallelism or sample, or a single grading, exits 2 in one line."""
    run_dir = write_run_dir(tmp_path)
    code, _, err = run(capsys, "regrade", str(run_dir), "--grader", "exit 0", option, value)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
