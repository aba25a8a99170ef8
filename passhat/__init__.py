"""passhat: run every task of an agent eval n times and report how consistently it passes.

The package is layered (see docs/design.md); imports point down only:
stats -> api -> trials / report / metrics -> local | operator | runner -> cli.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "lazy_exports"]


def lazy_exports(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for a package whose public names load on first use (PEP 562).

    `homes` maps each lazily exported name to the submodule defining it (relative to
    `package`). Packages whose exports pull in pydantic, kopf or the report renderers use
    this, so that `passhat trial` in a pod, `passhat score` and the start of a local run do
    not pay for what they never call. A loaded name becomes a plain module global.
    NB: never give a lazy name the name of a submodule: importing the submodule would set
    the package attribute to the module and hide the name.
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(homes))

    return __getattr__, __dir__
