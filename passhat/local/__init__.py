"""passhat.local: the embedded default, `passhat run eval.yaml` as sandboxed subprocesses.

The same spec the operator runs as pods runs here as processes: one sandbox per attempt
(`sandbox`), memory ceiling and cpu limit through cgroups (`cgroup`, or `rss` sampling
where cgroups are not writable), the requests floor (`capacity`), an event-driven loop
(`executor`) that folds every finished attempt into the shared `SlotLedger` and the
durable `trials.jsonl` (`journal`), and the glue of the command (`driver`, `command`).

`run` and `RunOptions` are imported on first use (PEP 562): the CLI imports this package
(for `passhat.local.command`) whatever the subcommand, and `passhat trial` in a pod or
`passhat score` must not pay for the spec models and the executor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from passhat.local.driver import RunOptions, run

__all__ = ["RunOptions", "run"]


def __getattr__(name: str) -> Any:
    """Import `run` / `RunOptions` from `passhat.local.driver` on first use."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from passhat.local import driver

    value = getattr(driver, name)
    globals()[name] = value
    return value
