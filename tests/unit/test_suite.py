"""Which suite an eval is a run of: spec.suite wins over the passhat.dev/suite label."""

from __future__ import annotations

import pytest

from passhat.api.errors import SpecError
from passhat.api.load import parse_eval
from passhat.api.suite import SUITE_LABEL, is_suite_name, suite_of

EVAL = """\
apiVersion: passhat.dev/v1alpha1
kind: ConsistencyEval
metadata:
  name: e
spec:
  suite: {suite}
  tasks: [{{id: a}}]
  trials: 1
  trial:
    template:
      spec:
        containers: [{{name: agent, image: x, command: ["true"]}}]
"""


def test_spec_suite_wins_over_the_label() -> None:
    """Both set: spec.suite; only the label: the label; a malformed one: none."""
    labels = {"metadata": {"labels": {SUITE_LABEL: "from-label"}}}
    assert suite_of({**labels, "spec": {"suite": "from-spec"}}) == "from-spec"
    assert suite_of({**labels, "spec": {}}) == "from-label"
    assert suite_of({"metadata": {"labels": {SUITE_LABEL: "-bad-"}}, "spec": {}}) is None
    assert suite_of({}) is None
    assert is_suite_name("nightly.v2_x") and not is_suite_name("a" * 64)


def test_spec_suite_is_validated_as_a_label_value() -> None:
    """`suite: "no spaces"` is a SpecError naming spec.suite and its line."""
    assert parse_eval(EVAL.format(suite="nightly"), "eval.yaml").spec.suite == "nightly"
    with pytest.raises(SpecError, match=r"eval\.yaml:6: spec\.suite: .*pattern"):
        parse_eval(EVAL.format(suite='"no spaces"'), "eval.yaml")
