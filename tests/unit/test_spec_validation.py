"""EvalSpec validation: each rule refuses a bad spec with the field path and the reason."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from passhat.api import EvalSpec, SpecError, parse_spec
from passhat.api.spec import ConsistencyEval, ExitCodes, format_path, spec_problems

BASE: dict[str, Any] = {
    "tasks": [{"id": "a", "params": {"x": 1}}, {"id": "b"}],
    "trials": 8,
    "ks": [1, 3, 8],
    "trial": {"template": {"spec": {"containers": [{"name": "agent", "command": ["true"]}]}}},
}


def spec_with(**changes: Any) -> dict[str, Any]:
    spec = copy.deepcopy(BASE)
    for key, value in changes.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    return spec


def problem(spec: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as info:
        parse_spec(spec)
    return str(info.value)


def test_defaults() -> None:
    """A minimal spec gets the documented defaults."""
    spec = parse_spec(spec_with(ks=None))
    assert spec.report_ks == [1, 3, 8]
    assert spec.parallelism == 1
    assert spec.trial.timeout_seconds == 3600
    assert spec.trial.timeout_is == "infra_error"
    assert spec.grading.exit_codes == ExitCodes(pass_=[0], fail=[1], infra_error=[75])
    assert (spec.retry.infra_errors, spec.retry.backoff_seconds) == (3, 10.0)
    assert spec.retry.max_backoff_seconds == 300.0
    assert spec.gate is None
    assert spec.main_container["name"] == "agent"


def test_default_ks_are_capped_at_trials() -> None:
    """Without ks, a 2-trial eval reports k = 1 and 2."""
    assert parse_spec(spec_with(ks=None, trials=2)).report_ks == [1, 2]


def test_dump_by_alias_round_trips() -> None:
    """The model's JSON by alias is the CRD spec and parses back to the same model."""
    spec = parse_spec(spec_with(gate={"metric": "passHatK", "k": 3, "min": 0.9}))
    dumped = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert dumped["grading"]["exitCodes"] == {"pass": [0], "fail": [1], "infraError": [75]}
    assert dumped["trial"]["timeoutSeconds"] == 3600
    assert parse_spec(dumped) == spec


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"ks": [1, 9]}, "spec.ks[1]: k=9 is larger than trials=8"),
        ({"ks": [1, 0]}, "spec.ks[1]: should be greater than or equal to 1 (got 0)"),
        ({"ks": [3, 3]}, "spec.ks[1]: k=3 is listed twice"),
        ({"ks": []}, "spec.ks: should have at least 1 item, not 0"),
        ({"trials": 0, "ks": None}, "spec.trials: should be greater than or equal to 1 (got 0)"),
        ({"parallelism": 0}, "spec.parallelism: should be greater than or equal to 1 (got 0)"),
        (
            {"tasks": [{"id": "x"}, {"id": "y"}, {"id": "z"}, {"id": "x"}]},
            'spec.tasks[3].id: duplicate task id "x"',
        ),
        ({"tasks": None}, "spec: give exactly one of tasks and tasksFrom"),
        ({"tasksFrom": [{"configMap": "suite"}]}, "spec: give exactly one of tasks and tasksFrom"),
        ({"tasks": []}, "spec.tasks: should have at least 1 item, not 0"),
        ({"tasks": [{"id": ""}]}, "spec.tasks[0].id: should have at least 1 character (got '')"),
        ({"tasks": [{"id": "a", "param": {}}]}, "spec.tasks[0].param: unknown field"),
        ({"trails": 3}, "spec.trails: unknown field"),
        ({"trials": None, "trails": 3}, 'spec.trails: unknown field (did you mean "trials"?)'),
        (
            {"trial": {"timeoutSeconds": 0, "template": BASE["trial"]["template"]}},
            "spec.trial.timeoutSeconds: should be greater than or equal to 1 (got 0)",
        ),
        (
            {"trial": {"template": BASE["trial"]["template"], "timeoutIs": "pass"}},
            "spec.trial.timeoutIs: should be 'infra_error' or 'fail' (got 'pass')",
        ),
        (
            {"gate": {"metric": "passHatK", "k": 9, "min": 0.9}},
            "spec.gate.k: k=9 is larger than trials=8",
        ),
        (
            {"gate": {"metric": "passHatK", "k": 2, "min": 1.5}},
            "spec.gate.min: should be less than or equal to 1 (got 1.5)",
        ),
        (
            {"gate": {"metric": "pass^k", "k": 2, "min": 0.5}},
            "spec.gate.metric: should be 'passHatK', 'passAtK' or 'meanPassRate' (got 'pass^k')",
        ),
        (
            {"grading": {"exitCodes": {"pass": [0], "fail": [1, 0]}}},
            "spec.grading.exitCodes.fail[1]: exit code 0 is listed in both pass and fail",
        ),
        (
            {"grading": {"exitCodes": {"infraError": [75, 75]}}},
            "spec.grading.exitCodes.infraError[1]: exit code 75 is listed twice",
        ),
        (
            {"grading": {"exitCodes": {"fail": [256]}}},
            "spec.grading.exitCodes.fail[0]: should be less than or equal to 255 (got 256)",
        ),
        (
            {"retry": {"infraErrors": -1}},
            "spec.retry.infraErrors: should be greater than or equal to 0 (got -1)",
        ),
        ({"retry": {"infra_errors": 1}}, "spec.retry.infra_errors: unknown field"),
        ({"parallelism": True}, "spec.parallelism: should be a valid integer"),
        ({"trials": 8.0}, "spec.trials: should be a valid integer (got 8.0)"),
        (
            {"retry": {"backoffSeconds": "10"}},
            "spec.retry.backoffSeconds: should be a valid number (got '10')",
        ),
        (
            {"tasks": None, "tasksFrom": [{"configMap": "../x"}]},
            "spec.tasksFrom[0].configMap: should match pattern "
            "'^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$' (got '../x')",
        ),
        (
            {"tasks": None, "tasksFrom": [{"configMap": "/etc"}]},
            "spec.tasksFrom[0].configMap: should match pattern "
            "'^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$' (got '/etc')",
        ),
    ],
)
def test_bad_spec_names_field_and_reason(changes: dict[str, Any], message: str) -> None:
    """Each invalid spec raises SpecError whose line is `field: reason`."""
    assert problem(spec_with(**changes)) == message


