"""power(): tasks x trials needed, checked against seeded simulations of compare()."""

from __future__ import annotations

import numpy as np
import pytest

from passhat.stats import WITHIN_NOISE, TaskTally, compare, power

# p ~ U(0.2, 0.7): E[p] = 0.45, E[p(1-p)] = 0.45 - (0.25/12 + 0.45**2)
MEAN, WITHIN, DIFF, TRIALS = 0.45, 0.45 - (0.25 / 12 + 0.45**2), 0.15, 4


def _rates(rng: np.random.Generator, tasks: int) -> np.ndarray:
    return rng.uniform(0.2, 0.7, size=tasks)


def _suite(passed: np.ndarray, trials: int) -> list[TaskTally]:
    return [TaskTally(f"t{i}", int(c), trials - int(c), 0) for i, c in enumerate(passed)]


def _simulated_power(tasks: int, *, runs: int, seed: int) -> float:
    """Share of simulated paired experiments in which compare() says "better"."""
    rng = np.random.default_rng(seed)
    detected = 0
    for run in range(runs):
        rates = _rates(rng, tasks)
        a = _suite(rng.binomial(TRIALS, rates), TRIALS)
        b = _suite(rng.binomial(TRIALS, rates + DIFF), TRIALS)
        (result,) = compare(a, b, [1], resamples=500, seed=run)
        detected += result.mean_pass_rate.verdict != WITHIN_NOISE
    return detected / runs


