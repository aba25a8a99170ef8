"""passhat.api: the ConsistencyEval spec and status models, errors, conditions, the CRD."""

from passhat.api.errors import InputError, PasshatError, SpecError, UsageError

__all__ = ["InputError", "PasshatError", "SpecError", "UsageError"]
