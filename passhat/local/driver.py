"""`passhat run eval.yaml`: one local eval run, from the spec file to the report.

This is the glue around the executor: check the spec against this machine (`make_plan`),
prepare or reopen the run directory (`passhat.local.rundir`: lock, `spec.yaml`, journal),
rebuild the ledger from the journal on `--resume`, set up the cgroup pool (or the RSS
fallback), run the loop in its thread while the main thread waits for signals, then score
the journal exactly as `passhat score DIR/trials.jsonl` would and print the report.
Exit codes (`passhat.api.gate`, shared with `passhat report` and `passhat score --gate`):
0 done and the gate passes (or no gate), 1 the gate fails (or spec.budget stopped a run
with a gate), 2 usage or spec error (raised as PasshatError for the CLI), 3 not finished
(stopped at spec.activeDeadlineSeconds, or by spec.budget without a gate; resumable),
130 interrupted by a signal (resumable).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO, cast

from passhat.api.errors import InputError, PasshatError, SpecError, UsageError
from passhat.api.gate import (
    EXIT_GATE_FAILED,
    EXIT_NOT_FINISHED,
    EXIT_PASSED,
    GATE_SEED,
    evaluate_gate,
)
from passhat.api.load import (
    parse_eval,
    read_eval_text,
    read_local_config_maps,
    resolve_tasks,
)
from passhat.api.podsecurity import template_safety_problems
from passhat.api.spec import ConsistencyEval
from passhat.local import cgroup
from passhat.local.capacity import Capacity
from passhat.local.executor import Executor
from passhat.local.journal import Journal, JournalError, read_numbered_journal
from passhat.local.plan import Plan, make_plan
from passhat.local.progress import display_for
from passhat.local.rundir import (
    JOURNAL,
    TRANSCRIPTS,
    complete_run,
    default_base,
    latest_run_dir,
    new_run_dir,
    prepare_run_dir,
)
from passhat.local.sandbox import CONTAINER, TranscriptError
from passhat.local.spawner import SpawnError
from passhat.records.bundle import transcript_links, write_file
from passhat.records.layout import REPORT
from passhat.records.record import AttemptRecord, infra_errors_by_reason
from passhat.stats import KIntervals, TaskTally, summarize_many, tally
from passhat.trials.ledger import LedgerError, SlotLedger
from passhat.trials.outcomes import Outcome, Verdict
from passhat.trials.strips import strips_of
from passhat.trials.usage import summarize_usage

__all__ = [
    "EXIT_FAILED",
    "EXIT_GATE_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "RunOptions",
    "run",
]

EXIT_OK = EXIT_PASSED
# The run stopped before every slot was final: past spec.activeDeadlineSeconds.
EXIT_FAILED = EXIT_NOT_FINISHED
EXIT_INTERRUPTED = 130

# errno values of an exec that failed because of the command itself
_EXEC_ERRORS = frozenset(
    {
        errno.ENOENT,
        errno.EACCES,
        errno.ENOEXEC,
        errno.ENOTDIR,
        errno.ELOOP,
        errno.ENAMETOOLONG,
        errno.ETXTBSY,
        errno.EPERM,
        errno.EISDIR,
        errno.ELIBBAD,
    }
)


@dataclass(frozen=True)
class RunOptions:
    """The options of `passhat run`."""

    eval_path: str
    out: str | None = None
    resume: bool = False
    format: str = "text"
    metrics_textfile: str | None = None
    quiet: bool = False


def _out_dir(options: RunOptions, eval_name: str) -> str:
    """The run directory: `--out`, else a new one per run (`--resume`: the latest one)."""
    if options.out:
        return os.path.abspath(options.out)
    base = default_base(eval_name)
    return latest_run_dir(base, eval_name) if options.resume else new_run_dir(base)


def _rebuild_ledger(
    plan: Plan,
    numbered: Sequence[tuple[int, dict[str, Any]]],
    journal_path: str,
    accepted: list[dict[str, Any]] | None = None,
) -> SlotLedger:
    """The ledger of the journal's records; a record that does not fit names its file line.

    The records the ledger took (not duplicates of an attempt already recorded) are
    appended to `accepted`: the report counts those, never a duplicated line twice.
    """
    ledger = SlotLedger(len(plan.task_ids), plan.trials)
    index = {task_id: i for i, task_id in enumerate(plan.task_ids)}
    for number, record in numbered:
        task = index.get(record["task_id"])
        try:
            if task is None:
                raise LedgerError(f'task "{record["task_id"]}" is not in the eval')
            verdict = Verdict(Outcome(record["outcome"]), str(record["reason"]))
            final = record.get("final")
            if not isinstance(final, bool):
                final = plan.retry.is_final(verdict, int(record["attempt"]))
            took = ledger.record(
                task, int(record["trial"]), int(record["attempt"]), verdict, final=final
            )
        except (LedgerError, ValueError, TypeError) as err:
            raise InputError(
                f"does not belong to this eval: {err}", path=journal_path, line=number
            ) from None
        if took and accepted is not None:
            accepted.append(record)
    return ledger


def _pool(plan: Plan, stderr: TextIO) -> cgroup.Pool | None:
    """The run's cgroups when the spec has limits and this machine lets passhat make them.

    Without limits there is none: on cgroup v1, moving a process into a cgroup after the
    machine was idle for a moment waits for an RCU grace period (about 6 ms here:
    `bench/cgroup_move.py`), which every attempt of a real eval would pay. What leaves an
    attempt's session is then caught by the subreaper (`passhat.local.orphans`).
    """
    if plan.limits.memory is None and plan.limits.cpu is None:
        return None
    hierarchy = cgroup.detect()
    problem = "no writable memory cgroup"
    if hierarchy is not None:
        pool = cgroup.Pool(hierarchy, memory_limit=plan.limits.memory, cpu_limit=plan.limits.cpu)
        try:
            pool.release(pool.acquire())
            return pool
        except OSError as err:
            problem = f"cannot create a cgroup: {err.strerror or err}"
            with contextlib.suppress(OSError):
                pool.close()
    if plan.limits.memory is not None:
        stderr.write(
            f"passhat: {problem}; the memory limit is enforced by sampling process RSS "
            "and the cpu limit is not enforced\n"
        )
    return None


def _tasks(evaluation: ConsistencyEval, eval_path: str) -> list[Any]:
    spec = evaluation.spec
    maps = read_local_config_maps(spec, os.path.dirname(os.path.abspath(eval_path)))
    return resolve_tasks(spec, maps if spec.tasks_from else {}, source=eval_path)


def _execute(executor: Executor, deadline_s: int | None = None) -> tuple[bool, bool]:
    """Run the loop in its own thread; SIGINT / SIGTERM stop it (main thread only), and
    so does `deadline_s` (spec.activeDeadlineSeconds) passing. (finished, deadline passed)."""
    outcome: list[bool] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            outcome.append(executor.run())
        except BaseException as err:
            failure.append(err)

    thread = threading.Thread(target=target, name="passhat-executor")
    handlers: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            handlers[sig] = signal.signal(sig, lambda *_: executor.stop())
    late = False
    ends = None if deadline_s is None else time.monotonic() + deadline_s
    try:
        thread.start()
        while thread.is_alive():
            thread.join(0.5 if ends is None else max(0.0, min(0.5, ends - time.monotonic())))
            if ends is not None and not late and time.monotonic() >= ends:
                late = True
                executor.stop()
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    if failure:
        raise failure[0]
    return outcome[0], late and not outcome[0]


def run(
    options: RunOptions,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    environ: Mapping[str, str] = os.environ,
) -> int:
    """Run the eval in `options.eval_path` locally; the exit code (PasshatError for exit 2)."""
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    eval_path = options.eval_path
    # NB: read once and kept: the eval may come from a pipe (`passhat run <(...)`).
    eval_text = read_eval_text(eval_path)
    evaluation = parse_eval(eval_text, eval_path)
    tasks = _tasks(evaluation, eval_path)
    capacity = Capacity.of_machine()
    plan = make_plan(
        evaluation,
        tasks,
        source=eval_path,
        eval_dir=os.path.dirname(os.path.abspath(eval_path)),
        environ=environ,
        capacity=capacity,
    )
    if options.metrics_textfile:
        _check_metrics_textfile(options.metrics_textfile)
    out = _out_dir(options, plan.eval_name)
    lock = prepare_run_dir(out, eval_path, eval_text, evaluation, options.resume)
    try:
        return _run_locked(options, evaluation, plan, capacity, out, stdout, stderr, environ)
    finally:
        os.close(lock)


def _run_locked(
    options: RunOptions,
    evaluation: ConsistencyEval,
    plan: Plan,
    capacity: Capacity,
    out: str,
    stdout: TextIO,
    stderr: TextIO,
    environ: Mapping[str, str],
) -> int:
    eval_path = options.eval_path
    journal_path = os.path.join(out, JOURNAL)
    numbered = read_numbered_journal(journal_path, repair=True)
    # NB: the records the ledger took; a duplicated journal line is never counted twice
    records: list[dict[str, Any]] = []
    ledger = _rebuild_ledger(plan, numbered, journal_path, records)
    for problem in template_safety_problems(evaluation.spec.trial.template):
        stderr.write(
            f"passhat: warning: {eval_path}: {problem} (the operator refuses this unless "
            "the cluster admin grants the namespace privileged trials; ignored locally)\n"
        )
    try:
        journal = Journal(journal_path)
    except OSError as err:
        raise InputError(f"cannot write: {err.strerror or err}", path=journal_path) from None
    pool = _pool(plan, stderr)
    display = display_for(stderr, plan.eval_name, quiet=options.quiet)

    def on_record(record: dict[str, Any]) -> None:
        records.append(record)
        if record.get("spend_error"):
            stderr.write(
                f"passhat: warning: task {record['task_id']} trial {record['trial']} attempt "
                f"{record['attempt']}: result JSON {record['spend_error']}; what it spent is "
                f"left out of the sums (the attempt is recorded: {record['outcome']})\n"
            )
        if record.get("result_error"):
            stderr.write(
                f"passhat: warning: task {record['task_id']} trial {record['trial']} attempt "
                f"{record['attempt']}: $PASSHAT_RESULT ignored, not a result JSON: "
                f"{record['result_error']}; the exit code decided: {record['outcome']}\n"
            )

    executor = Executor(
        plan,
        ledger=ledger,
        journal=journal,
        transcripts=os.path.join(out, TRANSCRIPTS),
        capacity=capacity,
        pool=pool,
        on_record=on_record,
        on_progress=display,
        fresh_transcripts=not numbered,
        budget=evaluation.spec.budget,
        spent_usd=summarize_usage(records).total.cost_usd,
    )
    try:
        finished, late = _execute(executor, evaluation.spec.active_deadline_seconds)
        journal.close()
    except (OSError, SpawnError) as err:
        raise _execution_error(err, plan, eval_path, out) from None
    finally:
        with contextlib.suppress(OSError):
            journal.close()
        if pool is not None:
            pool.close()
        if display is not None:
            display.close()
    tallies = tally((r["task_id"], r["outcome"]) for r in records)
    ks = evaluation.spec.report_ks
    summaries = summarize_many(tallies, ks)
    gate = evaluation.spec.gate
    usage = summarize_usage(records)
    exhausted = executor.exhausted
    # NB: a budget stop ends the run as its deadline does; with a gate it is a verdict:
    # an incomplete regression run does not ship
    late = late or exhausted is not None
    intervals = _intervals(tallies, ks, evaluation) if finished or late else []
    verdict = evaluate_gate(gate, tallies, intervals=intervals) if finished and gate else None
    passed = verdict.passed if verdict is not None else None
    if exhausted is not None and gate is not None:
        passed = False
    noise_rate: float | None = None
    # NB: run.json says when every slot became final (passhat history orders by it)
    suite = complete_run(out, evaluation) if finished else None
    completed = time.time() if finished else None

    def write_metrics() -> None:
        if options.metrics_textfile:
            from passhat.metrics import write_textfile

            write_textfile(
                options.metrics_textfile,
                eval_name=plan.eval_name,
                summaries=summaries,
                trials=records,
                gate_passed=passed,
                intervals=intervals,
                grader_noise_rate=noise_rate,
                usage=usage,
                suite=suite,
                completed=completed,
            )

    if exhausted is not None:
        stderr.write(
            f"passhat: budget exhausted: {exhausted.exhausted}; {ledger.done}/{ledger.slots} "
            "trial slots final, running trials were stopped and not recorded; the report "
            "counts what was scored"
            + ("; the gate fails (an incomplete run does not ship)" if gate is not None else "")
            + (
                "; the grader stability check is skipped"
                if evaluation.spec.grading.stability_check is not None
                else ""
            )
            + f" (raise spec.budget and continue with: passhat run {eval_path} --out {out} "
            "--resume)\n"
        )
    elif late:
        stderr.write(
            f"passhat: deadline exceeded: the eval was active longer than "
            f"spec.activeDeadlineSeconds ({evaluation.spec.active_deadline_seconds}s); "
            f"{ledger.done}/{ledger.slots} trial slots final, running trials were stopped "
            "and not recorded; the report counts what was scored (continue with: "
            f"passhat run {eval_path} --out {out} --resume, under a new deadline)\n"
        )
    elif not finished:
        stderr.write(
            f"passhat: interrupted with {ledger.done}/{ledger.slots} trial slots done; "
            f"continue with: passhat run {eval_path} --out {out} --resume\n"
        )
        write_metrics()
        return EXIT_INTERRUPTED
    from passhat.report import build_report, render_report

    title = plan.eval_name
    if exhausted is not None:
        title += "; budget exhausted" + ("; gate FAILED" if gate is not None else "")
    elif verdict is not None:
        # NB: the verdict in the title, as `passhat report`'s: a markdown report posted
        # as a PR comment says it
        title += f"; gate {'passed' if verdict.passed else 'FAILED'}"
    report = build_report(
        tallies,
        ks,
        title=title,
        intervals=[i for i in intervals if i.k in ks],
        infra_by_reason=infra_errors_by_reason(records),
        strips=strips_of((r["task_id"], r["trial"], r["outcome"]) for r in records),
        usage=usage,
    )
    stdout.write(render_report(report, options.format, color=_color(stdout, environ)))
    flaky = {row.task_id for row in report.flaky}
    links = transcript_links(cast("list[AttemptRecord]", records), tasks=flaky)
    # NB: the run directory reads like a bundle: its report.html links the flaky tasks'
    # transcripts
    try:
        html = render_report(dataclasses.replace(report, transcripts=links), "html")
        write_file(os.path.join(out, REPORT), html.encode())
    except PasshatError as err:
        stderr.write(f"passhat: warning: {err} (the run itself is recorded)\n")
    stable: bool | None = None
    if evaluation.spec.grading.stability_check is not None and not late:
        # NB: the report is out first: the regrade may take a while (an LLM judge)
        stdout.flush()
        from passhat.local.stability import run_stability_check

        checked = run_stability_check(evaluation.spec, out, stderr)
        stable = checked.stable
        noise_rate = checked.check.noise_rate if checked.check is not None else None
        if passed and not stable:
            passed = False
    if verdict is not None and not late:
        result = "passed" if passed else "FAILED"
        unstable = "; and the grader must be stable" if stable is False else ""
        stderr.write(f"passhat: gate {result}: {verdict.describe()}{unstable}\n")
    stdout.flush()
    stderr.write(f"passhat: run directory: {out}\n")
    # NB: after the report: a metrics file that cannot be written (checked up front, but
    # the disk may fill meanwhile) must not cost the user the report of a finished run
    write_metrics()
    if exhausted is not None and gate is not None:
        return EXIT_GATE_FAILED
    if late:
        return EXIT_FAILED
    return EXIT_OK if passed is not False else EXIT_GATE_FAILED


def _intervals(
    tallies: Sequence[TaskTally], ks: Sequence[int], evaluation: ConsistencyEval
) -> list[KIntervals]:
    """The run's bootstrap intervals, as the operator's status has them: one seeded draw
    at the gate's confidence (0.95 without a gate), the gate's k included."""
    from passhat.stats import bootstrap

    gate = evaluation.spec.gate
    level = gate.confidence if gate is not None else 0.95
    wanted = sorted({*ks, *([gate.k] if gate is not None else [])})
    return bootstrap(tallies, wanted, seed=GATE_SEED, level=level)


def _check_metrics_textfile(path: str) -> None:
    """UsageError, before any trial runs, when `--metrics-textfile` cannot be written."""
    target = os.path.abspath(path)
    directory = os.path.dirname(target)
    problem = None
    if os.path.isdir(target):
        problem = "is a directory"
    elif not os.path.isdir(directory):
        problem = f"its directory {directory} does not exist"
    elif not os.access(directory, os.W_OK | os.X_OK):
        problem = f"its directory {directory} is not writable"
    if problem is not None:
        raise UsageError(f"--metrics-textfile {path}: {problem}")


def _execution_error(
    err: OSError | SpawnError, plan: Plan, eval_path: str, out: str
) -> PasshatError:
    """The one-line error for what stopped the run (the journal holds what had finished)."""
    if isinstance(err, JournalError):
        return InputError(
            f"cannot write the journal: {err.strerror or err} (the trials recorded so far "
            "are kept; continue with --resume)",
            path=str(err.filename or os.path.join(out, JOURNAL)),
        )
    cause: BaseException = err.cause if isinstance(err, SpawnError) else err
    if isinstance(cause, TranscriptError):
        return InputError(
            f"cannot write the transcript: {cause.strerror or cause}", path=str(cause.filename)
        )
    if (
        isinstance(err, SpawnError)
        and isinstance(cause, OSError)
        and cause.errno in _EXEC_ERRORS
        and cause.filename in (plan.executable, "/bin/sh")
    ):
        return SpecError(
            f"cannot start the trial: {cause.strerror or cause}",
            field=f"{CONTAINER}.command",
            path=eval_path,
        )
    if isinstance(cause, OSError) and cause.errno == errno.E2BIG:
        detail = "its arguments and environment are too large for exec (E2BIG)"
    elif isinstance(cause, OSError):
        detail = cause.strerror or str(cause)
        if cause.filename:
            detail = f"{cause.filename}: {detail}"
    else:
        detail = f"{type(cause).__name__}: {cause}"
    what = "cannot start a trial" if isinstance(err, SpawnError) else "cannot run the trials"
    return PasshatError(
        f"{what}: {detail} (the trials recorded so far are kept; continue with "
        f"passhat run {eval_path} --out {out} --resume)"
    )


def _color(stream: TextIO, environ: Mapping[str, str]) -> bool:
    return stream.isatty() and "NO_COLOR" not in environ
