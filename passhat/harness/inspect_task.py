"""An Inspect task as passhat trials: its samples are the tasks, one trial is one
`inspect eval` of one sample for one epoch, and the outcome is read from the log it wrote.

Reading logs (`passhat score run.eval`) needs Inspect to have run n epochs already; here
passhat runs the trials, so they get retries, timeouts, isolation, records and the
cluster. `passhat init inspect TASK_FILE[@task]` lists the task's samples (with the
Python that runs `inspect`: the task's own environment) and writes the ConsistencyEval;
its trial command is `passhat trial --inspect TASK`, which runs

    inspect eval TASK --sample-id $PASSHAT_TASK_ID --epochs 1 --log-dir <tmp> --model M

and grades the trial from the log, not the exit code (`grade_log`): the sample's score
as `passhat score` reads it (the first scorer or --scorer), a sample error or a missing
log an infra error. Sample ids containing a comma cannot be passed to `--sample-id` (a
comma-separated list) and are refused.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from passhat.api.errors import UsageError
from passhat.grading.grader import Grade
from passhat.trials.outcomes import Outcome

__all__ = [
    "INSPECT_ERROR",
    "INSPECT_NO_LOG",
    "eval_document",
    "grade_log",
    "inspect_command",
    "list_samples",
]

# infra_error: the Inspect sample ended in an error (model API, sandbox, timeout, ...)
INSPECT_ERROR = "inspect_sample_error"
# infra_error: `inspect eval` wrote no readable log with the sample (it could not start)
INSPECT_NO_LOG = "inspect_no_log"

# NB: run with inspect-ai's Python, never imported here. `load_tasks` is what `inspect eval`
# itself loads a task spec with (inspect_ai/_eval/loader.py); inspect-ai has no public
# call that lists a task's samples without running them.
_LIST_SAMPLES = """
import json, sys
from inspect_ai._eval.loader import load_tasks
tasks = load_tasks([sys.argv[1]])
print(json.dumps([{"name": t.name, "ids": [s.id for s in t.dataset]} for t in tasks]))
"""


def _python_of(inspect: str) -> str:
    """The interpreter of the `inspect` command (its shebang), where inspect-ai is."""
    path = shutil.which(inspect)
    if path is None:
        raise UsageError(
            f"no {inspect!r} command on PATH: install inspect-ai where the task runs "
            "(pip install inspect-ai), or give --inspect PATH"
        )
    with open(path, "rb") as script:
        first = script.readline().decode("utf-8", "replace").strip()
    if first.startswith("#!") and "python" in first:
        return first[2:].strip().split()[0]
    raise UsageError(f"{path}: not a Python script; cannot find the Python of inspect-ai")


def list_samples(task: str, *, inspect: str = "inspect") -> tuple[str, list[Any]]:
    """(task name, sample ids) of `task` (`FILE` with one task, or `FILE@name`)."""
    file, _, name = task.partition("@")
    path = Path(file)
    if not path.is_file():
        raise UsageError(f"{file}: no such task file")
    spec = path.name + (f"@{name}" if name else "")
    done = subprocess.run(
        [_python_of(inspect), "-c", _LIST_SAMPLES, spec],
        cwd=path.resolve().parent,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"{task}: Inspect could not load the task: {last}")
    tasks = json.loads(done.stdout.strip().splitlines()[-1])
    if not tasks:
        raise UsageError(f"{task}: no Inspect task in it")
    if len(tasks) > 1:
        names = ", ".join(t["name"] for t in tasks)
        raise UsageError(f"{file} holds several tasks ({names}): name one, {file}@NAME")
    (found,) = tasks
    ids = found["ids"]
    if not ids:
        raise UsageError(f"{task}: the task's dataset has no samples")
    if any(sample is None for sample in ids):
        raise UsageError(
            f"{task}: samples without an id; give each Sample an id (Inspect numbers them "
            "only when it runs the task)"
        )
    bad = [str(sample) for sample in ids if "," in str(sample)]
    if bad:
        raise UsageError(f"{task}: sample id {bad[0]!r} has a comma; --sample-id cannot take it")
    return str(found["name"]), ids


def inspect_command(
    task: str,
    *,
    sample_id: str,
    log_dir: str,
    model: str,
    extra: Sequence[str] = (),
    inspect: str = "inspect",
) -> list[str]:
    """The `inspect eval` of one sample for one epoch, its log in `log_dir`; plain display,
    so the trial's transcript shows Inspect's summary and any error's traceback."""
    return [
        inspect, "eval", task,
        "--sample-id", sample_id,
        "--epochs", "1",
        "--model", model,
        "--log-dir", log_dir,
        "--display", "plain",
        *extra,
    ]  # fmt: skip


def grade_log(log_dir: Path, *, sample_id: str, scorer: str | None = None) -> Grade:
    """The trial's outcome from the Inspect log in `log_dir` (one sample, one epoch)."""
    from passhat.api.errors import InputError
    from passhat.trials.readers import ReadOptions, read_trials

    logs = sorted(p for p in log_dir.iterdir() if p.suffix in (".eval", ".json"))
    if not logs:
        return Grade(Outcome.INFRA_ERROR, INSPECT_NO_LOG, message="inspect eval wrote no log")
    notes: list[str] = []
    try:
        rows = read_trials(logs[-1], options=ReadOptions(scorer=scorer), warn=notes.append)
    except InputError as err:
        return Grade(Outcome.INFRA_ERROR, INSPECT_NO_LOG, message=f"unreadable log: {err}")
    mine = [row for row in rows if row.task_id == sample_id]
    if len(mine) != 1:
        return Grade(
            Outcome.INFRA_ERROR,
            INSPECT_NO_LOG,
            message=f"the log has {len(mine)} results of sample {sample_id!r}, not 1",
        )
    (row,) = mine
    if row.outcome is Outcome.INFRA_ERROR:
        return Grade(Outcome.INFRA_ERROR, INSPECT_ERROR, message="the Inspect sample errored")
    return Grade(row.outcome, "inspect_score")


def _metadata_name(text: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return name[:63].strip("-") or "inspect-task"


def eval_document(
    *,
    task: str,
    name: str,
    sample_ids: Sequence[Any],
    trials: int,
    ks: Sequence[int] | None,
    image: str,
    model: str,
    scorer: str | None,
    timeout_seconds: int,
    parallelism: int,
) -> dict[str, Any]:
    """The ConsistencyEval (as a YAML-ready dict) running `task`'s samples as trials."""
    command = ["passhat", "trial", "--inspect", task, "--model", model]
    if scorer:
        command += ["--scorer", scorer]
    spec: dict[str, Any] = {
        "tasks": [{"id": str(sample)} for sample in sample_ids],
        "trials": trials,
    }
    if ks:
        spec["ks"] = sorted(set(ks))
    spec |= {
        "parallelism": parallelism,
        "trial": {
            "timeoutSeconds": timeout_seconds,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "inspect",
                            "image": image,
                            "command": command,
                            "resources": {
                                "requests": {"cpu": "500m", "memory": "512Mi"},
                                "limits": {"memory": "2Gi"},
                            },
                        }
                    ]
                }
            },
        },
        "grading": {"exitCodes": {"pass": [0], "fail": [1], "infraError": [75]}},
    }
    return {
        "apiVersion": "passhat.dev/v1alpha1",
        "kind": "ConsistencyEval",
        "metadata": {"name": _metadata_name(name)},
        "spec": spec,
    }
