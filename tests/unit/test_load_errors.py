"""load_eval reports a bad eval file as `file:line: field: reason`, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from passhat.api import InputError, SpecError, load_eval, parse_eval

GOOD = """\
apiVersion: passhat.dev/v1alpha1
kind: ConsistencyEval
metadata: {name: refunds-regression}
spec:
  tasks:
    - id: refund-over-limit
      params: {order: "A-113"}
    - id: refund-under-limit
  trials: 8
  ks: [1, 3, 8]
  parallelism: 16
  trial:
    timeoutSeconds: 1800
    template:
      spec:
        containers:
          - name: agent
            image: ghcr.io/acme/refund-agent-eval:1.4
            command: [python, -m, evals.run_task]
            resources:
              requests: {cpu: "1", memory: 2Gi}
              limits:   {memory: 4Gi}
  grading:
    exitCodes: {pass: [0], fail: [1], infraError: [75]}
  retry: {infraErrors: 3, backoffSeconds: 10}
  gate: {metric: passHatK, k: 3, min: 0.95}
"""


def test_good_file_loads(tmp_path: Path) -> None:
    """The DESIGN sketch is a valid eval."""
    path = tmp_path / "eval.yaml"
    path.write_text(GOOD)
    ev = load_eval(path)
    assert ev.metadata.name == "refunds-regression"
    assert [t.id for t in ev.spec.tasks or []] == ["refund-over-limit", "refund-under-limit"]
    assert ev.spec.tasks is not None and ev.spec.tasks[0].params == {"order": "A-113"}
    assert ev.spec.gate is not None and ev.spec.gate.metric == "passHatK"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("ks: [1, 3, 8]", "ks: [1, 9]", "eval.yaml:10: spec.ks[1]: k=9 is larger than trials=8"),
        (
            "ks: [1, 3, 8]",
            "ks:\n    - 1\n    - 9",
            "eval.yaml:12: spec.ks[1]: k=9 is larger than trials=8",
        ),
        (
            "  trials: 8",
            "  trails: 8",
            'eval.yaml:9: spec.trails: unknown field (did you mean "trials"?)',
        ),
        (
            "- id: refund-under-limit",
            "- id: refund-over-limit",
            'eval.yaml:8: spec.tasks[1].id: duplicate task id "refund-over-limit"',
        ),
        (
            "{memory: 4Gi}",
            "{memory: 4Gx}",
            "eval.yaml:22: spec.trial.template.spec.containers[0].resources.limits.memory: "
            '"4Gx" is not a valid quantity (expected e.g. 500m, 2Gi)',
        ),
        (
            "- name: agent",
            "- nme: agent",
            "eval.yaml:17: spec.trial.template.spec.containers[0].name: "
            "every container needs a name",
        ),
        ("k: 3,", "k: 30,", "eval.yaml:26: spec.gate.k: k=30 is larger than trials=8"),
        (
            "timeoutSeconds: 1800",
            "timeoutSeconds: soon",
            "eval.yaml:13: spec.trial.timeoutSeconds: should be a valid integer (got 'soon')",
        ),
        (
            "kind: ConsistencyEval",
            "kind: Job",
            "eval.yaml:2: kind: should be 'ConsistencyEval' (got 'Job')",
        ),
        (
            "metadata: {name: refunds-regression}",
            "metadata: {name: Refunds}",
            "eval.yaml:3: metadata.name: should match pattern "
            "'^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$' (got 'Refunds')",
        ),
        (
            "  parallelism: 16",
            "  parallelism: 16\n  parallelism: 3",
            'eval.yaml:12: spec: duplicate key "parallelism"',
        ),
        (
            "ks: [1, 3, 8]",
            "ks: [1, 3",
            "eval.yaml:11: invalid YAML: expected ',' or ']', but got ':'",
        ),
        ("  trial:\n", "  trial:\n\t\n", None),
        # what `kubectl apply` refuses (the CRD's types) is refused locally too
        ("trials: 8", "trials: true", "eval.yaml:9: spec.trials: should be a valid integer"),
        (
            "trials: 8",
            'trials: "8"',
            "eval.yaml:9: spec.trials: should be a valid integer (got '8')",
        ),
        (
            "min: 0.95",
            'min: "0.95"',
            "eval.yaml:26: spec.gate.min: should be a valid number (got '0.95')",
        ),
        (
            "trials: 8",
            "trials: " + "9" * 5000,
            "eval.yaml:9: spec.trials: invalid YAML: integer with more than 4300 digits",
        ),
        (
            "timeoutSeconds: 1800",
            "timeoutSeconds: " + "9" * 400,
            "eval.yaml:13: spec.trial.timeoutSeconds: should be less than or equal to "
            "2147483647 (got a very large integer)",
        ),
        (
            "command: [python, -m, evals.run_task]",
            "command: [sh, -c, true]",
            "eval.yaml:19: spec.trial.template.spec.containers[0].command[2]: "
            "must be a string (got the boolean true; quote it)",
        ),
        (
            "command: [python, -m, evals.run_task]",
            "command: [python]\n            env: [{name: '', value: x}]",
            "eval.yaml:20: spec.trial.template.spec.containers[0].env[0].name: "
            "must be a non-empty string",
        ),
        (
            "command: [python, -m, evals.run_task]",
            "command: [python]\n            env: [{name: N, value: 3}]",
            "eval.yaml:20: spec.trial.template.spec.containers[0].env[0].value: "
            "must be a string (got a number; quote it)",
        ),
        (
            "command: [python, -m, evals.run_task]",
            "command: [python]\n            args: [1]",
            "eval.yaml:20: spec.trial.template.spec.containers[0].args[0]: "
            "must be a string (got a number; quote it)",
        ),
    ],
)
def test_bad_file_gives_file_line_field_reason(old: str, new: str, message: str | None) -> None:
    """Each mistake is reported on the line where it is, with the field path."""
    text = GOOD.replace(old, new)
    assert text != GOOD
    with pytest.raises(SpecError) as info:
        parse_eval(text, "eval.yaml")
    if message is not None:
        assert str(info.value) == message
    assert str(info.value).startswith("eval.yaml:")
    assert "\n" not in str(info.value)


def test_error_carries_parts() -> None:
    """SpecError exposes path, line and field for callers that want them."""
    with pytest.raises(SpecError) as info:
        parse_eval(GOOD.replace("ks: [1, 3, 8]", "ks: [1, 9]"), "e.yaml")
    assert (info.value.path, info.value.line, info.value.field) == ("e.yaml", 10, "spec.ks[1]")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "eval.yaml: empty file, expected a ConsistencyEval"),
        (
            "- 1\n- 2\n",
            "eval.yaml:1: expected a ConsistencyEval object (apiVersion, kind, metadata, spec)",
        ),
        (GOOD + "---\n" + GOOD, "eval.yaml:28: expected one YAML document, found several"),
        ("apiVersion: passhat.dev/v1alpha1\n", "eval.yaml:1: kind: required field is missing"),
    ],
)
def test_not_an_eval(text: str, message: str) -> None:
    """Empty, non-object and multi-document files are refused with a line."""
    with pytest.raises(SpecError) as info:
        parse_eval(text, "eval.yaml")
    assert str(info.value) == message


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    """A file that does not exist is an InputError naming it."""
    with pytest.raises(InputError) as info:
        load_eval(tmp_path / "nope.yaml")
    assert str(info.value) == f"{tmp_path / 'nope.yaml'}: no such file"


def test_directory_and_binary_are_input_errors(tmp_path: Path) -> None:
    """A directory or a non-UTF-8 file is an InputError, not a traceback."""
    with pytest.raises(InputError, match="is a directory"):
        load_eval(tmp_path)
    binary = tmp_path / "eval.yaml"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(InputError, match="not UTF-8"):
        load_eval(binary)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(alphabet=st.sampled_from(list("abk: -[]{}!&*?|>'\"#\n\t0123456789.")), max_size=80))
def test_any_text_gives_an_eval_or_a_spec_error(text: str) -> None:
    """Whatever the file holds, the result is an eval or a one-line SpecError, never a crash."""
    try:
        parse_eval(text, "e.yaml")
    except SpecError as err:
        assert "\n" not in str(err)


@pytest.mark.parametrize(
    "text", ["!foo bar", "a: !!binary xx", "a: !!python/name:os.system x", "? [a]\n: 1", "[" * 2000]
)
def test_yaml_that_composes_but_does_not_construct(text: str) -> None:
    """Unknown tags, bad binary, unhashable keys, deep nesting are SpecErrors."""
    with pytest.raises(SpecError, match="invalid YAML"):
        parse_eval(text, "e.yaml")
