"""Trial readers: every supported format, detection, and every bad input as an InputError."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from passhat.api.errors import InputError
from passhat.stats import TaskTally
from passhat.trials.outcomes import Outcome
from passhat.trials.readers import read_tallies, read_trials

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FIXTURES = ROOT / "tests" / "fixtures"


def _write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_jsonl_example() -> None:
    """The bundled JSONL example reads as 160 rows of 20 tasks."""
    rows = read_trials(EXAMPLES / "same-mean-bimodal.jsonl")
    assert len(rows) == 160
    assert rows[0].task_id == "solid-0"
    assert rows[0].outcome is Outcome.PASS
    assert rows[0].line == 1
    assert len(read_tallies([EXAMPLES / "same-mean-bimodal.jsonl"])) == 20


def test_jsonl_extra_keys_blank_lines_and_local_trials_records(tmp_path: Path) -> None:
    """Extra keys are ignored, blank lines skipped, integer trial kept (trials.jsonl records)."""
    record = {
        "task_id": "t",
        "trial": 2,
        "attempt": 1,
        "outcome": "infra_error",
        "reason": "oom_killed",
        "exit_code": 137,
        "duration_s": 1.5,
        "final": False,
    }
    text = json.dumps(record) + "\n\n" + '{"task_id": 7, "outcome": "fail"}\n'
    rows = read_trials(_write(tmp_path, "trials.jsonl", text))
    assert [(r.task_id, r.outcome, r.trial, r.line) for r in rows] == [
        ("t", Outcome.INFRA_ERROR, 2, 1),
        ("7", Outcome.FAIL, None, 3),
    ]


def test_jsonl_counts_a_repeated_attempt_once(tmp_path: Path) -> None:
    """A copied trials.jsonl line (same task, trial, attempt) is one attempt, as in the
    ledger of `passhat run`; lines without an attempt number are all kept."""
    lines = [
        {"task_id": "t", "trial": 0, "attempt": 0, "outcome": "pass"},
        {"task_id": "t", "trial": 0, "attempt": 0, "outcome": "pass"},
        {"task_id": "t", "trial": 1, "attempt": 0, "outcome": "fail"},
        {"task_id": "u", "outcome": "pass"},
        {"task_id": "u", "outcome": "pass"},
    ]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    rows = read_trials(_write(tmp_path, "trials.jsonl", text))
    assert [(r.task_id, r.trial, r.line) for r in rows] == [
        ("t", 0, 1),
        ("t", 1, 3),
        ("u", None, 4),
        ("u", None, 5),
    ]


def test_csv_with_extra_columns_and_non_adjacent_rows(tmp_path: Path) -> None:
    """A CSV header with task_id and outcome in any position; rows of a task need not touch."""
    text = 'model,outcome,task_id,trial\nx,pass,a,0\nx,fail,"b, quoted",0\n\nx, pass ,a,1\n'
    path = _write(tmp_path, "runs.csv", text)
    rows = read_trials(path)
    assert [(r.task_id, r.outcome.value, r.trial, r.line) for r in rows] == [
        ("a", "pass", 0, 2),
        ("b, quoted", "fail", 0, 3),
        ("a", "pass", 1, 5),
    ]
    assert read_tallies([path]) == [TaskTally("a", 2, 0, 0), TaskTally("b, quoted", 0, 1, 0)]


def test_inspect_log_made_by_inspect() -> None:
    """The real Inspect log: each sample a task, each epoch a trial, C passes and I fails."""
    path = FIXTURES / "inspect" / "flaky.json"
    rows = read_trials(path)
    assert len(rows) == 16
    assert {r.trial for r in rows} == {0, 1, 2, 3}
    tallies = {t.task_id: (t.passed, t.failed, t.infra_errors) for t in read_tallies([path])}
    assert tallies == {
        "always": (4, 0, 0),
        "never": (0, 4, 0),
        "half": (2, 2, 0),
        "mostly": (3, 1, 0),
    }


def test_inspect_sample_error_is_an_infra_error(tmp_path: Path) -> None:
    """A sample that ended in an error is an infra error, whatever its score."""
    log = json.loads((FIXTURES / "inspect" / "flaky.json").read_text())
    log["samples"][0]["error"] = {"message": "RateLimitError", "traceback": "..."}
    rows = read_trials(_write(tmp_path, "log.json", json.dumps(log)))
    assert rows[0].outcome is Outcome.INFRA_ERROR
    assert sum(r.outcome is Outcome.INFRA_ERROR for r in rows) == 1


def test_taubench_results() -> None:
    """tau-bench: reward 1 passes, less fails, and a caught exception (reward 0,
    `info.error`) fails, as tau-bench's own display_metrics counts it."""
    path = FIXTURES / "taubench" / "results.json"
    assert read_tallies([path]) == [
        TaskTally("0", 3, 0, 0),
        TaskTally("1", 1, 2, 0),
        TaskTally("2", 0, 3, 0),
    ]
    assert [r.trial for r in read_trials(path)][:4] == [0, 0, 0, 1]


