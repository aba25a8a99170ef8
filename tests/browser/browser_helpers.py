"""Helpers of the browser tier: Debian's headless Chromium and reading its screenshots."""

from __future__ import annotations

import shutil
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

__all__ = ["FLAGS", "chromium", "hex_rgb", "mask"]

# Flags that work on this kind of machine (closed network, root, no GPU):
# /work/.library/env/machines/polyglot.md.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def chromium() -> str:
    """Chromium's path; the test fails (never skips) without it."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail(
            "chromium is not installed: hack/test.sh installs Debian's package "
            "(apt-get install -y chromium); this test must not be skipped"
        )
    return found


def hex_rgb(color: str) -> tuple[int, int, int]:
    """`#c2410c` as (194, 65, 12)."""
    return (int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16))


def mask(image: npt.NDArray[np.int16], color: tuple[int, int, int], tolerance: int) -> Any:
    """Where the screenshot's pixels are within `tolerance` of `color` (per channel)."""
    return (np.abs(image - np.array(color, dtype=np.int16)) <= tolerance).all(axis=2)
