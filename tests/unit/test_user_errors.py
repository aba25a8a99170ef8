"""Every error a user can cause without a cluster: exit 2, one line naming file/line/field.

These drive the real CLI in-process (`passhat.cli.main`) and look only at what the user
sees: the exit code and stderr. None of them starts a trial: `passhat run` refuses each
bad spec before it creates the run directory. The run-directory errors (existing `--out`,
a corrupted `trials.jsonl` on `--resume`) need a real run and live in
`tests/local/test_user_errors_local.py`.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from passhat.cli import main

EXAMPLE_EVAL = Path(__file__).resolve().parents[2] / "examples" / "local" / "eval.yaml"

# A plain user-error line: the command's name, "error:", then what and where.
_ERROR_LINE = re.compile(r"^passhat( \w+)?: error: \S.*$")


def _run_cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str]:
    """`passhat argv...` in-process; returns (exit code, stderr), checking it is one line."""
    code = main([str(arg) for arg in argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert _ERROR_LINE.match(lines[0]), err
    return code, lines[0]


# -- passhat run: bad eval specs ------------------------------------------------------------


def _eval_doc() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(EXAMPLE_EVAL.read_text()))


def _container(doc: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = doc["spec"]["trial"]["template"]["spec"]["containers"][0]
    return container


def _k_above_trials(doc: dict[str, Any]) -> None:
    doc["spec"]["ks"] = [1, 9]


def _unknown_field(doc: dict[str, Any]) -> None:
    doc["spec"]["retry"]["infraErrorz"] = 3


def _no_containers(doc: dict[str, Any]) -> None:
    doc["spec"]["trial"]["template"]["spec"]["containers"] = []


def _duplicate_task(doc: dict[str, Any]) -> None:
    doc["spec"]["tasks"].append({"id": "address-change"})


def _bad_quantity(doc: dict[str, Any]) -> None:
    _container(doc)["resources"]["limits"]["memory"] = "lots"


def _trials_not_a_number(doc: dict[str, Any]) -> None:
    doc["spec"]["trials"] = "eight"


SPEC_CASES = {
    "k > trials": (_k_above_trials, "spec.ks[1]: k=9 is larger than trials=8"),
    "unknown field": (_unknown_field, "spec.retry.infraErrorz: unknown field"),
    "no containers": (_no_containers, "spec.trial.template.spec.containers: at least one"),
    "duplicate task id": (_duplicate_task, 'spec.tasks[5].id: duplicate task id "address-change"'),
    "bad quantity": (
        _bad_quantity,
        'spec.trial.template.spec.containers[0].resources.limits.memory: "lots" is not',
    ),
    "trials not a number": (_trials_not_a_number, "spec.trials: should be a valid integer"),
}


@pytest.mark.parametrize("case", list(SPEC_CASES))
def test_bad_spec_names_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    """A bad spec: exit 2, `eval.yaml:<line>: <field path>: <reason>`, no run directory."""
    change, expected = SPEC_CASES[case]
    doc = _eval_doc()
    change(doc)
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    code, line = _run_cli(capsys, "run", path, "--out", tmp_path / "out", "-q")
    assert code == 2
    assert re.search(rf"{re.escape(str(path))}:\d+: ", line), line
    assert expected in line
    assert not (tmp_path / "out").exists()


def test_bad_yaml_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """YAML that does not parse: exit 2 and the line the parser stopped at."""
    path = tmp_path / "eval.yaml"
    text = EXAMPLE_EVAL.read_text().replace("  trials: 8\n", "  trials: [8\n", 1)
    path.write_text(text)
    code, line = _run_cli(capsys, "run", path, "--out", tmp_path / "out")
    assert code == 2
    bad_line = text.splitlines().index("  trials: [8") + 1
    found = re.match(rf"passhat: error: {re.escape(str(path))}:(\d+): invalid YAML", line)
    assert found is not None, line
    assert bad_line <= int(found[1]) <= bad_line + 2, line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("missing.yaml", None, "missing.yaml: no such file"),
        ("empty.yaml", "", "empty.yaml: empty file"),
        ("list.yaml", "- a\n- b\n", "list.yaml:1: expected a ConsistencyEval object"),
    ],
)
def test_eval_file_that_is_not_an_eval(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    content: str | None,
    expected: str,
) -> None:
    """A missing, empty or non-mapping eval file is one line naming it."""
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    code, line = _run_cli(capsys, "run", path, "--out", tmp_path / "out")
    assert code == 2
    assert expected in line


# -- passhat score: bad result files --------------------------------------------------------

SCORE_CASES: dict[str, tuple[str, str | bytes, str]] = {
    "bad JSON line": (
        "runs.jsonl",
        '{"task_id": "a", "outcome": "pass"}\n{"task_id": "a", oops}\n',
        "runs.jsonl:2: bad JSON",
    ),
    "unknown outcome": (
        "runs.jsonl",
        '{"task_id": "a", "outcome": "pass"}\n{"task_id": "a", "outcome": "passed"}\n',
        "runs.jsonl:2: unknown outcome 'passed'",
    ),
    "CSV missing column": (
        "runs.csv",
        "task_id,result\na,pass\n",
        "runs.csv:1: missing column 'outcome'",
    ),
    "empty file": ("runs.jsonl", "", "runs.jsonl: empty file"),
    "not UTF-8": ("runs.jsonl", b"\xff\xfe\x00garbage", "runs.jsonl: not UTF-8 text"),
    "JSON cut short": (
        "results.json",
        '[{"task_id": 1, "reward": 1.0}, {"task_id": 1, "rew',
        "results.json:1: cut short",
    ),
    "CSV cut short": (
        "runs.csv",
        "task_id,outcome\na,pass\nb",
        "runs.csv:3: too few fields in this row; the last line has no newline: the file is cut",
    ),
    "Inspect .eval cut short": (
        "run.eval",
        (Path(__file__).parents[1] / "fixtures" / "inspect" / "flaky.eval").read_bytes()[:9000],
        "run.eval: cut short: an Inspect .eval log (a zip) without the directory",
    ),
}


@pytest.mark.parametrize("case", list(SCORE_CASES))
def test_bad_results_file_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    """A results file `passhat score` cannot use: exit 2, one line with file (and line)."""
    name, content, expected = SCORE_CASES[case]
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    code, line = _run_cli(capsys, "score", path)
    assert code == 2
    assert f"{tmp_path}/{expected}" in line


def test_missing_and_directory_results_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A results path that does not exist or is a directory names the path."""
    code, line = _run_cli(capsys, "score", tmp_path / "nope.jsonl")
    assert code == 2 and line.endswith("nope.jsonl: no such file")
    code, line = _run_cli(capsys, "score", tmp_path)
    assert code == 2 and line.endswith(
        f"{tmp_path}: is a directory, not a trial file (a run directory or bundle of passhat "
        "holds trials.jsonl, a tau2-bench directory results.json)"
    )


