"""Start-up: `passhat trial` and `passhat score` import no pydantic; lazy exports still resolve."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import passhat.api
import passhat.local
import passhat.runner

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "same-mean-uniform.jsonl"


def _loaded_after(argv: list[str], tmp_path: Path) -> list[str]:
    """The heavy modules loaded after `passhat argv...` ran in a fresh interpreter."""
    code = (
        "import sys\nfrom passhat.cli import main\n"
        f"code = main({argv!r})\n"
        "heavy = ('pydantic', 'yaml', 'numpy', 'kopf', 'kubernetes', 'passhat.api.spec')\n"
        "print(code, sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=True,
    )
    return done.stderr.strip().splitlines()


def test_trial_and_score_import_no_pydantic(tmp_path: Path) -> None:
    """`passhat trial -- true` and `passhat score --format json` never build the spec models."""
    trial = ["trial", "--result", "r.json", "--transcript", "t.log", "--", "true"]
    assert _loaded_after(trial, tmp_path)[-1] == "0 []"
    score = ["score", str(EXAMPLE), "--format", "json"]
    assert _loaded_after(score, tmp_path)[-1] == "0 []"


def test_lazy_exports_resolve() -> None:
    """Every name in __all__ of the lazy packages (and runner's) resolves to the real object."""
    from passhat.local.driver import RunOptions, run

    assert sorted(passhat.local.__all__) == ["RunOptions", "run"]
    assert passhat.local.run is run and passhat.local.RunOptions is RunOptions
    for package in (passhat.api, passhat.local, passhat.runner):
        for name in package.__all__:
            value = getattr(package, name)
            assert getattr(value, "__module__", "").startswith(package.__name__ + "."), name
