"""Without --out every run gets a new directory, and --resume continues the latest one."""

from __future__ import annotations

import json
from pathlib import Path

from tests.local.local_helpers import eval_doc, passhat, rows, write_eval

TRIALS = 2


def _run_dir(stderr: str) -> Path:
    """The run directory named on the last stderr line."""
    last = stderr.splitlines()[-1]
    prefix = "passhat: run directory: "
    assert last.startswith(prefix), stderr
    return Path(last[len(prefix) :])


def test_each_run_gets_a_new_directory_and_resume_takes_the_latest(tmp_path: Path) -> None:
    """Two runs of one eval write two timestamped directories; --resume refills the second."""
    path = write_eval(tmp_path / "eval.yaml", eval_doc("exit 0", tasks=["a", "b"], trials=TRIALS))
    first = passhat("run", path, "-q", "--format", "json", cwd=tmp_path)
    second = passhat("run", path, "-q", "--format", "json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert first.stdout == second.stdout
    one, two = _run_dir(first.stderr), _run_dir(second.stderr)
    base = (tmp_path / "passhat-runs" / "t").resolve()
    assert one.parent == two.parent == base
    assert sorted(p.name for p in base.iterdir()) == [one.name, two.name]
    assert len(rows(one)) == len(rows(two)) == 2 * TRIALS

    journal = two / "trials.jsonl"
    journal.write_text("".join(journal.read_text().splitlines(keepends=True)[:-1]))
    before_first = (one / "trials.jsonl").read_bytes()
    resumed = passhat("run", path, "--resume", "-q", "--format", "json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert _run_dir(resumed.stderr) == two
    assert json.loads(resumed.stdout) == json.loads(first.stdout)
    assert len(rows(two)) == 2 * TRIALS
    assert (one / "trials.jsonl").read_bytes() == before_first
    assert sorted(p.name for p in base.iterdir()) == [one.name, two.name]


def test_resume_without_any_run_is_one_error_line(tmp_path: Path) -> None:
    """--resume without --out and without an earlier run: exit 2, one line, nothing created."""
    path = write_eval(tmp_path / "eval.yaml", eval_doc("exit 0", tasks=["a"], trials=1))
    proc = passhat("run", path, "--resume", "-q", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("passhat: error: --resume: no earlier run of t in ")
    assert not (tmp_path / "passhat-runs").exists()
