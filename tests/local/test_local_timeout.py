"""timeoutSeconds: the whole process group is terminated, then killed; infra_error/timeout."""

from __future__ import annotations

from tests.local.local_helpers import RunEval, by_slot, eval_doc, rows

# "stubborn" ignores SIGTERM (so it needs the SIGKILL after the grace period) and leaves a
# background child that must die with it.
SCRIPT = """
case "$PASSHAT_TASK_ID" in
  hang) sleep 600 ;;
  stubborn) trap '' TERM; sleep 600 & sleep 600 ;;
  quick) exit 0 ;;
esac
"""


def test_hang_times_out_as_infra_error(run_eval: RunEval) -> None:
    """A hanging attempt is killed at timeoutSeconds and counts as infra_error/timeout."""
    doc = eval_doc(SCRIPT, tasks=["hang", "stubborn", "quick"], trials=1)
    doc["spec"]["trial"]["timeoutSeconds"] = 1
    doc["spec"]["retry"] = {"infraErrors": 0}
    proc, out = run_eval(doc)
    assert proc.returncode == 0, proc.stderr
    slots = by_slot(rows(out))
    for task in ("hang", "stubborn"):
        (record,) = slots[(task, 0)]
        assert (record["outcome"], record["reason"]) == ("infra_error", "timeout")
        assert record["duration_s"] < 60
    assert slots[("stubborn", 0)][0]["duration_s"] >= 2.0  # SIGTERM ignored: killed after grace
    assert slots[("quick", 0)][0]["outcome"] == "pass"


def test_timeout_is_fail(run_eval: RunEval) -> None:
    """With timeoutIs: fail a timed-out attempt is graded fail (and not retried)."""
    doc = eval_doc(SCRIPT, tasks=["hang"], trials=1)
    doc["spec"]["trial"].update(timeoutSeconds=1, timeoutIs="fail")
    proc, out = run_eval(doc)
    assert proc.returncode == 0, proc.stderr
    assert [(r["outcome"], r["reason"]) for r in rows(out)] == [("fail", "timeout")]
