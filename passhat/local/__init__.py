"""passhat.local: the embedded default, `passhat run eval.yaml` as sandboxed subprocesses.

The same spec the operator runs as pods runs here as processes: one sandbox per attempt
(`sandbox`), memory ceiling, cpu limit and the end of all an attempt started through
cgroups (`cgroup`; where cgroups are not writable, `rss` sampling and the subreaper in
`orphans`), the requests floor (`capacity`), an event-driven loop
(`executor`) that folds every finished attempt into the shared `SlotLedger` and the
durable `trials.jsonl` (`journal`), and the glue of the command (`driver`, `command`).

`run` and `RunOptions` are imported on first use (PEP 562): the CLI imports this package
(for `passhat.local.command`) whatever the subcommand, and `passhat trial` in a pod or
`passhat score` must not pay for the spec models and the executor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from passhat import lazy_exports

if TYPE_CHECKING:
    from passhat.local.driver import RunOptions, run

__all__ = ["RunOptions", "run"]


__getattr__, __dir__ = lazy_exports(__name__, {"RunOptions": "driver", "run": "driver"})
