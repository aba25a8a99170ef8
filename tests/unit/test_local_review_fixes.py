"""Local executor pieces: transcript names, the spawner's failures, the plan's limits,
journal write errors, and which error names which field."""

from __future__ import annotations

import errno
import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from passhat.api.errors import InputError, PasshatError, SpecError
from passhat.api.spec import ConsistencyEval, Task
from passhat.local.driver import _execution_error
from passhat.local.executor import MAX_SLEEP, NAME_MAX, transcript_name
from passhat.local.journal import Journal, JournalError
from passhat.local.plan import MAX_TIMEOUT_SECONDS, Plan, make_plan
from passhat.local.sandbox import TranscriptError
from passhat.local.spawner import Spawner, SpawnError, SpawnRequest

COMMAND = "spec.trial.template.spec.containers[0].command"


def eval_doc(script: str, *, tasks: list[str], env: list[dict[str, str]] | None = None) -> Any:
    """A one-container eval running `sh -c script`."""
    container: dict[str, Any] = {"name": "a", "image": "x", "command": ["sh", "-c", script]}
    if env is not None:
        container["env"] = env
    return {
        "apiVersion": "passhat.dev/v1alpha1",
        "kind": "ConsistencyEval",
        "metadata": {"name": "t"},
        "spec": {
            "tasks": [{"id": task} for task in tasks],
            "trials": 1,
            "trial": {"template": {"spec": {"containers": [container]}}},
        },
    }


def _plan(env: list[dict[str, str]] | None = None) -> tuple[ConsistencyEval, Plan]:
    evaluation = ConsistencyEval.model_validate(eval_doc("true", tasks=["a"], env=env))
    plan = make_plan(evaluation, evaluation.spec.tasks or [], source="v.yaml", eval_dir="/")
    return evaluation, plan


@pytest.mark.parametrize("task_id", ["a", "task-1.v2", "x" * NAME_MAX])
def test_transcript_name_of_a_safe_id_is_the_id(task_id: str) -> None:
    """An id of at most NAME_MAX safe characters keeps its name."""
    assert transcript_name(task_id) == task_id


@pytest.mark.parametrize(("task_id", "safe"), [("a/b", "a_b"), ("y/" * 95, "y_" * 95)])
def test_transcript_name_of_an_unsafe_short_id_is_unchanged(task_id: str, safe: str) -> None:
    """An unsafe id not truncated keeps the name it always had: safe form, dash, hash."""
    digest = hashlib.sha1(task_id.encode()).hexdigest()[:8]
    assert transcript_name(task_id) == f"{safe}-{digest}"


@pytest.mark.parametrize("prefix", ["x" * 250, "y/" * 120])
def test_long_ids_sharing_a_prefix_get_different_names(prefix: str) -> None:
    """Truncation comes before the hash, so ids differing after NAME_MAX do not collide."""
    one, two = transcript_name(prefix + "1"), transcript_name(prefix + "2")
    assert one != two
    assert len(one) == len(two) == NAME_MAX


def test_spawner_treats_any_exception_as_a_failed_spawn(tmp_path: Path) -> None:
    """A ValueError from Popen (a NUL in the environment) is a failure, not a dead thread."""
    woken = threading.Event()
    spawner = Spawner(threads=1, pool=None, on_started=lambda _: None, on_failed=woken.set)
    try:
        for _ in range(2):
            spawner.submit(
                SpawnRequest(
                    executable="/bin/true",
                    argv=["true"],
                    env={"A": "x\0y"},
                    cwd=str(tmp_path),
                    transcript=str(tmp_path / "t.log"),
                    cgroup=None,
                )
            )
        spawner.wait_idle()
        failed = spawner.failures()
    finally:
        spawner.close()
    assert woken.is_set()
    assert len(failed) == 2
    assert all(isinstance(request.error, ValueError) for request in failed)


