"""What the trials spent, in words: one line for the eval, one per task (most first).

Every format prints these same strings (text and markdown as lines, HTML as a note and a
folded list, `json-full` the numbers), so the formats never disagree on a sum.
"""

from __future__ import annotations

from passhat.trials.usage import SpendTotals, UsageSummary

__all__ = ["spend_line", "task_spend_lines"]


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def _parts(totals: SpendTotals) -> list[str]:
    # NB: a task's sums read back from status.usage carry no attempt counts: the values say
    parts = []
    if totals.reported or totals.cost_usd:
        parts.append(f"${totals.cost_usd:.4f}")
    if totals.input_tokens or totals.output_tokens:
        parts.append(f"tokens {totals.input_tokens:,} in / {totals.output_tokens:,} out")
    if totals.measured or totals.cpu_seconds or totals.peak_memory_bytes:
        parts.append(f"CPU {totals.cpu_seconds:.1f} s")
        if totals.peak_memory_bytes:
            parts.append(f"peak memory {_mib(totals.peak_memory_bytes)} (largest attempt)")
    for name, value in totals.metrics.items():
        parts.append(f"{name} {value:g}")
    return parts


def spend_line(usage: UsageSummary, attempts: int) -> str:
    """`spend: $1.2345 (reported by 38 of 40 attempts) · tokens ... · CPU ... · peak ...`."""
    total = usage.total
    parts = _parts(total)
    head = "spend: " + (parts.pop(0) if total.reported else "no attempt reported its cost")
    if total.reported:
        head += f" (reported by {total.reported} of {attempts} attempts, infra errors included)"
    line = " · ".join([head, *parts])
    if total.invalid:
        line += f" · {total.invalid} attempts reported a spend that was refused (not summed)"
    return line


def task_spend_lines(usage: UsageSummary) -> list[str]:
    """One line per task, the costliest first (empty when per-task sums are not kept)."""
    if not usage.by_task:
        return []
    ranked = sorted(
        usage.by_task.items(),
        key=lambda item: (-item[1].cost_usd, -item[1].cpu_seconds, item[0]),
    )
    return [f"{task}: {' · '.join(_parts(totals)) or '-'}" for task, totals in ranked]
