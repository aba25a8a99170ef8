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
    """The CRD's grading.grader has image, command (a non-empty list), and the grader pods'
    env and envFrom (at most 64 each), nothing else."""
    schema = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    grading = schema["properties"]["spec"]["properties"]["grading"]["properties"]
    grader = grading["grader"]
    assert set(grader["properties"]) == {"image", "command", "env", "envFrom"}
    assert grader["required"] == ["command"]
    assert grader["properties"]["command"]["minItems"] == 1
    assert grader["properties"]["env"]["maxItems"] == grader["properties"]["envFrom"]["maxItems"]
    assert grader["properties"]["env"]["maxItems"] == 64


CHECKED = EVAL.replace(
    "    grader: GRADER\n", "    grader: GRADER\n    stabilityCheck: CHECK\n"
).replace("GRADER", "{image: judge:1, command: [python3, judge.py]}")


def _check(check: str, eval_text: str = CHECKED) -> object:
    return parse_eval(eval_text.replace("CHECK", check), "eval.yaml").spec.grading.stability_check


def test_stability_check_defaults_and_bounds() -> None:
    """{sample, times, maxNoiseRate} parse with defaults for all but maxNoiseRate."""
    check = _check("{maxNoiseRate: 0.05}")
    assert check is not None
    assert (check.sample, check.times, check.max_noise_rate) == (20, 3, 0.05)  # type: ignore[attr-defined]
    assert (check.seed, check.timeout_seconds) == (0, 300)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("check", "field"),
    [
        ("{}", "spec.grading.stabilityCheck.maxNoiseRate"),
        ("{maxNoiseRate: 1.5}", "spec.grading.stabilityCheck.maxNoiseRate"),
        ("{maxNoiseRate: -0.1}", "spec.grading.stabilityCheck.maxNoiseRate"),
        ("{maxNoiseRate: 0.1, sample: 0}", "spec.grading.stabilityCheck.sample"),
        ("{maxNoiseRate: 0.1, sample: 201}", "spec.grading.stabilityCheck.sample"),
        ("{maxNoiseRate: 0.1, times: 1}", "spec.grading.stabilityCheck.times"),
        ("{maxNoiseRate: 0.1, times: 11}", "spec.grading.stabilityCheck.times"),
        ("{maxNoiseRate: 0.1, timeoutSeconds: 0}", "spec.grading.stabilityCheck.timeoutSeconds"),
        ("{maxNoiseRate: 0.1, timeoutSeconds: 3601}", "spec.grading.stabilityCheck.timeoutSeconds"),
    ],
)
def test_bad_stability_checks_name_the_field(check: str, field: str) -> None:
    """Out-of-bounds sample, times, maxNoiseRate or timeout is a SpecError there."""
    with pytest.raises(SpecError) as caught:
        _check(check)
    assert field in str(caught.value)


@pytest.mark.parametrize("grader", ["", "    grader: {command: [./judge.sh]}\n"])
def test_a_stability_check_needs_a_grader_with_an_image(grader: str) -> None:
    """No grader, or one without an image, cannot run the check: a SpecError naming it
    (the CRD has the same rule in CEL)."""
    text = EVAL.replace(
        "    grader: GRADER\n", grader + "    stabilityCheck: {maxNoiseRate: 0.1}\n"
    )
    with pytest.raises(SpecError) as caught:
        parse_eval(text, "eval.yaml")
    assert "spec.grading.stabilityCheck" in str(caught.value)
    assert "needs spec.grading.grader with an image" in str(caught.value)
    rules = [
        r["rule"]
        for r in build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
            "spec"
        ]["x-kubernetes-validations"]
    ]
    assert any("stabilityCheck" in rule and "grader.image" in rule for rule in rules)
