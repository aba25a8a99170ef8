"""A new user's mistakes on the command line: each names what was wrong and where to look."""

from __future__ import annotations

import pytest

from passhat.cli import main


def test_unknown_flag_of_a_subcommand_points_at_its_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`passhat run eval.yaml --bogus` names the flag and `passhat run --help` (its flags are
    there, not in `passhat --help`); exit 2."""
    assert main(["run", "eval.yaml", "--bogus"]) == 2
    err = capsys.readouterr().err
    assert err == "passhat run: error: unrecognized arguments: --bogus (see passhat run --help)\n"


def test_unknown_top_level_flag_points_at_the_top_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--bogus"]) == 2
    assert capsys.readouterr().err.endswith(
        "unrecognized arguments: --bogus (see passhat --help)\n"
    )


def test_missing_flag_value_names_the_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", "trials.jsonl", "--k"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("passhat score: error: argument --k") and "passhat score --help" in err


def test_run_help_lists_every_exit_code_of_the_docs(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/scoring.md's exit-code table has 0, 1, 2, 3 and 130 for `passhat run`; its
    --help said nothing of 3 (deadline or budget without a gate)."""
    assert main(["run", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for code in ("Exit 0 done", "1 gate failed", "2 bad spec", "3 not finished", "130 interr"):
        assert code in text
    assert "spec.activeDeadlineSeconds" in text and "spec.budget" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--mean-rate", "0.75", "--diff", "2"], "--diff 2.0 must keep the mean rate 0.750"),
        (["--mean-rate", "1.5", "--diff", "0.1"], "--mean-rate 1.5 must be between 0 and 1"),
        (["--mean-rate", "0.5", "--diff", "0.1", "--task-sd", "3"], "--task-sd 3.0 must be"),
    ],
)
def test_power_errors_name_the_flag(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """passhat.stats.power says `diff=2.0`; the user typed `--diff 2`."""
    assert main(["power", *argv]) == 2
    assert capsys.readouterr().err.startswith(f"passhat: error: {message}")


@pytest.mark.parametrize(
    "command", ["run", "score", "compare", "history", "power", "regrade", "trials", "report"]
)
def test_every_option_of_a_subcommand_says_what_it_does(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """No bare `--format {text,json}` line in a subcommand's --help (compare, history and
    regrade had one)."""
    from passhat.cli import _subcommand_parser, build_parser

    sub = _subcommand_parser(build_parser(), command)
    assert sub is not None
    bare = [
        action.option_strings
        for action in sub._actions
        if action.option_strings and not action.help
    ]
    assert bare == []