def test_unreadable_results_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A results file the OS refuses to read: `<file>: cannot read: Permission denied`."""
    path = tmp_path / "runs.jsonl"
    path.write_text('{"task_id": "a", "outcome": "pass"}\n')
    path.chmod(0)
    real_read_text = Path.read_text

    def refuse(self: Path, *args: Any, **kwargs: Any) -> str:
        # NB: root (as in CI) reads mode-0 files anyway, so the refusal is simulated too
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real_read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", refuse)
    code, line = _run_cli(capsys, "score", path)
    assert code == 2
    assert line == f"passhat: error: {path}: cannot read: Permission denied"


def test_a_bad_line_in_a_second_file_names_that_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With several shards, the error names the shard and the line that is wrong."""
    good = tmp_path / "a.jsonl"
    good.write_text('{"task_id": "a", "outcome": "pass"}\n')
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"task_id": "b", "outcome": "pass"}\n\n{"task_id": "b"}\n')
    code, line = _run_cli(capsys, "score", good, bad)
    assert code == 2
    assert f"{bad}:3: " in line and "outcome" in line


def test_corrupted_trials_journal_is_not_scored_silently(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`passhat score trials.jsonl` with a corrupted middle record names its line."""
    record = {"task_id": "a", "trial": 0, "attempt": 0, "outcome": "pass", "reason": "exit_code"}
    lines = [json.dumps({**record, "trial": trial}) for trial in range(4)]
    lines[2] = lines[2][:25]
    path = tmp_path / "trials.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code, line = _run_cli(capsys, "score", path)
    assert code == 2
    assert f"{path}:3: bad JSON" in line


# -- options --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["score", "{results}", "--k", "0"], "passhat score: error: argument --k: must be"),
        (["score", "{results}", "--format", "yaml"], "argument --format: invalid choice"),
        (["score"], "passhat score: error: the following arguments are required: FILE"),
        (["run", "{eval}", "--format", "pdf"], "passhat run: error: argument --format"),
        (["power", "--mean-rate", "0.5"], "the following arguments are required: --diff"),
        (["no-such-command"], "passhat: error: argument COMMAND: invalid choice"),
    ],
)
def test_bad_option_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    """A bad or missing option: exit 2, one line naming it (no usage dump)."""
    results = tmp_path / "runs.jsonl"
    results.write_text('{"task_id": "a", "outcome": "pass"}\n')
    filled = [arg.format(results=results, eval=EXAMPLE_EVAL) for arg in argv]
    code, line = _run_cli(capsys, *filled)
    assert code == 2
    assert expected in line
    assert "--help" in line