def test_planned_tasks_reach_the_target_power_by_simulation() -> None:
    """With the planned number of tasks, compare() detects the change in about 80% of runs."""
    pilot = _suite(np.random.default_rng(5).binomial(8, _rates(np.random.default_rng(6), 200)), 8)
    plan = power(diff=DIFF, pilot=pilot, trials=[TRIALS])
    assert plan.mean_rate == pytest.approx(MEAN, abs=0.05)
    assert plan.within_variance == pytest.approx(WITHIN, abs=0.03)
    (row,) = plan.rows
    assert 35 <= row.tasks <= 60
    assert 0.70 <= _simulated_power(row.tasks, runs=300, seed=1) <= 0.92
    assert _simulated_power(row.tasks // 3, runs=300, seed=2) <= 0.55


def test_closed_form_from_a_mean_rate() -> None:
    """From a mean rate the plan is the sign-flip formula of the module docstring."""
    plan = power(diff=0.1, mean_rate=0.5, trials=[1, 4])
    z_alpha, z_power = 1.959963984540054, 0.8416212335729143
    variances = [(0.25 + 0.24) / n for n in (1, 4)]
    expected = [
        (z_alpha * (v + 0.01) ** 0.5 + z_power * v**0.5) ** 2 / 0.01 + z_alpha**2 / 2
        for v in variances
    ]
    assert [row.tasks for row in plan.rows] == [int(np.ceil(x)) for x in expected]
    assert [row.trials for row in plan.rows] == [1, 4]


def test_more_trials_never_need_more_tasks_and_task_sd_costs_tasks() -> None:
    """Tasks needed fall as trials rise; variation of the change between tasks adds tasks."""
    plan = power(diff=0.05, mean_rate=0.8)
    tasks = [row.tasks for row in plan.rows]
    assert tasks == sorted(tasks, reverse=True)
    noisy = power(diff=0.05, mean_rate=0.8, task_sd=0.1)
    assert all(n.tasks > r.tasks for n, r in zip(noisy.rows, plan.rows, strict=True))


def test_consistent_pilot_needs_fewer_tasks_than_a_bare_rate() -> None:
    """A pilot of all-or-nothing tasks has no within-task noise left to average out."""
    pilot = [TaskTally(f"t{i}", 4 * (i % 2), 4 * (1 - i % 2), 0) for i in range(10)]
    from_pilot = power(diff=0.1, pilot=pilot, trials=[4])
    from_rate = power(diff=0.1, mean_rate=0.5, trials=[4])
    assert from_pilot.within_variance == 0.0
    assert from_pilot.rows[0].tasks < from_rate.rows[0].tasks
    assert from_pilot.rows[0].tasks >= 6  # the exact sign-flip test needs 6 tasks for p < 0.05


@pytest.mark.parametrize(
    "kwargs",
    [
        {"diff": 0.1},
        {"diff": 0.1, "mean_rate": 0.5, "pilot": []},
        {"diff": 0.0, "mean_rate": 0.5},
        {"diff": 0.3, "mean_rate": 0.8},
        {"diff": 0.1, "mean_rate": 1.5},
        {"diff": 0.1, "mean_rate": 0.5, "alpha": 0.0},
        {"diff": 0.1, "mean_rate": 0.5, "target_power": 1.0},
        {"diff": 0.1, "mean_rate": 0.5, "trials": [0]},
        {"diff": 0.1, "mean_rate": 0.5, "task_sd": -1.0},
        {"diff": 0.1, "pilot": [TaskTally("a", 0, 0, 2)]},
    ],
)
def test_bad_arguments_raise(kwargs: dict[str, object]) -> None:
    """Impossible or missing inputs are ValueErrors."""
    with pytest.raises(ValueError):
        power(**kwargs)  # type: ignore[arg-type]


def _simulated_power_hat_k(tasks: int, *, k: int, trials: int, runs: int, seed: int) -> float:
    """Share of simulated experiments in which compare() finds pass^k changed by DIFF_K
    (each task's pass^k moved by DIFF_K, as the plan assumes)."""
    rng = np.random.default_rng(seed)
    detected = 0
    for run in range(runs):
        rates = rng.uniform(0.3, 0.95, size=tasks)
        shifted = np.clip(rates**k + DIFF_K, 0.0, 1.0) ** (1.0 / k)
        a = _suite(rng.binomial(trials, rates), trials)
        b = _suite(rng.binomial(trials, shifted), trials)
        (result,) = compare(a, b, [k], resamples=500, seed=run)
        detected += result.pass_hat_k.verdict != WITHIN_NOISE
    return detected / runs


DIFF_K = 0.2


def test_a_pass_hat_k_plan_reaches_the_target_power_by_simulation() -> None:
    """pass^2, 4 trials: the planned tasks detect a 0.2 change in about 80% of simulated
    compare() runs, half of them clearly less often; more tasks than the mean's plan."""
    rng = np.random.default_rng(6)
    pilot = _suite(np.random.default_rng(5).binomial(8, rng.uniform(0.3, 0.95, 200)), 8)
    plan = power(diff=DIFF_K, pilot=pilot, trials=[4], k=2)
    (row,) = plan.rows
    assert plan.k == 2 and 25 <= row.tasks <= 60
    assert 0.70 <= _simulated_power_hat_k(row.tasks, k=2, trials=4, runs=200, seed=1) <= 0.95
    assert _simulated_power_hat_k(row.tasks // 2, k=2, trials=4, runs=200, seed=2) <= 0.65
    (mean_row,) = power(diff=DIFF_K, pilot=pilot, trials=[4]).rows
    assert row.tasks > mean_row.tasks


def test_a_pass_hat_k_plan_leaves_out_trial_counts_below_k_and_prices_its_rows() -> None:
    """k=3 plans only n >= 3; the rows' dollars are trials x tasks x the cost per trial."""
    plan = power(diff=0.2, mean_rate=0.7, k=3, trials=[1, 2, 4, 8], cost_per_trial=0.5)
    assert [row.trials for row in plan.rows] == [4, 8]
    assert plan.mean_rate == pytest.approx(0.7**3)
    rows = plan.as_json()["rows"]
    assert rows[0]["cost_usd"] == pytest.approx(4 * plan.rows[0].tasks * 0.5)
    with pytest.raises(ValueError, match="reach k=3"):
        power(diff=0.2, mean_rate=0.7, k=3, trials=[1, 2])


def test_k_of_one_is_the_mean_plan() -> None:
    """pass^1 is the mean pass rate: the same plan."""
    assert power(diff=0.1, mean_rate=0.5, k=1) == power(diff=0.1, mean_rate=0.5)