def test_format_detected_from_content_without_extension(tmp_path: Path) -> None:
    """No telling extension: JSON Lines, a JSON array, or CSV by their first character."""
    jsonl = _write(tmp_path, "a", '{"task_id": "t", "outcome": "pass"}\n')
    array = _write(tmp_path, "b", '[{"task_id": "t", "outcome": "fail"}]')
    table = _write(tmp_path, "c.txt", "task_id,outcome\nt,infra_error\n")
    inspect = _write(tmp_path, "d.log", (FIXTURES / "inspect" / "flaky.json").read_text())
    assert [r.outcome.value for p in (jsonl, array, table) for r in read_trials(p)] == [
        "pass",
        "fail",
        "infra_error",
    ]
    assert len(read_trials(inspect)) == 16


def test_json_extension_holding_json_lines(tmp_path: Path) -> None:
    """A .json file with one object per line is read as JSON Lines."""
    text = '{"task_id": "t", "outcome": "pass"}\n{"task_id": "t", "outcome": "fail"}\n'
    assert len(read_trials(_write(tmp_path, "x.json", text))) == 2


def test_several_files_are_one_run(tmp_path: Path) -> None:
    """read_tallies adds up the rows of every file, per task."""
    one = _write(tmp_path, "1.jsonl", '{"task_id": "t", "outcome": "pass"}\n')
    two = _write(tmp_path, "2.csv", "task_id,outcome\nt,fail\nu,pass\n")
    assert read_tallies([one, two]) == [TaskTally("t", 1, 1, 0), TaskTally("u", 1, 0, 0)]


