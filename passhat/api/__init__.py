"""passhat.api: the ConsistencyEval spec and status models, errors, conditions, the CRD.

The names below are imported lazily (PEP 562): building the pydantic models costs a few
tenths of a second, and `passhat trial` (in every pod) and `passhat score` need at most
`passhat.api.errors`, which must not pull the models in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from passhat import lazy_exports

if TYPE_CHECKING:
    from passhat.api.errors import InputError, PasshatError, SpecError, UsageError
    from passhat.api.load import load_eval, parse_eval, parse_spec, resolve_tasks
    from passhat.api.podsecurity import template_safety_problems
    from passhat.api.spec import ConsistencyEval, EvalSpec, Task
    from passhat.api.status import EvalStatus

__all__ = [
    "ConsistencyEval",
    "EvalSpec",
    "EvalStatus",
    "InputError",
    "PasshatError",
    "SpecError",
    "Task",
    "UsageError",
    "load_eval",
    "parse_eval",
    "parse_spec",
    "resolve_tasks",
    "template_safety_problems",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ConsistencyEval": "spec",
        "EvalSpec": "spec",
        "EvalStatus": "status",
        "InputError": "errors",
        "PasshatError": "errors",
        "SpecError": "errors",
        "Task": "spec",
        "UsageError": "errors",
        "load_eval": "load",
        "parse_eval": "load",
        "parse_spec": "load",
        "resolve_tasks": "load",
        "template_safety_problems": "podsecurity",
    },
)
