"""A run directory written by hand, for the `passhat regrade` tests."""

from __future__ import annotations

import json
from pathlib import Path

from passhat.records.layout import transcript_relpath

# task -> outcomes of its trials, first attempt each; "infra_error" is retried once and passes
OUTCOMES = {
    "a": ["pass", "pass", "pass", "pass"],
    "b": ["pass", "fail", "pass", "fail"],
    "c": ["fail", "infra_error", "fail", "fail"],
}


def write_run_dir(path: Path, *, spec: str | None = None) -> Path:
    """A run directory: trials.jsonl, transcripts/ (`task T trial N attempt A: OUTCOME`)."""
    lines = []
    for task_id, outcomes in OUTCOMES.items():
        for trial, outcome in enumerate(outcomes):
            attempts = ["infra_error", "pass"] if outcome == "infra_error" else [outcome]
            for attempt, this in enumerate(attempts):
                lines.append(
                    {
                        "task_id": task_id,
                        "trial": trial,
                        "attempt": attempt,
                        "outcome": this,
                        "reason": "exit_code",
                        "exit_code": {"pass": 0, "fail": 1}.get(this, 75),
                        "duration_s": 0.1,
                        "final": this != "infra_error",
                    }
                )
                log = path / transcript_relpath(task_id, trial, attempt)
                log.parent.mkdir(parents=True, exist_ok=True)
                log.write_text(f"task {task_id} trial {trial} attempt {attempt}: {this}\n")
    (path / "trials.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    if spec is not None:
        (path / "spec.yaml").write_text(spec)
    return path


# Graded attempts: a 4, b 4, c 3 (its trial 1 is an infra error, then a pass) = 12.
GRADED = 12
INFRA = 1
