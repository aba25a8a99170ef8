"""The `passhat regrade` report: JSON (`GraderCheck.as_json`) or text.

The text report puts each noisy transcript under the flaky task it belongs to, so a
reader sees at once which flaky tasks are (partly) grader noise rather than agent noise;
noisy transcripts of tasks that are not flaky follow on their own.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from passhat.grading.noise import LEVEL, GraderCheck, TranscriptGrades
from passhat.records.record import AttemptRecord
from passhat.stats import flaky_order, tally

__all__ = ["render_regrade"]


def _verdicts(t: TranscriptGrades) -> str:
    counts = [f"pass {t.passes}", f"fail {t.fails}"]
    if t.errors:
        counts.append(f"grader error {len(t.errors)}")
    return f"{', '.join(counts)} (recorded: {t.original})"


def _attempt(t: TranscriptGrades) -> str:
    return f"trial {t.trial} attempt {t.attempt}"


def render_regrade(
    check: GraderCheck, fmt: str, *, records: Sequence[AttemptRecord], title: str
) -> str:
    """The report of `check` as `text` or `json`; `records`: every attempt of the source
    (for the flaky tasks), `title`: the source's."""
    if fmt == "json":
        return json.dumps({"source": title, **check.as_json()}, indent=2) + "\n"
    judged = len(check.judged)
    interval = check.noise_rate_interval
    sampled = len(check.transcripts) + check.missing
    lines = [
        f"regraded {len(check.transcripts)} transcripts of {title} {check.times} times each "
        f"({check.gradings} gradings); sampled {sampled} of {check.graded_attempts} graded "
        f"attempts, {check.infra_skipped} infra attempts skipped (never graded)",
        f"grader noise rate: {check.noise_rate:.3f}, {LEVEL:.0%} interval "
        f"{interval.low:.3f}-{interval.high:.3f} ({len(check.noisy)} of {judged} transcripts "
        "got both pass and fail)",
        f"regrades disagree with the recorded verdict: {check.disagree_with_original:.3f} "
        f"({len(check.disagreements)} of {judged} transcripts)",
    ]
    by_task: dict[str, list[TranscriptGrades]] = {}
    for t in check.transcripts:
        by_task.setdefault(t.task_id, []).append(t)
    flaky = flaky_order(tally((r["task_id"], r["outcome"]) for r in records))
    if flaky:
        lines.append("flaky tasks, with their noisy transcripts (grader noise, not the agent):")
    for row in flaky:
        regraded = by_task.get(row.task_id, [])
        noisy = [t for t in regraded if t.noisy]
        lines.append(
            f"  {row.task_id}: {row.passed} of {row.graded} graded attempts passed; "
            f"{len(noisy)} of {len(regraded)} regraded transcripts noisy"
        )
        lines.extend(f"    noisy: {_attempt(t)}: {_verdicts(t)}" for t in noisy)
    flaky_ids = {row.task_id for row in flaky}
    others = [t for t in check.noisy if t.task_id not in flaky_ids]
    if others:
        lines.append("noisy transcripts of tasks that are not flaky:")
        lines.extend(f"  {t.task_id} {_attempt(t)}: {_verdicts(t)}" for t in others)
    if check.grader_errors:
        lines.append(
            f"grader errors: {check.grader_errors} of {check.gradings} gradings gave no "
            f"verdict (not counted); e.g. {check.grader_error_messages[0]}"
        )
    if check.missing:
        lines.append(
            f"{check.missing} sampled attempts have no transcript in {title} (not regraded)"
        )
    return "\n".join(lines) + "\n"
