"""`passhat score / compare / power` end to end, in process and once as the console script."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from passhat.cli import main

ROOT = Path(__file__).resolve().parents[2]
BIMODAL = str(ROOT / "examples" / "same-mean-bimodal.jsonl")
UNIFORM = str(ROOT / "examples" / "same-mean-uniform.jsonl")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_score_json_known_answers(capsys: pytest.CaptureFixture[str]) -> None:
    """`score --format json` on the examples prints the published numbers, 8 keys per k."""
    code, out, _ = _run(capsys, "score", UNIFORM, "--format", "json", "--k", "3", "--k", "8")
    assert code == 0
    three, eight = json.loads(out)
    assert len(three) == 8
    assert (three["k"], three["tasks_scored"]) == (3, 20)
    assert three["pass_hat_k"] == pytest.approx(5 / 14, abs=1e-12)
    assert three["pass_at_k"] == pytest.approx(1.0, abs=1e-12)
    assert eight["pass_hat_k"] == 0.0
    assert len(three["flaky"]) == 20


def test_score_default_ks_are_1_3_and_n(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --k the ks are 1, 3 and the most graded trials of a task (8)."""
    code, out, _ = _run(capsys, "score", BIMODAL, "--format", "json")
    assert code == 0
    assert [s["k"] for s in json.loads(out)] == [1, 3, 8]
    assert json.loads(out)[1]["pass_hat_k"] == pytest.approx(15 / 28, abs=1e-12)


