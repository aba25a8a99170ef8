"""tau-bench and tau2-bench results scored as those harnesses score them, and the option
that makes their error entries infra errors. Expected numbers come from the plans here."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from passhat.api.errors import InputError
from passhat.stats import TaskTally, summarize
from passhat.trials.readers import ReadOptions, read_tallies, read_trials

ROOT = Path(__file__).resolve().parents[2]
TAU2 = ROOT / "tests" / "fixtures" / "tau2"
TAUBENCH = ROOT / "tests" / "fixtures" / "taubench" / "results.json"

# tests/fixtures/tau2/make_results.py's PLAN: task -> (termination_reason, reward) per trial
PLAN: dict[str, list[tuple[str, float | None]]] = {
    "0": [("agent_stop", 1.0), ("user_stop", 1.0), ("agent_stop", 1.0)],
    "1": [("user_stop", 1.0), ("user_stop", 0.0), ("max_steps", 0.0)],
    "2": [("user_stop", 0.9999995), ("infrastructure_error", None), ("user_stop", 1.0000005)],
    "3": [("user_error", 0.0), ("too_many_errors", 0.0), ("user_stop", 0.5)],
    "4": [("infrastructure_error", None), ("infrastructure_error", None), ("user_stop", 1.0)],
}


def _expected(infra: frozenset[str]) -> dict[str, tuple[int, int, int]]:
    """tau2's rule written out: infra terminations out, success = |reward - 1| <= 1e-6."""
    out = {}
    for task, trials in PLAN.items():
        graded = [r for t, r in trials if t not in infra]
        passed = sum(1 for r in graded if r is not None and abs(r - 1) <= 1e-6)
        out[task] = (passed, len(graded), len(trials) - len(graded))
    return out


def _tallies(path: Path, **options: str) -> dict[str, tuple[int, int, int]]:
    tallies = read_tallies([path], options=ReadOptions(**options))  # type: ignore[arg-type]
    return {t.task_id: (t.passed, t.graded, t.infra_errors) for t in tallies}


@pytest.mark.parametrize(
    "path",
    [TAU2 / "results.json", TAU2 / "dir", TAU2 / "dir" / "results.json"],
    ids=["json layout", "dir layout by directory", "dir layout by results.json"],
)
def test_tau2_both_layouts(path: Path) -> None:
    """Both of tau2's layouts read alike, infrastructure_error out, other stops failures."""
    assert _tallies(path) == _expected(frozenset({"infrastructure_error"}))


def test_tau2_pass_1_is_tau2s() -> None:
    """tau2 caps k at the fewest graded trials of a task (here 1); its pass^1 by hand."""
    expected = _expected(frozenset({"infrastructure_error"}))
    by_hand = sum(math.comb(c, 1) / math.comb(n, 1) for c, n, _ in expected.values()) / 5
    tallies = read_tallies([TAU2 / "results.json"])
    assert summarize(tallies, 1).pass_hat_k == pytest.approx(by_hand)


def test_tau2_harness_errors_as_infra() -> None:
    """--harness-errors infra: user_error and unexpected_error are infra errors too."""
    infra = frozenset({"infrastructure_error", "user_error", "unexpected_error"})
    assert _tallies(TAU2 / "results.json", harness_errors="infra") == _expected(infra)


def test_tau2_dir_layout_must_match_its_index(tmp_path: Path) -> None:
    """A simulation file missing from the dir layout is an error, as in tau2's own load."""
    copy = tmp_path / "run"
    shutil.copytree(TAU2 / "dir", copy)
    (copy / "simulations" / "sim-1-2.json").unlink()
    with pytest.raises(InputError, match=r"results\.json: .*missing simulation files: sim-1-2"):
        read_trials(copy)


def test_tau2_truncated_simulation_file_says_cut_short(tmp_path: Path) -> None:
    """A simulation file cut short names itself and says so."""
    copy = tmp_path / "run"
    shutil.copytree(TAU2 / "dir", copy)
    sim = copy / "simulations" / "sim-0-1.json"
    sim.write_text(sim.read_text()[:200])
    with pytest.raises(InputError, match=r"simulations/sim-0-1\.json:\d+: bad JSON: .*cut short"):
        read_trials(copy)


def test_tau2_dir_results_without_simulations(tmp_path: Path) -> None:
    """A dir-layout results.json copied without its simulations/ says what is missing."""
    lone = tmp_path / "results.json"
    shutil.copyfile(TAU2 / "dir" / "results.json", lone)
    with pytest.raises(InputError, match=r"without the simulations/ directory beside it"):
        read_trials(lone)


def test_taubench_caught_exception_scored_as_taubench_does() -> None:
    """tau-bench prints pass^k with a caught exception as reward 0; passhat agrees by
    default and makes it an infra error with --harness-errors infra."""
    entries = json.loads(TAUBENCH.read_text())
    c: dict[int, int] = {}
    for entry in entries:
        c[entry["task_id"]] = c.get(entry["task_id"], 0) + int(abs(entry["reward"] - 1) <= 1e-6)
    trials = len({entry["trial"] for entry in entries})
    # display_metrics of tau_bench/run.py: sum of comb(c, k) / comb(trials, k) over tasks
    taubench_pass_3 = sum(math.comb(n, 3) / math.comb(trials, 3) for n in c.values()) / len(c)
    assert summarize(read_tallies([TAUBENCH]), 3).pass_hat_k == pytest.approx(taubench_pass_3)
    infra = read_tallies([TAUBENCH], options=ReadOptions(harness_errors="infra"))
    errors = [e for e in entries if e["info"].get("error")]
    assert sum(t.infra_errors for t in infra) == len(errors) == 1


def test_array_with_outcome_is_passhats_not_taubench(tmp_path: Path) -> None:
    """Rows carrying `outcome` (and a `reward` for the record) score by outcome, as JSON
    Lines of the same rows do."""
    rows = [
        {"task_id": "a", "outcome": "pass", "reward": 0.2},
        {"task_id": "a", "outcome": "infra_error", "reward": 0.0},
        {"task_id": "b", "outcome": "fail", "reward": 1.0},
    ]
    array = tmp_path / "rows.json"
    array.write_text(json.dumps(rows))
    lines = tmp_path / "rows.jsonl"
    lines.write_text("".join(json.dumps(row) + "\n" for row in rows))
    expected = [TaskTally("a", 1, 0, 1), TaskTally("b", 0, 1, 0)]
    assert read_tallies([array]) == read_tallies([lines]) == expected


def test_compare_and_power_read_harness_files_with_the_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`compare` takes a tau2 dir layout (not a passhat run directory) and the reader
    options; the same results on both sides differ by nothing."""
    from passhat.cli import main

    code = main(
        ["compare", str(TAU2 / "dir"), str(TAU2 / "results.json"), "--harness-errors", "infra",
         "--k", "1", "--format", "json"]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    (row,) = json.loads(capsys.readouterr().out)["by_k"]
    assert row["pass_hat_k"]["diff"] == 0.0
    assert (
        main(["power", "--pilot", str(TAUBENCH), "--harness-errors", "infra", "--diff", "0.2"]) == 0
    )
