"""`passhat regrade`: a seeded sample of graded transcripts, graded R times in parallel."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from passhat.api.errors import UsageError
from passhat.grading.grader import Grade, GraderProcesses, run_grader
from passhat.grading.regrade import regrade
from passhat.grading.render import render_regrade
from passhat.records.source import RunDirectory
from passhat.trials.outcomes import Outcome
from tests.unit.regrade_helpers import GRADED, INFRA, write_run_dir

# Noisy on task b only: every other grading of a b transcript fails, the rest agree.
NOISY_ON_B = 'if grep -q "^task b "; then exit $((PASSHAT_GRADING % 2)); fi; exit 0'


def test_a_grader_noisy_on_one_task_gives_its_share_and_names_it(tmp_path: Path) -> None:
    """Noisy on b's 4 of the 12 graded transcripts: noise rate 1/3, the 4 named."""
    check = regrade(RunDirectory(str(write_run_dir(tmp_path))), NOISY_ON_B, times=2)
    assert len(check.transcripts) == GRADED and check.noise_rate == pytest.approx(4 / 12)
    assert [(t.task_id, t.trial, t.attempt) for t in check.noisy] == [
        ("b", 0, 0),
        ("b", 1, 0),
        ("b", 2, 0),
        ("b", 3, 0),
    ]
    out = check.as_json()
    assert out["noisy"][1] == {
        "task_id": "b",
        "trial": 1,
        "attempt": 0,
        "verdicts": {"pass": 1, "fail": 1, "grader_error": 0},
        "original": "fail",
    }
    low, high = out["noise_rate_interval"]
    assert 0.0 < low < 4 / 12 < high < 1.0
    assert out["grader_errors"] == 0 and out["infra_attempts_skipped"] == INFRA


def test_infra_attempts_are_never_sampled(tmp_path: Path) -> None:
    """A grader that crashes on an infra attempt's transcript is never given one, sampled
    or not; the infra attempts are counted apart."""
    source = RunDirectory(str(write_run_dir(tmp_path)))
    crash_on_infra = 'if grep -q ": infra_error$"; then exit 3; fi; exit 0'
    for sample in (None, 5, 11):
        check = regrade(source, crash_on_infra, times=2, sample=sample, seed=3)
        assert check.grader_errors == 0
        assert check.infra_skipped == INFRA and check.graded_attempts == GRADED
        assert len(check.transcripts) == (sample or GRADED)


def test_a_hanging_grader_is_a_grader_error_within_its_timeout(tmp_path: Path) -> None:
    """A grader that hangs on b's transcripts (in a child of its shell) is killed after
    --timeout: a grader error, never a verdict, and the regrade does not wait for it."""
    hangs_on_b = 'if grep -q "^task b "; then sleep 60; exit 0; fi; exit 0'
    started = time.monotonic()
    check = regrade(
        RunDirectory(str(write_run_dir(tmp_path))), hangs_on_b, times=2, timeout=1, parallelism=8
    )
    assert time.monotonic() - started < 15
    hung = [t for t in check.transcripts if t.task_id == "b"]
    assert all(t.verdicts == [] and len(t.errors) == 2 for t in hung)
    assert check.grader_errors == 8 and check.noise_rate == 0.0 and len(check.judged) == 8
    assert check.grader_error_messages == ["the grader timed out after 1 s (killed)"]


def test_gradings_run_in_parallel(tmp_path: Path) -> None:
    """24 gradings of 0.5 s each with --parallelism 12 take about 1 s, not 12."""
    source = RunDirectory(str(write_run_dir(tmp_path)))
    started = time.monotonic()
    check = regrade(source, "sleep 0.5; exit 0", times=2, parallelism=12)
    assert check.gradings == 24 and time.monotonic() - started < 6


def test_the_sample_is_seeded(tmp_path: Path) -> None:
    """The same seed samples the same attempts; another seed (here) others."""
    source = RunDirectory(str(write_run_dir(tmp_path)))

    def chosen(seed: int) -> list[tuple[str, int, int]]:
        check = regrade(source, "exit 0", times=2, sample=4, seed=seed)
        return [(t.task_id, t.trial, t.attempt) for t in check.transcripts]

    assert chosen(1) == chosen(1) and chosen(1) != chosen(2)


def test_disagreement_with_the_recorded_verdict(tmp_path: Path) -> None:
    """A grader that fails everything disagrees with the 5 recorded passes of 12."""
    check = regrade(RunDirectory(str(write_run_dir(tmp_path))), "exit 1", times=3)
    # a 4 passes, b 2, c's retried trial 1 passed: 7 of 12 recorded passes
    assert check.disagree_with_original == pytest.approx(7 / 12)
    assert check.noise_rate == 0.0


def test_grader_that_never_runs_is_an_error(tmp_path: Path) -> None:
    """--grader nonexistent-cmd printed "noise rate 0.000" and exited 0."""
    with pytest.raises(UsageError, match=r"the grader broke on all 24 gradings: .*exited 127"):
        regrade(RunDirectory(str(write_run_dir(tmp_path))), "passhat-no-such-grader-xyz", times=2)


def test_text_report_puts_noisy_transcripts_under_their_flaky_task(tmp_path: Path) -> None:
    """b is flaky and its transcripts are noisy: listed under it, with the grader errors."""
    flag = tmp_path / "once"
    grader = f"if [ ! -e {flag} ]; then touch {flag}; echo boom >&2; exit 3; fi; " + NOISY_ON_B
    source = RunDirectory(str(write_run_dir(tmp_path / "run")))
    check = regrade(source, grader, times=2, parallelism=1)
    text = render_regrade(check, "text", records=source.records(), title="RUN")
    lines = text.splitlines()
    assert lines[0] == (
        "regraded 12 transcripts of RUN 2 times each (24 gradings); sampled 12 of 12 graded "
        "attempts, 1 infra attempts skipped (never graded)"
    )
    assert lines[1].startswith("grader noise rate: 0.364, 95% interval ")
    index = lines.index("  b: 2 of 4 graded attempts passed; 4 of 4 regraded transcripts noisy")
    assert lines[index + 1 : index + 3] == [
        "    noisy: trial 0 attempt 0: pass 1, fail 1 (recorded: pass)",
        "    noisy: trial 1 attempt 0: pass 1, fail 1 (recorded: fail)",
    ]
    assert (
        "grader errors: 1 of 24 gradings gave no verdict (not counted); e.g. the grader "
        "exited 3: boom"
    ) in lines
    # NB: a's first transcript got one verdict only: out of the noise rate's 11


def test_kill_all_stops_running_graders(tmp_path: Path) -> None:
    """What an interrupted regrade does: every grader session still running is killed at
    once (no verdict), and one started after that is killed as it starts."""
    transcript = tmp_path / "t.log"
    transcript.write_text("x\n")
    processes = GraderProcesses()
    grades: list[Grade] = []
    worker = threading.Thread(
        target=lambda: grades.append(
            run_grader("sleep 60; exit 0", str(transcript), timeout=120, processes=processes)
        )
    )
    started = time.monotonic()
    worker.start()
    time.sleep(0.5)
    processes.kill_all()
    worker.join(30)
    late = run_grader("sleep 60; exit 0", str(transcript), timeout=120, processes=processes)
    assert time.monotonic() - started < 20
    assert grades[0].outcome is Outcome.INFRA_ERROR and "killed by signal 9" in grades[0].message
    assert late.outcome is Outcome.INFRA_ERROR
