"""YAML values reach trials as `kubectl apply` would send them (JSON-compatible)."""

from __future__ import annotations

import json

from passhat.api import parse_eval, parse_spec, resolve_tasks

EVAL = """\
apiVersion: passhat.dev/v1alpha1
kind: ConsistencyEval
metadata: {name: dates}
spec:
  tasks:
    - id: t
      params: {day: 2024-01-01, at: 2024-01-01T10:00:00Z, n: 3, ok: true}
  trials: 1
  trial:
    template: {spec: {containers: [{name: agent, command: ["true"]}]}}
"""


def test_dates_stay_strings() -> None:
    """YAML timestamps in params stay strings, so PASSHAT_TASK is plain JSON."""
    params = (parse_eval(EVAL, "e.yaml").spec.tasks or [])[0].params
    assert params == {"day": "2024-01-01", "at": "2024-01-01T10:00:00Z", "n": 3, "ok": True}
    assert json.loads(json.dumps(params)) == params


def test_dates_stay_strings_in_config_maps() -> None:
    """The same holds for tasks read from ConfigMap YAML."""
    spec = parse_spec(
        {
            "tasksFrom": [{"configMap": "c"}],
            "trials": 1,
            "trial": {"template": {"spec": {"containers": [{"name": "a"}]}}},
        }
    )
    (task,) = resolve_tasks(spec, {"c": {"k": "- {id: t, params: {day: 2024-01-01}}"}})
    assert task.params == {"day": "2024-01-01"}
