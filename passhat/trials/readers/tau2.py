"""tau2-bench results, both of its layouts, scored as tau2-bench scores them.

tau2-bench (sierra-research/tau2-bench, the maintained successor of tau-bench) saves a run
as `Results` (src/tau2/data_model/simulation.py at a2c0247, `class Results`, l. 1396):
`info`, `tasks` and either the `simulations` inline (the "json" layout, one file) or, in
the "dir" layout, a `results.json` without them (but with a `simulation_index`) beside a
`simulations/` directory of one `<id>.json` per simulation (`Results.save`, l. 1526-1557).
Like `Results._detect_format` (l. 1429), the dir layout is a directory, or a results file
with a `simulations/` directory beside it; like `Results.load` (l. 1476-1524), files
missing from or extra to the index are an error.

Each simulation is one row (`SimulationRun`, l. 1267: `task_id`, `trial`,
`termination_reason`, `reward_info.reward`). The outcome follows
src/tau2/metrics/agent_metrics.py: `infrastructure_error` terminations are left out of the
metrics (`get_metrics_df`, l. 129-166: infra errors here; tau2 writes them when a
simulation failed all its retries, src/tau2/runner/progress.py l. 112-131), and the rest
succeed when the reward is within 1e-6 of 1 (`is_successful`, l. 12-16). Other premature
terminations (max_steps, too_many_errors, agent_error, user_error, ...) get reward 0 from
the evaluator (src/tau2/evaluator/evaluator.py l. 119-129) and are failures. With
`--harness-errors infra`, `user_error` and `unexpected_error` (the user simulator or the
harness broke, not the agent) are infra errors too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from passhat.api.errors import InputError
from passhat.trials.outcomes import Outcome
from passhat.trials.readers.options import ReadOptions
from passhat.trials.readers.rows import TrialRow, is_cut_short, parse_task_id
from passhat.trials.readers.taubench import is_success

__all__ = ["HARNESS_ERROR_TERMINATIONS", "INFRASTRUCTURE_ERROR", "is_tau2", "parse_tau2"]

INFRASTRUCTURE_ERROR = "infrastructure_error"
# The terminations --harness-errors infra turns into infra errors.
HARNESS_ERROR_TERMINATIONS = frozenset({"user_error", "unexpected_error"})
SIMULATIONS_DIR = "simulations"


def is_tau2(document: Any) -> bool:
    """Whether a decoded JSON document is a tau2-bench `Results` (either layout)."""
    return (
        isinstance(document, dict)
        and isinstance(document.get("info"), dict)
        and "tasks" in document
        and ("simulations" in document or "simulation_index" in document)
    )


def parse_tau2(
    document: dict[str, Any], *, path: Path, name: str, options: ReadOptions
) -> list[TrialRow]:
    """One row per simulation of the results at `path` (its `results.json` when a dir)."""
    sims_dir = path.parent / SIMULATIONS_DIR
    if sims_dir.is_dir():
        return [
            _row(sim, options=options, path=where, where="")
            for sim, where in _dir_simulations(document, sims_dir, name=name)
        ]
    simulations = document.get("simulations")
    if simulations is None:
        raise InputError(
            "tau2-bench results of the dir layout (a simulation_index, no simulations) "
            f"without the {SIMULATIONS_DIR}/ directory beside it",
            path=name,
        )
    if not isinstance(simulations, list):
        raise InputError("tau2-bench `simulations` is not a list", path=name)
    return [
        _row(sim, options=options, path=name, where=f"simulations[{index}]: ")
        for index, sim in enumerate(simulations)
    ]


def _dir_simulations(
    document: dict[str, Any], sims_dir: Path, *, name: str
) -> list[tuple[Any, str]]:
    files = sorted(sims_dir.glob("*.json"))
    index = document.get("simulation_index")
    if isinstance(index, list):
        indexed = {str(entry.get("id")) for entry in index if isinstance(entry, dict)}
        on_disk = {file.stem for file in files}
        problems = []
        if missing := sorted(indexed - on_disk):
            problems.append(f"missing simulation files: {', '.join(missing)}")
        if extra := sorted(on_disk - indexed):
            problems.append(f"simulation files not in the index: {', '.join(extra)}")
        if problems:
            raise InputError(
                f"tau2-bench dir layout does not match its simulation_index: {'; '.join(problems)}",
                path=name,
            )
    out = []
    for file in files:
        shown = str(Path(name).parent / SIMULATIONS_DIR / file.name)
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(f"cannot read: {err}", path=shown) from None
        try:
            out.append((json.loads(text), shown))
        except json.JSONDecodeError as err:
            cut = " (cut short)" if is_cut_short(text, err) else ""
            raise InputError(f"bad JSON: {err.msg}{cut}", path=shown, line=err.lineno) from None
        except (ValueError, RecursionError):
            raise InputError("bad JSON", path=shown) from None
    return out


def _row(sim: Any, *, options: ReadOptions, path: str, where: str) -> TrialRow:
    if not isinstance(sim, dict):
        raise InputError(f"{where}a simulation must be a JSON object", path=path)
    for key in ("task_id", "termination_reason"):
        if key not in sim:
            raise InputError(f"{where}simulation without {key!r}", path=path)
    task_id = parse_task_id(sim["task_id"], path=path, line=None, where=where)
    termination = sim["termination_reason"]
    if not isinstance(termination, str):
        raise InputError(f"{where}termination_reason must be a string", path=path)
    reward_info = sim.get("reward_info")
    reward = reward_info.get("reward") if isinstance(reward_info, dict) else None
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)):
        raise InputError(f"{where}reward must be a number, got {reward!r}", path=path)
    trial = sim.get("trial")
    reason = None
    if termination == INFRASTRUCTURE_ERROR or (
        options.harness_errors == "infra" and termination in HARNESS_ERROR_TERMINATIONS
    ):
        outcome, reason = Outcome.INFRA_ERROR, termination
    else:
        # NB: no reward (tau2 always sets one but for infra errors): not a success
        outcome = Outcome.PASS if reward is not None and is_success(reward) else Outcome.FAIL
    sim_id = sim.get("id")
    return TrialRow(
        task_id=task_id,
        outcome=outcome,
        trial=trial if isinstance(trial, int) and not isinstance(trial, bool) else None,
        reason=reason,
        key=("tau2", sim_id) if isinstance(sim_id, str) and sim_id else None,
    )
