"""timeoutSeconds: the whole process group is terminated, then killed; infra_error/timeout."""

from __future__ import annotations

import json

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


def test_active_deadline_stops_the_run_and_reports_what_was_scored(run_eval: RunEval) -> None:
    """spec.activeDeadlineSeconds: past it the running attempts are stopped (not
    recorded), no more start, the report counts what was scored and the exit code is 3
    (not finished: the run has no verdict; it can be resumed)."""
    doc = eval_doc(SCRIPT, tasks=["quick", "hang"], trials=1, parallelism=2)
    doc["spec"]["activeDeadlineSeconds"] = 2
    doc["spec"]["ks"] = [1]
    proc, out = run_eval(doc, "--format", "json")
    assert proc.returncode == 3, proc.stderr
    assert "passhat: deadline exceeded: the eval was active longer than " in proc.stderr
    assert "spec.activeDeadlineSeconds (2s); 1/2 trial slots final" in proc.stderr
    assert [(r["task_id"], r["outcome"]) for r in rows(out)] == [("quick", "pass")]
    (row,) = json.loads(proc.stdout)
    assert row["tasks_scored"] == 1 and row["k"] == 1
    assert (out / "report.html").exists()
