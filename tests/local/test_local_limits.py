"""What the kernel or the machine cannot take is refused up front or reported in one line:
NUL bytes and over-long strings for exec, a huge result score, a timeout beyond epoll's
range, too many open files, and a metrics textfile that cannot be written."""

from __future__ import annotations

import json
import resource
import subprocess
from pathlib import Path

from tests.local.local_helpers import PASSHAT, TIMEOUT, RunEval, eval_doc, rows, write_eval

COMMAND = "spec.trial.template.spec.containers[0].command"


def test_nul_in_env_is_refused_before_any_trial(run_eval: RunEval) -> None:
    """A NUL in an env value is a SpecError on its field (it made Popen raise ValueError,
    which killed a spawner thread and hung the run)."""
    doc = eval_doc(
        "exit 0", tasks=["a"], env=[{"name": "A", "value": "1"}, {"name": "B", "value": "x\0y"}]
    )
    done, out = run_eval(doc)
    assert done.returncode == 2, done.stderr
    assert "spec.trial.template.spec.containers[0].env[1].value" in done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists()


def test_params_over_128_kib_are_refused(run_eval: RunEval) -> None:
    """PASSHAT_TASK over the kernel's per-variable limit (E2BIG) names the task's params
    (the spec's 64 KiB limit on params refuses them first)."""
    doc = eval_doc("exit 0", tasks=["a", "b"])
    doc["spec"]["tasks"][1]["params"] = {"blob": "x" * (130 * 1024)}
    done, out = run_eval(doc)
    assert done.returncode == 2, done.stderr
    assert "spec.tasks[1].params" in done.stderr and COMMAND not in done.stderr
    assert not out.exists()


def test_huge_integer_score_is_an_invalid_result(run_eval: RunEval) -> None:
    """A score no float can hold makes the result invalid (ignored: the exit code counts)."""
    big = "9" * 400
    script = f"""printf '{{"outcome":"pass","score":{big}}}' > "$PASSHAT_RESULT"; exit 1"""
    done, out = run_eval(eval_doc(script, tasks=["a", "b"], trials=2))
    assert done.returncode == 0, done.stderr
    records = rows(out)
    assert len(records) == 4
    assert {(r["outcome"], r["reason"]) for r in records} == {("fail", "exit_code")}


def test_timeout_beyond_epoll_range_runs_quietly(run_eval: RunEval) -> None:
    """timeoutSeconds of 30 days with --quiet: the loop's sleep is clamped (no OverflowError)."""
    doc = eval_doc("exit 0", tasks=["a", "b"], trials=2)
    doc["spec"]["trial"]["timeoutSeconds"] = 2_600_000
    done, out = run_eval(doc, "--quiet")
    assert done.returncode == 0, done.stderr
    assert len(rows(out)) == 4


def test_too_many_open_files_is_one_line_not_the_command(tmp_path: Path) -> None:
    """EMFILE while starting trials is a one-line error that does not blame the command."""
    doc = eval_doc("sleep 1", tasks=[f"t{i}" for i in range(40)], trials=1, parallelism=40)
    path = write_eval(tmp_path / "v.yaml", doc)

    def few_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (40, 40))

    done = subprocess.run(
        [*PASSHAT, "run", str(path), "--out", str(tmp_path / "out"), "--quiet"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        preexec_fn=few_files,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "Too many open files" in done.stderr
    assert COMMAND not in done.stderr and "Traceback" not in done.stderr


def test_unwritable_metrics_textfile_is_refused_before_any_trial(
    run_eval: RunEval, tmp_path: Path
) -> None:
    """--metrics-textfile in a missing directory: exit 2 before the first trial."""
    metrics = tmp_path / "missing" / "m.prom"
    done, out = run_eval(eval_doc("exit 0", tasks=["a"]), "--metrics-textfile", str(metrics))
    assert done.returncode == 2, done.stderr
    assert "--metrics-textfile" in done.stderr and "does not exist" in done.stderr
    assert not out.exists()


def test_metrics_write_failing_at_the_end_comes_after_the_report(
    run_eval: RunEval, tmp_path: Path
) -> None:
    """A metrics directory that disappears during the run: the report, then the error."""
    directory = tmp_path / "metrics"
    directory.mkdir()
    doc = eval_doc(f'rm -rf "{directory}"; exit 0', tasks=["a"], trials=1, ks=[1])
    done, out = run_eval(doc, "--metrics-textfile", str(directory / "m.prom"))
    assert done.returncode == 2, done.stderr
    (summary,) = json.loads(done.stdout)
    assert summary["mean_pass_rate"] == 1.0
    assert "cannot write the metrics file" in done.stderr
    assert done.stderr.index("run directory:") < done.stderr.index("error:")
    assert len(rows(out)) == 1
