"""The errors a user can cause, each rendered as the one line the CLI prints.

A user who hands passhat a bad file or a bad option must see what was wrong and where,
never a traceback; the CLI catches `PasshatError`, prints `str(err)` and exits 2.
The hierarchy:

    PasshatError            base of every user-facing error
    ├── InputError          an input file is missing, unreadable or malformed (path, line)
    ├── SpecError           a ConsistencyEval spec is invalid (path, line, field)
    └── UsageError          a command-line option is wrong
"""

from __future__ import annotations

__all__ = ["InputError", "PasshatError", "SpecError", "UsageError"]


def _where(path: str | None, line: int | None) -> str:
    if path is None:
        return ""
    return f"{path}:{line}: " if line is not None else f"{path}: "


class PasshatError(Exception):
    """Base of every error caused by user input; `str(err)` is one printable line."""


class InputError(PasshatError):
    """An input file is missing, unreadable or malformed."""

    def __init__(self, reason: str, *, path: str | None = None, line: int | None = None) -> None:
        self.reason = reason
        self.path = path
        self.line = line
        super().__init__(f"{_where(path, line)}{reason}")


class SpecError(PasshatError):
    """A ConsistencyEval spec is invalid: `path:line: field: reason` (parts may be absent)."""

    def __init__(
        self,
        reason: str,
        *,
        field: str | None = None,
        path: str | None = None,
        line: int | None = None,
    ) -> None:
        self.reason = reason
        self.field = field
        self.path = path
        self.line = line
        prefix = f"{field}: " if field else ""
        super().__init__(f"{_where(path, line)}{prefix}{reason}")


class UsageError(PasshatError):
    """A command-line option or argument is wrong."""
