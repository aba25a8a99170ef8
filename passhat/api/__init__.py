"""passhat.api: the ConsistencyEval spec and status models, errors, conditions, the CRD.

The names below are imported lazily (PEP 562): building the pydantic models costs a few
tenths of a second, and `passhat trial` (in every pod) and `passhat score` need at most
`passhat.api.errors`, which must not pull the models in.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# public name -> the submodule that defines it
_MODULES = {
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
    "template_safety_problems": "spec",
}


def __getattr__(name: str) -> Any:
    """Import a public name from its submodule on first use (then it is a module global)."""
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's globals and the lazily imported public names."""
    return sorted(set(globals()) | set(__all__))
