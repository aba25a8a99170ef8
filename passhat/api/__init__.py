"""passhat.api: the ConsistencyEval spec and status models, errors, conditions, the CRD."""

from passhat.api.errors import InputError, PasshatError, SpecError, UsageError
from passhat.api.load import load_eval, parse_eval, parse_spec, resolve_tasks
from passhat.api.spec import ConsistencyEval, EvalSpec, Task, template_safety_problems
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
