"""Real subprocesses that pass, fail, flake, report infra errors and write result JSON."""

from __future__ import annotations

import json

from tests.local.local_helpers import RunEval, by_slot, eval_doc, rows

SCRIPT = """
case "$PASSHAT_TASK_ID" in
  pass) echo ok ;;
  fail) echo nope; exit 1 ;;
  flake) exit $((PASSHAT_TRIAL % 2)) ;;
  crash) exit 3 ;;
  infra-once) [ "$PASSHAT_ATTEMPT" = 0 ] && exit 75; exit 0 ;;
  infra-always) exit 75 ;;
  result-pass) echo '{"outcome": "pass", "score": 1}' > "$PASSHAT_RESULT"; exit 1 ;;
  result-fail) echo '{"outcome": "fail"}' > "$PASSHAT_RESULT"; exit 0 ;;
  result-bad) echo 'not json' > "$PASSHAT_RESULT"; exit 0 ;;
esac
"""
TASKS = [
    "pass",
    "fail",
    "flake",
    "crash",
    "infra-once",
    "infra-always",
    "result-pass",
    "result-fail",
    "result-bad",
]


def test_outcomes_retries_and_result_json(run_eval: RunEval) -> None:
    """Each kind of trial ends as the DESIGN table says; infra errors are retried then kept out."""
    proc, out = run_eval(eval_doc(SCRIPT, tasks=TASKS, trials=4, ks=[1, 2]))
    assert proc.returncode == 0, proc.stderr
    slots = by_slot(rows(out))
    assert len(slots) == len(TASKS) * 4
    finals = {key: attempts[-1] for key, attempts in slots.items()}
    for key, last in finals.items():
        assert last["final"] is True
        assert all(not r["final"] for r in slots[key][:-1])

    def outcome(task: str, trial: int = 0) -> tuple[str, str]:
        last = finals[(task, trial)]
        return last["outcome"], last["reason"]

    assert outcome("pass") == ("pass", "exit_code")
    assert outcome("fail") == ("fail", "exit_code")
    assert [outcome("flake", t)[0] for t in range(4)] == ["pass", "fail", "pass", "fail"]
    assert outcome("crash") == ("fail", "exit_3")
    assert outcome("infra-once") == ("pass", "exit_code")
    assert [r["attempt"] for r in slots[("infra-once", 0)]] == [0, 1]
    assert slots[("infra-once", 0)][0]["reason"] == "reported"
    # retry.infraErrors = 2: three attempts, then the slot stays infra_error
    assert [r["outcome"] for r in slots[("infra-always", 0)]] == ["infra_error"] * 3
    assert outcome("result-pass") == ("pass", "result")
    assert outcome("result-fail") == ("fail", "result")
    assert outcome("result-bad") == ("pass", "exit_code")

    summary = {s["k"]: s for s in json.loads(proc.stdout)}
    # scored: pass 1, fail 0, flake .5, crash 0, infra-once 1, result-pass 1, result-fail 0,
    # result-bad 1 -> 4.5 / 8
    assert summary[1]["tasks_scored"] == 8
    assert abs(summary[1]["mean_pass_rate"] - 4.5 / 8) < 1e-9
    assert summary[1]["flaky"] == ["flake"]
    infra_rows = 4 + 4 * 3
    assert abs(summary[1]["infra_error_rate"] - infra_rows / (len(TASKS) * 4 + 4 + 8)) < 1e-9


def test_transcripts_are_kept_per_attempt(run_eval: RunEval) -> None:
    """stdout and stderr of every attempt end up in transcripts/<task>/<trial>-<attempt>.log."""
    script = 'echo "out $PASSHAT_TRIAL"; echo "err $PASSHAT_ATTEMPT" >&2; exit 0'
    proc, out = run_eval(eval_doc(script, tasks=["a/b c"], trials=2))
    assert proc.returncode == 0, proc.stderr
    (task_dir,) = (out / "transcripts").iterdir()
    assert task_dir.name.startswith("a_b_c-")
    assert sorted(p.name for p in task_dir.iterdir()) == ["0-0.log", "1-0.log"]
    assert (task_dir / "1-0.log").read_text() == "out 1\nerr 0\n"
    assert (out / "spec.yaml").is_file()


def test_gate_failure_exits_1(run_eval: RunEval) -> None:
    """A gate that the numbers miss makes `passhat run` exit 1 (after the full report)."""
    doc = eval_doc(
        "exit $((PASSHAT_TRIAL % 2))",
        tasks=["a"],
        trials=2,
        ks=[1],
        gate={"metric": "meanPassRate", "k": 1, "min": 0.9},
    )
    proc, _ = run_eval(doc)
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)[0]["mean_pass_rate"] == 0.5
