"""passhat.local: the embedded default, `passhat run eval.yaml` as sandboxed subprocesses.

The same spec the operator runs as pods runs here as processes: one sandbox per attempt
(`sandbox`), memory ceiling and cpu limit through cgroups (`cgroup`, or `rss` sampling
where cgroups are not writable), the end of what leaves an attempt's session (its cgroup,
or the subreaper in `orphans`), the requests floor (`capacity`), an event-driven loop
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
