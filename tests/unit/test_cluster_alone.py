"""The cluster modules that need the cluster to themselves are marked `alone`.

hack/test.sh runs every other cluster module beside the unit tiers while Kueue may still be
building; a module that needs Kueue, installs a Helm release or registers the records
APIService and is missing from tests/cluster/conftest.py's ALONE fails there, or fails the
modules beside it (docs/development.md, "How CI runs the tiers").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.conftest import ALONE

CLUSTER_TESTS = Path(__file__).resolve().parents[1] / "cluster"
# What a module's source says when it needs the cluster alone.
SIGNS = ("require_kueue", "kueue_queue(", "installed_release(", '"kind": "APIService"')


def modules() -> list[Path]:
    """The cluster tier's test modules."""
    return sorted(CLUSTER_TESTS.glob("test_*.py"))


@pytest.mark.parametrize("module", modules(), ids=lambda path: path.name)
def test_a_module_that_needs_the_cluster_alone_is_in_alone(module: Path) -> None:
    text = module.read_text()
    signs = [sign for sign in SIGNS if sign in text]
    assert not signs or module.name in ALONE, (module.name, signs)


def test_alone_names_only_existing_modules() -> None:
    assert {path.name for path in modules()} >= ALONE
