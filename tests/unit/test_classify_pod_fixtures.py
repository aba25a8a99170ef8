"""classify_pod on pods captured from a real cluster (tests/fixtures/pods, expected.yaml)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from passhat.api.spec import Grading
from passhat.trials.classify_pod import classify_pod

PODS = Path(__file__).resolve().parents[1] / "fixtures" / "pods"
EXPECTED: dict[str, dict[str, Any]] = yaml.safe_load((PODS / "expected.yaml").read_text())
# Image/config errors count after a grace period; judge every pod an hour after creation.
AGE_S = 3600.0


def test_every_fixture_has_an_expectation() -> None:
    """Each captured pod is listed in expected.yaml and each listed pod exists."""
    assert sorted(p.name for p in PODS.glob("*.json")) == sorted(EXPECTED)
    assert len(EXPECTED) >= 10


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture(name: str) -> None:
    """The captured pod classifies as the DESIGN table says."""
    pod = json.loads((PODS / name).read_text())
    created = datetime.fromisoformat(pod["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    verdict = classify_pod(
        pod, grading=Grading(), timeout_is="infra_error", now=created.timestamp() + AGE_S
    )
    expected = EXPECTED[name]
    found = None if verdict is None else {"outcome": str(verdict.outcome), "reason": verdict.reason}
    want = (
        None
        if expected["outcome"] is None
        else {"outcome": expected["outcome"], "reason": expected["reason"]}
    )
    assert found == want, expected.get("note", "")