def test_huge_timeout_is_clamped() -> None:
    """A timeoutSeconds no float can hold gives a deadline far away, not an OverflowError."""
    evaluation, _ = _plan()
    trial = evaluation.spec.trial.model_copy(update={"timeout_seconds": 10**400})
    spec = evaluation.spec.model_copy(update={"trial": trial})
    evaluation = evaluation.model_copy(update={"spec": spec})
    plan = make_plan(evaluation, spec.tasks or [], source="v.yaml", eval_dir="/")
    assert plan.timeout_seconds == MAX_TIMEOUT_SECONDS
    assert MAX_SLEEP <= 3600


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ([{"name": "A", "value": "1"}, {"name": "B", "value": "x\0y"}], "env[1].value"),
        ([{"name": "B", "value": "x" * (128 * 1024)}], "env[0].value"),
    ],
)
def test_env_exec_cannot_take_is_refused(env: list[dict[str, str]], field: str) -> None:
    """A NUL or an over-long value is a SpecError on its field before any trial."""
    with pytest.raises(SpecError) as caught:
        _plan(env=env)
    assert caught.value.field == f"spec.trial.template.spec.containers[0].{field}"


def test_nul_in_args_is_refused() -> None:
    """A NUL in an argument names that argument."""
    doc = eval_doc("true", tasks=["a"])
    doc["spec"]["trial"]["template"]["spec"]["containers"][0]["args"] = ["ok", "a\0b"]
    evaluation = ConsistencyEval.model_validate(doc)
    with pytest.raises(SpecError) as caught:
        make_plan(evaluation, evaluation.spec.tasks or [], source="v.yaml", eval_dir="/")
    assert caught.value.field == "spec.trial.template.spec.containers[0].args[1]"


def test_params_over_the_kernel_limit_are_refused() -> None:
    """PASSHAT_TASK over 128 KiB (E2BIG at exec) is refused on spec.tasks[i].params: by
    the model's 64 KiB limit first, and by the plan for a task that skipped the model."""
    doc = eval_doc("true", tasks=["a", "b"])
    doc["spec"]["tasks"][1]["params"] = {"blob": "x" * (130 * 1024)}
    with pytest.raises(ValidationError, match="more than 64 KiB per task"):
        ConsistencyEval.model_validate(doc)
    del doc["spec"]["tasks"][1]["params"]
    evaluation = ConsistencyEval.model_validate(doc)
    tasks = [
        (evaluation.spec.tasks or [])[0],
        Task.model_construct(id="b", params={"blob": "x" * (130 * 1024)}),
    ]
    with pytest.raises(SpecError) as caught:
        make_plan(evaluation, tasks, source="v.yaml", eval_dir="/")
    assert caught.value.field == "spec.tasks[1].params"
    assert "131072" in caught.value.reason


def test_journal_write_error_names_the_journal(tmp_path: Path) -> None:
    """ENOSPC from the journal is a JournalError with the path (here: /dev/full)."""
    journal = Journal("/dev/full")
    record: dict[str, Any] = {"task_id": "x", "outcome": "pass", "reason": "exit_code"}
    record.update(trial=0, attempt=0, exit_code=0, duration_s=0.0, final=True)
    with pytest.raises(JournalError) as caught:
        journal.append(record)
    with pytest.raises(JournalError):
        journal.close()
    assert caught.value.errno == errno.ENOSPC
    assert caught.value.filename == "/dev/full"


def test_execution_errors_name_the_right_thing() -> None:
    """Only an exec failure of the command blames the command field."""
    _, plan = _plan()
    full = _execution_error(
        JournalError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/o/trials.jsonl"), plan, "v", "/o"
    )
    assert isinstance(full, InputError) and full.path == "/o/trials.jsonl"
    assert "No space left on device" in str(full)
    transcript = _execution_error(
        SpawnError(TranscriptError(errno.ENOSPC, "No space left on device", "/o/t/0-0.log")),
        plan,
        "v",
        "/o",
    )
    assert isinstance(transcript, InputError) and transcript.path == "/o/t/0-0.log"
    missing = _execution_error(
        SpawnError(FileNotFoundError(errno.ENOENT, "No such file", plan.executable)),
        plan,
        "v",
        "/o",
    )
    assert isinstance(missing, SpecError) and missing.field == COMMAND
    for cause in (
        OSError(errno.EMFILE, os.strerror(errno.EMFILE)),
        OSError(errno.ENFILE, os.strerror(errno.ENFILE)),
        OSError(errno.E2BIG, os.strerror(errno.E2BIG), plan.executable),
        ValueError("embedded null byte"),
    ):
        for err in (SpawnError(cause), cause):
            if not isinstance(err, OSError | SpawnError):
                continue
            error = _execution_error(err, plan, "v", "/o")
            assert type(error) is PasshatError, error
            assert COMMAND not in str(error) and "--resume" in str(error)
