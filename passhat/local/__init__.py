"""passhat.local: the embedded default, `passhat run eval.yaml` as sandboxed subprocesses.

The same spec the operator runs as pods runs here as processes: one sandbox per attempt
(`sandbox`), memory ceiling and cpu limit through cgroups (`cgroup`, or `rss` sampling
where cgroups are not writable), the requests floor (`capacity`), an event-driven loop
(`executor`) that folds every finished attempt into the shared `SlotLedger` and the
durable `trials.jsonl` (`journal`), and the glue of the command (`run`, `command`).
"""

from passhat.local.run import RunOptions, run

__all__ = ["RunOptions", "run"]