def test_score_text_markdown_html_out_and_plot(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Every human format renders; --out writes the file, --plot the PNG."""
    code, out, _ = _run(capsys, "score", BIMODAL, "--k", "8")
    assert code == 0
    assert "25.0 points lost to inconsistency" in out
    code, out, _ = _run(capsys, "score", BIMODAL, "--format", "markdown", "--no-intervals")
    assert "| 8 | 20 | 75.0% | 100.0% | 50.0% | 10 | 0 |" in out
    page, png = tmp_path / "r.html", tmp_path / "r.png"
    code, out, err = _run(
        capsys, "score", BIMODAL, "--format", "html", "--out", str(page), "--plot", str(png)
    )
    assert (code, out) == (0, "")
    assert "wrote" in err
    assert "<svg" in page.read_text()
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_score_k_beyond_every_task_is_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    """A k above every task's trials still scores (all need more trials) with a note."""
    code, out, err = _run(capsys, "score", BIMODAL, "--k", "9", "--format", "json")
    assert code == 0
    assert json.loads(out)[0]["tasks_scored"] == 0
    assert "k=9 is more than any task's 8 graded trials" in err


def test_score_several_files_are_one_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Two shards of one run add up per task."""
    one = tmp_path / "1.jsonl"
    two = tmp_path / "2.csv"
    one.write_text('{"task_id": "t", "outcome": "pass"}\n')
    two.write_text("task_id,outcome\nt,fail\n")
    code, out, _ = _run(capsys, "score", str(one), str(two), "--format", "json")
    assert code == 0
    assert json.loads(out)[0]["mean_pass_rate"] == 0.5


BAD_FILES = [
    ("bad.jsonl", '{"task_id": "a", "outcome": "pass"}\n{oops\n', "bad.jsonl:2: bad JSON"),
    ("bad.jsonl", '{"task_id": "a", "outcome": "ok"}\n', "bad.jsonl:1: unknown outcome 'ok'"),
    ("bad.csv", "task,outcome\na,pass\n", "bad.csv:1: missing column 'task_id'"),
    ("empty.jsonl", "", "empty.jsonl: empty file"),
]


@pytest.mark.parametrize(("name", "text", "message"), BAD_FILES)
def test_bad_files_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, text: str, message: str
) -> None:
    """A bad file is exit 2 and one `passhat: error:` line naming file and line."""
    path = tmp_path / name
    path.write_text(text)
    code, out, err = _run(capsys, "score", str(path))
    assert code == 2
    assert out == ""
    assert err.startswith("passhat: error: ")
    assert message in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["score", BIMODAL, "--k", "0"], "argument --k: must be at least 1, got 0"),
        (["score", BIMODAL, "--k", "x"], "argument --k: expected an integer"),
        (["score", BIMODAL, "--format", "yaml"], "invalid choice: 'yaml'"),
        (["score"], "the following arguments are required: FILE"),
        (["score", "/nonexistent/trials.jsonl"], "/nonexistent/trials.jsonl: no such file"),
        (["compare", BIMODAL, "/nonexistent.csv"], "/nonexistent.csv: no such file"),
        (["power", "--mean-rate", "0.9", "--diff", "0.2"], "--diff 0.2 must keep the mean rate"),
        (["score", BIMODAL, "--seed", "-1"], "argument --seed: must be between 0 and 4294967295"),
        (["compare", BIMODAL, BIMODAL, "--seed", "-1"], "argument --seed: must be between 0"),
        (
            ["score", BIMODAL, "--resamples", "1000000000000"],
            "--resamples: must be at most 1000000",
        ),
        (["score", BIMODAL, "--plot", "/tmp"], "--plot: '/tmp' is a directory"),
        (["score", BIMODAL, "--plot", "curve"], "--plot: 'curve': expected a file name ending in"),
        (["score", BIMODAL, "--plot", "/tmp.png/"], "--plot: '/tmp.png/'"),
        (["power", "--mean-rate", "0.5", "--diff", "0.1", "--task-sd", "inf"], "finite number"),
        (["power", "--mean-rate", "0.5", "--diff", "0.1", "--task-sd", "nan"], "finite number"),
        (["power", "--mean-rate", "0.5", "--diff", "0.1", "--task-sd", "2"], "between 0 and 1"),
        (["power", "--mean-rate", "0.5", "--diff", "1e-300"], "--diff 1e-300 is too small"),
        (["power", "--mean-rate", "nan", "--diff", "0.1"], "--mean-rate: expected a finite"),
        (["power", "--diff", "0.1"], "one of the arguments --pilot --mean-rate is required"),
        (["power", "--mean-rate", "0.5", "--diff", "0.1", "--alpha", "2"], "--alpha"),
        (["score", BIMODAL, "--out", "/nonexistent/dir/r.txt"], "cannot write"),
        ([], "COMMAND"),
    ],
)
def test_usage_errors_exit_2_without_traceback(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """Bad options, missing files and impossible plans exit 2 with a message, no traceback."""
    code, _, err = _run(capsys, *argv)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_compare_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`compare A B` pairs tasks; --fail-if-worse exits 1 when B's pass^k is worse."""
    good = tmp_path / "good.jsonl"
    bad = tmp_path / "bad.jsonl"
    good.write_text("".join(f'{{"task_id": "t{i}", "outcome": "pass"}}\n' for i in range(8)) * 2)
    bad.write_text("".join(f'{{"task_id": "t{i}", "outcome": "fail"}}\n' for i in range(8)) * 2)
    code, out, _ = _run(capsys, "compare", str(good), str(bad), "--k", "2", "--format", "json")
    assert code == 0
    document = json.loads(out)
    (result,) = document["by_k"]
    assert [c["change"] for c in document["changes"]] == ["regressed"] * 8
    assert result["tasks_paired"] == 8
    assert result["pass_hat_k"]["verdict"] == "worse"
    assert result["pass_hat_k"]["p_value"] == pytest.approx(2 / 256)
    code, out, _ = _run(capsys, "compare", str(good), str(bad), "--fail-if-worse")
    assert code == 1
    assert "worse" in out
    code, out, _ = _run(capsys, "compare", str(bad), str(good), "--format", "markdown")
    assert (code, "better" in out) == (0, True)


def test_power_cli(capsys: pytest.CaptureFixture[str]) -> None:
    """`power` from a pilot file or a mean rate prints tasks per trial count."""
    code, out, _ = _run(
        capsys, "power", "--pilot", BIMODAL, "--diff", "0.1", "--trials", "8", "--format", "json"
    )
    assert code == 0
    plan = json.loads(out)
    assert plan["mean_rate"] == 0.75
    assert [row["trials"] for row in plan["rows"]] == [8]
    code, out, _ = _run(capsys, "power", "--mean-rate", "0.5", "--diff", "0.1")
    assert (code, "tasks" in out) == (0, True)


def test_console_script_end_to_end() -> None:
    """The installed `passhat` script scores a file and exits 2 on a bad one."""
    script = Path(sys.executable).with_name("passhat")
    command = str(script) if script.exists() else shutil.which("passhat")
    assert command, "the passhat console script is not installed (pip install -e .)"
    done = subprocess.run(
        [command, "score", BIMODAL, "--format", "json", "--k", "3"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["pass_hat_k"] == pytest.approx(15 / 28, abs=1e-12)
    done = subprocess.run(
        [command, "score", BIMODAL, "--k", "0"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
