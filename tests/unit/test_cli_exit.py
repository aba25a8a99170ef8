"""The `passhat` command's fast exit (`cli.console_main`): same output, same exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "same-mean-uniform.jsonl"


def _passhat(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "passhat", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_output_is_flushed_and_code_kept() -> None:
    """stdout written before the hard exit arrives whole; exit 0."""
    done = _passhat("score", str(EXAMPLE), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["k"] == 1


def test_user_error_exit_code_and_message() -> None:
    """A user error still exits 2 with its one-line message on stderr."""
    done = _passhat("score", "/nonexistent/trials.jsonl")
    assert done.returncode == 2
    assert done.stderr.startswith("passhat: error:") and "/nonexistent/trials.jsonl" in done.stderr


def test_atexit_handlers_still_run(tmp_path: Path) -> None:
    """What a normal exit runs with a visible effect (atexit handlers) still runs."""
    marker = tmp_path / "ran"
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(marker)!r}, 'w').close())\n"
        "sys.argv = ['passhat', '--version']\n"
        "from passhat.cli import console_main\n"
        "console_main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.startswith("passhat ")
    assert marker.exists()