# (file name, content, the message it must give)
BAD = [
    (
        "t.jsonl",
        '{"task_id": "a", "outcome": "pass"}\n{"task_id": "a", \n',
        r"t\.jsonl:2: bad JSON",
    ),
    # a torn last line (a killed run's journal) says so and what repairs it
    (
        "t.jsonl",
        '{"task_id": "a", "outcome": "pass"}\n{"task_id": "a", "tri',
        r"t\.jsonl:2: bad JSON: Unterminated string .*; the last line has no newline: .*"
        r"passhat run --resume",
    ),
    ("t.jsonl", '{"task_id": "a", "outcome": "passed"}\n', r"t\.jsonl:1: unknown outcome 'passed'"),
    ("t.jsonl", '\n\n{"task_id": "a"}\n', r"t\.jsonl:3: missing key 'outcome'"),
    ("t.jsonl", '{"outcome": "pass"}\n', r"t\.jsonl:1: missing key 'task_id'"),
    ("t.jsonl", '["a", "pass"]\n', r"t\.jsonl:1: expected a JSON object, got list"),
    ("t.jsonl", '{"task_id": "", "outcome": "pass"}\n', r"t\.jsonl:1: task_id is empty"),
    ("t.jsonl", '{"task_id": null, "outcome": "pass"}\n', r"t\.jsonl:1: task_id must be a string"),
    ("t.jsonl", '{"task_id": "a", "outcome": 1}\n', r"t\.jsonl:1: unknown outcome 1"),
    ("t.csv", "task_id,result\na,pass\n", r"t\.csv:1: missing column 'outcome'"),
    ("t.csv", "task_id,outcome\na,pass\nb,PASSED\n", r"t\.csv:3: unknown outcome 'PASSED'"),
    ("t.csv", "task_id,outcome\na,pass\nb\n", r"t\.csv:3: too few fields"),
    ("t.csv", "task_id,outcome\n", r"t\.csv: no trials in the file"),
    ("t.jsonl", "", r"t\.jsonl: empty file"),
    ("t.jsonl", "  \n\n", r"t\.jsonl: empty file"),
    ("t.json", '{"task_id": "a", "outcome": "pass"', r"t\.json:1: cut short"),
    ("t.json", '{"task_id": "a", "outcome": pass}', r"t\.json:1: bad JSON: Expecting value"),
    ("t.json", '{"hello": 1}', r"t\.json: not a recognised trial file"),
    ("t.json", "[]", r"t\.json: no trials in the file"),
    (
        "t.json",
        '[{"task_id": "a", "outcome": "pass"}, 3]',
        r"t\.json: \[1\]: expected a JSON object",
    ),
    ("t.json", '[{"task_id": 1, "reward": "1"}]', r"t\.json: \[0\]: reward must be a number"),
    ("t.json", '[{"reward": 1}]', r"t\.json: \[0\]: missing key 'task_id'"),
    (
        "t.json",
        '{"version": 2, "eval": {}, "status": "error"}',
        r"t\.json: Inspect log has no samples",
    ),
    ("t.eval", "PK\x03\x04", r"t\.eval: cut short: an Inspect \.eval log \(a zip\) without"),
    ("t.eval", "inspect", r"t\.eval: not an Inspect \.eval log: not a zip file"),
    ("t.jsonl", b"\xff\xfe\x00garbage", r"t\.jsonl: not UTF-8 text"),
    ("t.json", "[" * 5000 + "]" * 5000, r"t\.json: bad JSON: nested too deeply"),
    ("t.jsonl", '{"task_id": ' + "[" * 5000 + "]" * 5000 + "}\n", r"t\.jsonl:1: bad JSON: nested"),
    ("t", '{"a": ' * 5000 + "1" + "}" * 5000 + "\n", r"t: bad JSON: nested too deeply"),
    # integers Python will not convert (more than 4300 digits): no ValueError traceback
    (
        "t.jsonl",
        '{"task_id": "a", "outcome": "pass"}\n{"task_id": "a", "trial": ' + "9" * 5000 + "}\n",
        r"t\.jsonl:2: bad JSON: a number with more than 4300 digits",
    ),
    ("t.json", '[{"task_id": ' + "1" * 5000 + "}]", r"t\.json: bad JSON: a number with more"),
    ("t", '{"task_id": ' + "1" * 5000 + "}", r"t: bad JSON: a number with more than 4300"),
]


@pytest.mark.parametrize(("name", "text", "message"), BAD, ids=[m for _, _, m in BAD])
def test_bad_input_names_file_and_line(
    tmp_path: Path, name: str, text: str | bytes, message: str
) -> None:
    """Each malformed file is one InputError line naming the file (and line, where there is one)."""
    path = _write(tmp_path, name, text)
    with pytest.raises(InputError) as caught:
        read_trials(path)
    assert caught.value.path == str(path)
    assert re.search(message, str(caught.value)), str(caught.value)
    assert "\n" not in str(caught.value)


def test_csv_trial_column_that_is_not_a_small_integer_is_ignored(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.csv", f"task_id,outcome,trial\na,pass,{'9' * 5000}\nb,fail,\u00b2\n")
    assert [row.trial for row in read_trials(path)] == [None, None]


def test_inspect_score_value_not_understood(tmp_path: Path) -> None:
    """An Inspect score the reader cannot map names the sample."""
    log = json.loads((FIXTURES / "inspect" / "flaky.json").read_text())
    log["samples"][2]["scores"]["match"]["value"] = {"accuracy": 1}
    message = r"samples\[2\]: sample 'mostly': the score value is a dict"
    with pytest.raises(InputError, match=message):
        read_trials(_write(tmp_path, "log.json", json.dumps(log)))


def test_missing_file_and_directory(tmp_path: Path) -> None:
    """A missing path and a directory are InputErrors naming the path."""
    with pytest.raises(InputError, match=r"nope\.jsonl: no such file"):
        read_trials(tmp_path / "nope.jsonl")
    with pytest.raises(InputError, match="is a directory"):
        read_trials(tmp_path)
