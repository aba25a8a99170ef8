"""`kubectl passhat`: the plugin executable the package installs, and its argument handling."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from passhat.kubectl_plugin import PROG, _context_kubeconfig, _move_leading_flags, plugin_main

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_installs_kubectl_passhat() -> None:
    """pyproject names a `kubectl-passhat` console script that exists (krew-style naming:
    kubectl finds `kubectl-passhat` on PATH for `kubectl passhat`)."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["kubectl-passhat"].partition(":")
    assert (module, function) == ("passhat.kubectl_plugin", "plugin_console_main")
    imported = __import__(module, fromlist=[function])
    assert callable(getattr(imported, function))


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["report", "e"], ["report", "e"]),
        (["-n", "evals", "report", "e"], ["report", "-n", "evals", "e"]),
        (["--namespace=evals", "trials", "e"], ["trials", "--namespace=evals", "e"]),
        (
            ["--kubeconfig", "k", "-n", "x", "report", "e", "--format", "html"],
            ["report", "--kubeconfig", "k", "-n", "x", "e", "--format", "html"],
        ),
        (["-n"], ["-n"]),
        ([], []),
    ],
)
def test_kubectl_flags_before_the_subcommand_move_after_it(
    argv: list[str], expected: list[str]
) -> None:
    """`kubectl passhat -n NS report NAME` works as `kubectl get -n NS ...` users type it."""
    assert _move_leading_flags(argv) == expected


def test_only_cluster_commands_and_kubectl_names(capsys: pytest.CaptureFixture[str]) -> None:
    """The plugin offers report, trials, transcripts and regrade, named `kubectl passhat`
    in its help and errors; local commands (run, score) are not in it."""
    assert plugin_main(["--help"]) == 0
    help_text = capsys.readouterr().out
    assert help_text.startswith(f"usage: {PROG} ")
    for command in ("report", "trials", "transcripts", "regrade"):
        assert command in help_text
    listed = {line.split()[0] for line in help_text.splitlines() if line.startswith("    ")}
    assert {"report", "trials", "transcripts", "regrade"} <= listed
    assert not {"run", "score", "operator", "trial"} & listed
    assert plugin_main(["run", "x"]) == 2
    assert "kubectl passhat: error: argument COMMAND: invalid choice: 'run'" in (
        capsys.readouterr().err
    )


def test_context_becomes_a_kubeconfig_of_that_context_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--context NAME` (anywhere before `--`) is replaced by `--kubeconfig FILE` holding
    what `kubectl config view --minify --flatten --raw --context NAME` prints; the file is
    private and gone afterwards."""
    fake = tmp_path / "kubectl"
    fake.write_text('#!/bin/sh\necho "# $*"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    args = ["report", "e", "--context", "staging", "--kubeconfig", "/k", "--format", "json"]
    with _context_kubeconfig(args) as final:
        assert final[:4] == ["report", "e", "--format", "json"]
        assert final[4] == "--kubeconfig"
        written = Path(final[5])
        assert written.read_text() == (
            "# config view --raw --minify --flatten --context=staging --kubeconfig=/k\n"
        )
        assert written.stat().st_mode & 0o777 == 0o600
    assert not written.exists()
    with _context_kubeconfig(["report", "e"]) as untouched:
        assert untouched == ["report", "e"]


def test_context_without_kubectl_is_one_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No kubectl on PATH: `kubectl passhat: error: --context needs kubectl on PATH`."""
    monkeypatch.setenv("PATH", "/nonexistent")
    assert plugin_main(["--context", "x", "report", "e"]) == 2
    assert capsys.readouterr().err == (
        "kubectl passhat: error: --context needs kubectl on PATH (it reads the kubeconfig's "
        "contexts)\n"
    )