def test_floats_given_as_ints_still_fill_float_fields() -> None:
    spec = parse_spec({**BASE, "retry": {"backoffSeconds": 5, "maxBackoffSeconds": 60}})
    assert spec.retry.backoff_seconds == 5.0


def test_gate_k_need_not_be_in_ks() -> None:
    """gate.k may be any k up to trials, listed in ks or not."""
    spec = parse_spec(spec_with(gate={"metric": "passAtK", "k": 5, "min": 0.5}))
    assert spec.gate is not None and spec.gate.k == 5


def test_snake_case_is_refused_in_documents_but_accepted_in_python() -> None:
    """Documents use the CRD's camelCase names; Python code may use field names."""
    assert "unknown field" in problem(spec_with(tasks_from=[{"configMap": "x"}], tasks=None))
    built = EvalSpec.model_validate(
        {"trials": 2, "tasks": [{"id": "a"}], "trial": {"timeout_seconds": 5, **BASE["trial"]}}
    )
    assert built.trial.timeout_seconds == 5


def test_full_resource_keeps_api_server_metadata() -> None:
    """A resource read back from the API server (uid, resourceVersion, ...) still parses."""
    body = {
        "apiVersion": "passhat.dev/v1alpha1",
        "kind": "ConsistencyEval",
        "metadata": {"name": "e", "namespace": "ns", "uid": "u-1", "generation": 2},
        "spec": BASE,
    }
    assert ConsistencyEval.model_validate(body).metadata.namespace == "ns"


def test_spec_problems_lists_every_problem() -> None:
    """spec_problems gives every problem of a ValidationError with its absolute path."""
    with pytest.raises(ValidationError) as info:
        EvalSpec.model_validate(spec_with(parallelism=0, extra=1), by_name=False)
    found = [(format_path(path), reason) for path, reason in spec_problems(info.value, ("spec",))]
    assert found[0] == ("spec.extra", "unknown field")
    assert ("spec.parallelism", "should be greater than or equal to 1 (got 0)") in found
