"""Local runs for `passhat history`: which directories, when each ran, which suite."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from passhat.api.errors import InputError, UsageError
from passhat.history import local_runs, select_suite
from passhat.history.rundirs import INCOMPLETE, read_local_run, run_directories


def make_run(
    path: Path,
    *,
    suite: str | None = "nightly",
    started: str | None = "2026-12-05T07:00:00Z",
    completed: str | None = "2026-12-05T07:05:00Z",
    spec: dict[str, object] | None = None,
) -> Path:
    """A run directory with one passing trial; run.json unless `started` is None."""
    path.mkdir(parents=True)
    record = {"task_id": "a", "trial": 0, "attempt": 0, "outcome": "pass", "reason": "exit_code"}
    (path / "trials.jsonl").write_text(json.dumps(record) + "\n")
    if started is not None:
        info = {"eval": "e", "suite": suite, "startedAt": started, "completedAt": completed}
        (path / "run.json").write_text(json.dumps(info))
    if spec is not None:
        (path / "spec.yaml").write_text(yaml.safe_dump(spec))
    return path


def test_a_directory_of_runs_is_searched_two_levels_down(tmp_path: Path) -> None:
    """passhat-runs/<eval>/<stamp>: the root, an eval's folder and a run all name runs."""
    a1 = make_run(tmp_path / "passhat-runs" / "e" / "20261205T070000Z")
    a2 = make_run(tmp_path / "passhat-runs" / "e" / "20261205T080000Z")
    b1 = make_run(tmp_path / "passhat-runs" / "f" / "20261205T090000Z")
    root = tmp_path / "passhat-runs"
    assert run_directories(str(root)) == [str(a1), str(a2), str(b1)]
    assert run_directories(str(root / "e")) == [str(a1), str(a2)]
    assert run_directories(str(a1)) == [str(a1)]
    # a run named twice counts once
    assert len(local_runs([str(root / "e"), str(a1)])) == 2


def test_missing_or_empty_directories_are_input_errors(tmp_path: Path) -> None:
    """No such directory, or none with a trials.jsonl below it: named in the error."""
    with pytest.raises(InputError, match="no such directory"):
        run_directories(str(tmp_path / "nope"))
    (tmp_path / "empty" / "child").mkdir(parents=True)
    with pytest.raises(InputError, match=r"empty: no trials.jsonl in it"):
        run_directories(str(tmp_path / "empty"))


def test_run_json_gives_start_completion_and_suite(tmp_path: Path) -> None:
    """run.json's times and suite; no completedAt: the run is incomplete."""
    done = read_local_run(str(make_run(tmp_path / "done")))
    assert (done.suite, done.state) == ("nightly", "complete")
    assert done.started is not None and done.completed == done.started + 300
    cut = read_local_run(str(make_run(tmp_path / "cut", completed=None)))
    assert (cut.state, cut.completed) == (INCOMPLETE, None)


def test_a_malformed_run_json_names_the_file_and_field(tmp_path: Path) -> None:
    """A start that is not a time: InputError with the path of run.json and the field."""
    path = make_run(tmp_path / "bad", started="yesterday")
    with pytest.raises(InputError, match=r"run\.json: startedAt: not an RFC 3339 time"):
        read_local_run(str(path))
    (path / "run.json").write_text("[]")
    with pytest.raises(InputError, match=r"run\.json: expected a JSON object"):
        read_local_run(str(path))


def test_without_run_json_the_spec_says_suite_and_start(tmp_path: Path) -> None:
    """A bundle: the suite from the label (no spec.suite), the start from creationTimestamp;
    without one, the time trials.jsonl was written."""
    spec = {
        "metadata": {
            "name": "e",
            "creationTimestamp": "2026-12-05T06:00:00Z",
            "labels": {"passhat.dev/suite": "by-label"},
        },
        "spec": {"trials": 1},
    }
    bundle = read_local_run(str(make_run(tmp_path / "bundle", started=None, spec=spec)))
    assert (bundle.suite, bundle.state, bundle.started) == ("by-label", "unknown", 1796450400.0)
    plain = make_run(tmp_path / "plain", started=None)
    os.utime(plain / "trials.jsonl", (1000.0, 1000.0))
    assert read_local_run(str(plain)).started == 1000.0


def test_select_suite(tmp_path: Path) -> None:
    """--suite keeps its runs and names the others; without it two suites are refused."""
    runs = local_runs(
        [
            str(make_run(tmp_path / "a", suite="nightly")),
            str(make_run(tmp_path / "b", suite="weekly")),
            str(make_run(tmp_path / "c", suite=None)),
        ]
    )
    notes: list[str] = []
    suite, kept = select_suite(runs, "nightly", note=notes.append)
    assert suite == "nightly" and [r.title for r in kept] == [str(tmp_path / "a")]
    assert notes == [
        f"{tmp_path / 'b'}: left out, a run of weekly, not of nightly",
        f"{tmp_path / 'c'}: left out, a run of no suite, not of nightly",
    ]
    with pytest.raises(UsageError, match=r"several suites: nightly \(1 runs\), weekly \(1 runs\)"):
        select_suite(runs, None, note=notes.append)
    with pytest.raises(UsageError, match="--suite monthly: none of the runs"):
        select_suite(runs, "monthly", note=notes.append)
    assert select_suite(runs[::2], None, note=notes.append)[0] == "nightly"
