"""requests is a floor: an attempt starts only when its requests fit beside the running ones."""

from __future__ import annotations

import os
from pathlib import Path

from tests.local.local_helpers import RunEval, eval_doc, rows

# Each attempt holds a lock directory for a moment; two attempts at once would collide.
SCRIPT = """
mkdir "$LOCK" 2>/dev/null || { echo "ran concurrently"; exit 1; }
sleep 0.2
rmdir "$LOCK"
"""


def test_cpu_request_of_the_whole_machine_runs_alone(run_eval: RunEval, tmp_path: Path) -> None:
    """With cpu requests equal to every core, parallelism 4 still runs one attempt at a time."""
    cores = os.cpu_count() or 1
    doc = eval_doc(
        SCRIPT,
        tasks=["a", "b", "c"],
        trials=2,
        parallelism=4,
        resources={"requests": {"cpu": str(cores)}},
        env=[{"name": "LOCK", "value": str(tmp_path / "lock")}],
    )
    proc, out = run_eval(doc)
    assert proc.returncode == 0, proc.stderr
    assert [r["outcome"] for r in rows(out)] == ["pass"] * 6


def test_request_that_can_never_fit_is_a_spec_error(run_eval: RunEval) -> None:
    """A memory request larger than this machine can offer fails fast with exit 2."""
    doc = eval_doc("exit 0", tasks=["a"], resources={"requests": {"memory": "100Ti"}})
    proc, _ = run_eval(doc)
    assert proc.returncode == 2
    assert "spec.trial.template.spec.containers[0].resources.requests.memory" in proc.stderr
    assert "Traceback" not in proc.stderr
