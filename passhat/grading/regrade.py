"""Regrade stored transcripts on this machine: `passhat regrade SOURCE --grader CMD`.

The source is any `passhat.records.Source` (a run directory, a bundle, a cluster eval
read through the records API), so regrading never grows a branch per kind of source. A
seeded sample of the graded attempts (`noise.sample_graded`) is fetched once each into a
private temporary directory (laid out like a run directory's transcripts), then graded
`times` times each by a pool of `parallelism` threads, each grading a `run_grader` with a
timeout. A grader that hangs or crashes gives no verdict (a grader error, reported apart);
Ctrl-C kills every grader still running.

The grader sees what `passhat trial --grader` gives it (the transcript on stdin and at
`$PASSHAT_TRANSCRIPT`, `PASSHAT_TASK_ID`, `PASSHAT_TRIAL`, `PASSHAT_ATTEMPT`) and
`PASSHAT_GRADING`, the 0-based number of this regrade of the transcript. With `grade`
each grading runs some other way (`passhat regrade NAME --pods`: a pod in the eval's
namespace); sampling, the pool and the report are the same.
"""

from __future__ import annotations

import os
import shlex
import tempfile
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from passhat.api.errors import UsageError
from passhat.grading.grader import Grade, GraderProcesses, run_grader
from passhat.grading.noise import GraderCheck, TranscriptGrades, sample_graded
from passhat.records.layout import transcript_relpath
from passhat.records.record import AttemptRecord
from passhat.records.source import Source
from passhat.trials.outcomes import Outcome

if TYPE_CHECKING:
    from concurrent.futures import Future

__all__ = ["DEFAULT_PARALLELISM", "DEFAULT_TIMEOUT_S", "GradeOne", "regrade", "spec_grader"]

DEFAULT_PARALLELISM = 4

# One grading run some other way than a local command: (the transcript's grades so far,
# the grading's number 0..times-1, the transcript's file) -> its grade.
GradeOne = Callable[[TranscriptGrades, int, str], Grade]
DEFAULT_TIMEOUT_S = 300.0


def spec_grader(source: Source) -> str | None:
    """The shell command of the source's `spec.grading.grader` (its `command` joined with
    shell quoting), None when the source keeps no spec or the spec declares no grader."""
    from passhat.api.load import parse_eval

    text = source.spec_text()
    if text is None:
        return None
    grader = parse_eval(text, f"{source.title} (spec)").spec.grading.grader
    return None if grader is None else shlex.join(grader.command)


def _check_options(*, sample: int | None, times: int, parallelism: int, timeout: float) -> None:
    if times < 2:
        raise UsageError("--times must be at least 2 (noise needs two gradings)")
    if sample is not None and sample < 1:
        raise UsageError("--sample must be at least 1")
    if parallelism < 1:
        raise UsageError("--parallelism must be at least 1")
    if not timeout > 0:
        raise UsageError("--timeout must be more than 0 seconds")


def regrade(
    source: Source,
    grader: str,
    *,
    records: Sequence[AttemptRecord] | None = None,
    sample: int | None = None,
    times: int = 3,
    seed: int = 0,
    parallelism: int = DEFAULT_PARALLELISM,
    timeout: float = DEFAULT_TIMEOUT_S,
    grade: GradeOne | None = None,
) -> GraderCheck:
    """Grade a seeded sample of the source's graded attempts `times` times each
    (`records`: the source's, when the caller has read them already). `grade`: what runs
    one grading instead of the shell command `grader` (which then only names it), e.g.
    a pod on the cluster (`passhat.operator.regrade_pods`)."""
    _check_options(sample=sample, times=times, parallelism=parallelism, timeout=timeout)
    chosen = sample_graded(
        source.records() if records is None else records, sample=sample, seed=seed
    )
    if not chosen.chosen:
        raise UsageError(
            f"{source.title}: no graded attempt to regrade ({chosen.infra_skipped} infra "
            "attempts, never graded, are not sampled)"
        )
    with tempfile.TemporaryDirectory(prefix="passhat-regrade-") as tmp:
        todo: list[tuple[TranscriptGrades, str]] = []
        for record in chosen.chosen:
            data = source.transcript(record)
            if data is None:
                continue
            task_id, trial, attempt = record["task_id"], record["trial"], record["attempt"]
            path = os.path.join(tmp, transcript_relpath(task_id, trial, attempt))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(data)
            grades = TranscriptGrades(task_id, trial, attempt, original=record["outcome"])
            todo.append((grades, path))
        if not todo:
            raise UsageError(
                f"{source.title}: none of the {len(chosen.chosen)} sampled attempts has a "
                "transcript (not archived, or deleted)"
            )
        _grade_all(todo, grader, times=times, parallelism=parallelism, timeout=timeout, grade=grade)
    check = GraderCheck.build(
        times=times,
        sample=chosen,
        grades=[grades for grades, _ in todo],
        missing=len(chosen.chosen) - len(todo),
    )
    if check.grader_errors == check.gradings:
        # NB: else a grader that never ran (a typo) reads as "noise rate 0.000"
        raise UsageError(
            f"--grader: the grader broke on all {check.gradings} gradings: "
            f"{check.grader_error_messages[0]}"
        )
    return check


def _grade_all(
    todo: list[tuple[TranscriptGrades, str]],
    grader: str,
    *,
    times: int,
    parallelism: int,
    timeout: float,
    grade: GradeOne | None = None,
) -> None:
    """Run every grading in the pool; each transcript's verdicts in grading order."""
    # NB: imported here: building the CLI parser imports this module, and every trial
    # pod's `passhat trial` builds it
    from concurrent.futures import ThreadPoolExecutor

    processes = GraderProcesses()
    pool = ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="passhat-grader")
    try:
        futures: list[tuple[TranscriptGrades, Future[Grade]]] = []
        for grades, path in todo:
            for number in range(times):
                if grade is not None:
                    futures.append((grades, pool.submit(grade, grades, number, path)))
                    continue
                env = dict(os.environ)
                env.update(
                    PASSHAT_TASK_ID=grades.task_id,
                    PASSHAT_TRIAL=str(grades.trial),
                    PASSHAT_ATTEMPT=str(grades.attempt),
                    PASSHAT_GRADING=str(number),
                )
                future = pool.submit(
                    run_grader, grader, path, env=env, timeout=timeout, processes=processes
                )
                futures.append((grades, future))
        for grades, future in futures:
            done = future.result()
            if done.outcome is Outcome.INFRA_ERROR:
                grades.errors.append(_error_message(done))
            else:
                grades.verdicts.append(done.outcome.value)
    except BaseException:
        # NB: Ctrl-C reaches this thread only: stop the graders the pool is running
        processes.kill_all()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _error_message(grade: Grade) -> str:
    return grade.message or "the grader reported an infra error"
