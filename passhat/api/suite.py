"""Which suite an eval is a run of: `spec.suite`, else the `passhat.dev/suite` label.

A suite is the evals that share a name: the nightly regression set run again and again.
The name lives in the spec (`spec.suite`, validated like a label value) for those who
write the eval, or in a label for tooling that only stamps labels (Kustomize's
`commonLabels`, an Argo workflow's template); when both are set `spec.suite` wins, as a
spec field is the more deliberate statement. Everything that asks (the operator's status
and metrics, `passhat run`'s run directory, `passhat history`) asks `suite_of`. Light on
purpose (no pydantic): the CLI imports it at start.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["SUITE_LABEL", "SUITE_PATTERN", "is_suite_name", "suite_of"]

SUITE_LABEL = "passhat.dev/suite"
# A suite's name is a label value (the passhat.dev/suite label and the metrics' suite label).
SUITE_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
_SUITE = re.compile(SUITE_PATTERN)


def is_suite_name(text: str) -> bool:
    """Whether `text` may name a suite (a label value of 1 to 63 characters)."""
    return 0 < len(text) <= 63 and _SUITE.fullmatch(text) is not None


def suite_of(document: Mapping[str, Any]) -> str | None:
    """The suite of an eval document (a dict with `metadata` and `spec`, as the API server
    returns it or a spec.yaml holds it); None when it names none or a malformed one."""
    spec = document.get("spec")
    named = spec.get("suite") if isinstance(spec, Mapping) else None
    if isinstance(named, str) and is_suite_name(named):
        return named
    metadata = document.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    label = labels.get(SUITE_LABEL) if isinstance(labels, Mapping) else None
    return label if isinstance(label, str) and is_suite_name(label) else None
