"""Helpers for the local-executor tests: write an eval, run `passhat` as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any, Protocol

import yaml

from passhat.api.load import parse_eval
from passhat.local import cgroup
from passhat.local.capacity import Capacity
from passhat.local.executor import Executor
from passhat.local.journal import Journal, read_journal
from passhat.local.plan import make_plan
from passhat.trials.ledger import SlotLedger

# Generous: these tests share two cores with a Kubernetes build and other suites.
TIMEOUT = 180

PASSHAT = [
    sys.executable,
    "-c",
    "import sys; from passhat.cli import main; sys.argv[0] = 'passhat'; sys.exit(main())",
]


def eval_doc(
    script: str,
    *,
    tasks: list[str],
    trials: int = 2,
    name: str = "t",
    parallelism: int = 4,
    resources: dict[str, Any] | None = None,
    env: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A ConsistencyEval whose single container runs `sh -c script`."""
    container: dict[str, Any] = {
        "name": "agent",
        "image": "ignored:locally",
        "command": ["sh", "-c", textwrap.dedent(script)],
    }
    if resources is not None:
        container["resources"] = resources
    if env is not None:
        container["env"] = env
    body: dict[str, Any] = {
        "tasks": [{"id": task} for task in tasks],
        "trials": trials,
        "parallelism": parallelism,
        "retry": {"infraErrors": 2, "backoffSeconds": 0.05},
        "trial": {"timeoutSeconds": 60, "template": {"spec": {"containers": [container]}}},
    }
    body.update(spec)
    return {
        "apiVersion": "passhat.dev/v1alpha1",
        "kind": "ConsistencyEval",
        "metadata": {"name": name},
        "spec": body,
    }


class RunEval(Protocol):
    """The `run_eval` fixture: write `doc` as an eval and `passhat run` it; (process, out dir)."""

    def __call__(
        self, doc: dict[str, Any], *extra: str, name: str = "run"
    ) -> tuple[subprocess.CompletedProcess[str], Path]: ...


def write_eval(path: Path, doc: dict[str, Any]) -> Path:
    """Write `doc` as YAML to `path`."""
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def passhat(
    *args: str | os.PathLike[str], cwd: Path | None = None, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """Run the `passhat` CLI to completion, output captured."""
    return subprocess.run(
        [*PASSHAT, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


def start_passhat(*args: str | os.PathLike[str], cwd: Path | None = None) -> subprocess.Popen[str]:
    """Start the `passhat` CLI in its own process group (so the group can be killed)."""
    return subprocess.Popen(
        [*PASSHAT, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        start_new_session=True,
    )


def rows(out: Path) -> list[dict[str, Any]]:
    """The records of `out/trials.jsonl`."""
    text = (out / "trials.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def by_slot(records: list[dict[str, Any]]) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Records grouped by (task_id, trial), attempts in order."""
    slots: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for record in records:
        slots.setdefault((record["task_id"], record["trial"]), []).append(record)
    return slots


def run_executor(
    tmp_path: Path, doc: dict[str, Any], *, pool: bool, placement: Any = None
) -> list[dict[str, Any]]:
    """Run `doc` through the Executor in this process; its journal's records.

    pool=False runs it as on a machine without writable cgroups (RSS sampling for a memory
    limit, the subreaper for processes that leave an attempt's session); `placement`
    forces how attempts join their cgroups ("wrapper": cgroup v2's way).
    """
    evaluation = parse_eval(yaml.safe_dump(doc), "t.yaml")
    spec = evaluation.spec
    plan = make_plan(evaluation, spec.tasks or [], source="t.yaml", eval_dir=".")
    hierarchy = cgroup.detect() if pool else None
    cgroups = (
        cgroup.Pool(
            hierarchy,
            memory_limit=plan.limits.memory,
            cpu_limit=plan.limits.cpu,
            placement=placement,
        )
        if hierarchy is not None
        else None
    )
    journal = Journal(str(tmp_path / "trials.jsonl"))
    executor = Executor(
        plan,
        ledger=SlotLedger(len(plan.task_ids), plan.trials),
        journal=journal,
        transcripts=str(tmp_path / "transcripts"),
        capacity=Capacity.of_machine(),
        pool=cgroups,
    )
    thread = threading.Thread(target=executor.run)
    thread.start()
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    journal.close()
    if cgroups is not None:
        cgroups.close()
    return read_journal(str(tmp_path / "trials.jsonl"))
