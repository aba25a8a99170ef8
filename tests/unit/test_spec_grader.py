"""spec.grading.grader: the eval's grader for regrading, in the models and the CRD."""

from __future__ import annotations

import pytest

from passhat.api.crd import build_crd
from passhat.api.errors import SpecError
from passhat.api.load import parse_eval
from passhat.api.spec import GraderSpec

EVAL = """\
apiVersion: passhat.dev/v1alpha1
kind: ConsistencyEval
metadata: {name: ev}
spec:
  tasks: [{id: a}]
  trials: 2
  trial:
    template: {spec: {containers: [{name: t, image: busybox, command: ["true"]}]}}
  grading:
    grader: GRADER
"""


def _parse(grader: str) -> GraderSpec | None:
    return parse_eval(EVAL.replace("GRADER", grader), "eval.yaml").spec.grading.grader


def test_image_and_command_are_read() -> None:
    """{image, command} parse; the image is optional (a local regrade needs none)."""
    grader = _parse("{image: judge:1, command: [python3, judge.py]}")
    assert grader is not None
    assert (grader.image, grader.command) == ("judge:1", ["python3", "judge.py"])
    local = _parse("{command: [./judge.sh]}")
    assert local is not None and local.image is None


@pytest.mark.parametrize(
    ("grader", "field"),
    [
        ("{image: judge:1}", "spec.grading.grader.command"),
        ("{command: []}", "spec.grading.grader.command"),
        ("{command: ['']}", "spec.grading.grader.command[0]"),
        ("{command: [x], args: [y]}", "spec.grading.grader.args"),
    ],
)
def test_bad_graders_name_the_field(grader: str, field: str) -> None:
    """A missing or empty command, an empty item or an unknown key is a SpecError there."""
    with pytest.raises(SpecError) as caught:
        _parse(grader)
    assert field in str(caught.value)


def test_the_crd_admits_the_same_fields() -> None:
    """The CRD's grading.grader has image and command (a non-empty list), nothing else."""
    schema = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    grading = schema["properties"]["spec"]["properties"]["grading"]["properties"]
    grader = grading["grader"]
    assert set(grader["properties"]) == {"image", "command"}
    assert grader["required"] == ["command"]
    assert grader["properties"]["command"]["minItems"] == 1
