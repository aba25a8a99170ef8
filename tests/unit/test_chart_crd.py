"""The chart ships the same CRD as crds/, which is generated from the pydantic models.

Helm installs `charts/passhat/crds/` before anything else (and never deletes it); that file
must be a byte-for-byte copy of `crds/consistencyevals.passhat.dev.yaml`, whose own drift
test pins it to `python -m passhat.api.crd`. Refresh with:
    cp crds/consistencyevals.passhat.dev.yaml charts/passhat/crds/
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NAME = "consistencyevals.passhat.dev.yaml"


def test_chart_crd_matches_generated_crd() -> None:
    """charts/passhat/crds/ holds exactly the generated CRD and nothing else."""
    generated = (REPO / "crds" / NAME).read_text()
    shipped = REPO / "charts" / "passhat" / "crds"
    assert sorted(p.name for p in shipped.iterdir()) == [NAME]
    assert (shipped / NAME).read_text() == generated, (
        "charts/passhat/crds drifted from crds/: cp crds/" + NAME + " charts/passhat/crds/"
    )
