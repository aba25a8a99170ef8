"""summarize(): the scoring semantics every report shares, and the bundled examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from passhat.stats import TaskTally, default_ks, summarize, summarize_many, tally

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(name: str) -> list[TaskTally]:
    lines = (EXAMPLES / name).read_text().splitlines()
    return tally((row["task_id"], row["outcome"]) for row in map(json.loads, lines))


# (file, k, mean, pass@k, pass^k) from examples/README.md
KNOWN = [
    ("same-mean-bimodal.jsonl", 1, 0.75, 0.75, 0.75),
    ("same-mean-bimodal.jsonl", 3, 0.75, 27 / 28, 15 / 28),
    ("same-mean-bimodal.jsonl", 8, 0.75, 1.0, 0.5),
    ("same-mean-uniform.jsonl", 1, 0.75, 0.75, 0.75),
    ("same-mean-uniform.jsonl", 3, 0.75, 1.0, 5 / 14),
    ("same-mean-uniform.jsonl", 8, 0.75, 1.0, 0.0),
]


@pytest.mark.parametrize(("name", "k", "mean", "at_k", "hat_k"), KNOWN)
def test_examples_have_known_answers(
    name: str, k: int, mean: float, at_k: float, hat_k: float
) -> None:
    """The two same-mean suites give the published mean, pass@k and pass^k."""
    summary = summarize(_load(name), k)
    assert summary.tasks_scored == 20
    assert summary.mean_pass_rate == pytest.approx(mean, abs=1e-12)
    assert summary.pass_at_k == pytest.approx(at_k, abs=1e-12)
    assert summary.pass_hat_k == pytest.approx(hat_k, abs=1e-12)
    assert summary.need_more_trials == []
    assert summary.infra_error_rate == 0.0


def test_examples_flaky_lists() -> None:
    """Flaky: the ten coinflip tasks of the bimodal suite, every steady task of the other."""
    bimodal = summarize(_load("same-mean-bimodal.jsonl"), 3)
    assert sorted(bimodal.flaky) == sorted(f"coinflip-{i}" for i in range(10))
    uniform = summarize(_load("same-mean-uniform.jsonl"), 3)
    assert sorted(uniform.flaky) == sorted(f"steady-{i}" for i in range(20))


def test_infra_errors_are_out_of_n_and_c_but_in_the_rate() -> None:
    """Infra rows neither pass nor fail a task; they count in infra rows / all rows."""
    rows = [("a", "pass"), ("a", "infra_error"), ("a", "fail"), ("b", "pass"), ("b", "pass")]
    summary = summarize(tally(rows), 2)
    assert summary.tasks_scored == 2
    assert summary.mean_pass_rate == pytest.approx((0.5 + 1.0) / 2)
    assert summary.pass_hat_k == pytest.approx((0.0 + 1.0) / 2)
    assert summary.infra_error_rate == pytest.approx(1 / 5)


def test_tasks_with_fewer_than_k_graded_trials_need_more() -> None:
    """A task with graded < k is listed and left out of every average."""
    rows = [("a", "pass"), ("a", "pass"), ("b", "fail"), ("b", "infra_error"), ("b", "infra_error")]
    summary = summarize(tally(rows), 2)
    assert summary.tasks_scored == 1
    assert summary.need_more_trials == ["b"]
    assert summary.mean_pass_rate == 1.0
    assert summary.infra_error_rate == pytest.approx(2 / 5)


def test_no_scored_task_gives_zero_averages() -> None:
    """With nothing scored the averages are 0.0, not an error."""
    summary = summarize(tally([("a", "infra_error")]), 1)
    assert (summary.tasks_scored, summary.mean_pass_rate, summary.pass_hat_k) == (0, 0.0, 0.0)
    assert summary.need_more_trials == ["a"]
    assert summary.infra_error_rate == 1.0
    assert summarize([], 1).infra_error_rate == 0.0


def test_flaky_most_inconsistent_first_then_task_id() -> None:
    """Flaky order: c/n closest to 1/2 first, ties by task id; 0 and n passes are not flaky."""
    tallies = [
        TaskTally("z-one-in-four", 1, 3, 0),
        TaskTally("solid", 4, 0, 0),
        TaskTally("b-half", 2, 2, 0),
        TaskTally("never", 0, 4, 0),
        TaskTally("three-in-four", 3, 1, 0),
        TaskTally("a-half", 3, 3, 0),
    ]
    assert summarize(tallies, 1).flaky == ["a-half", "b-half", "three-in-four", "z-one-in-four"]


def test_tally_keeps_first_seen_order_and_non_adjacent_rows() -> None:
    """Rows of a task need not be adjacent; tasks come out in first-seen order."""
    rows = [("b", "pass"), ("a", "fail"), ("b", "infra_error"), ("a", "pass"), ("b", "fail")]
    assert tally(rows) == [TaskTally("b", 1, 1, 1), TaskTally("a", 1, 1, 0)]
    assert tally(rows)[0].graded == 2
    assert tally(rows)[0].attempts == 3


def test_tally_rejects_unknown_outcome() -> None:
    """An outcome other than pass / fail / infra_error is a ValueError naming it."""
    with pytest.raises(ValueError, match="'passed'"):
        tally([("a", "passed")])


def test_as_json_has_exactly_the_eight_keys() -> None:
    """as_json() is the `--format json` object: eight keys, nothing else."""
    (summary,) = summarize_many(tally([("a", "pass")]), [1])
    assert list(summary.as_json()) == [
        "k",
        "tasks_scored",
        "mean_pass_rate",
        "pass_at_k",
        "pass_hat_k",
        "flaky",
        "need_more_trials",
        "infra_error_rate",
    ]


def test_summarize_rejects_k_below_one() -> None:
    """k = 0 is a ValueError."""
    with pytest.raises(ValueError, match="k=0"):
        summarize([], 0)


@pytest.mark.parametrize(
    ("trials", "ks"), [(1, [1]), (2, [1, 2]), (3, [1, 3]), (8, [1, 3, 8]), (100, [1, 3, 100])]
)
def test_default_ks(trials: int, ks: list[int]) -> None:
    """Default ks are 1, 3 and n, capped at n and without duplicates."""
    assert default_ks(trials) == ks


def test_default_ks_rejects_zero_trials() -> None:
    """No trials, no k."""
    with pytest.raises(ValueError):
        default_ks(0)
