"""Kubernetes resource quantities ("500m", "2Gi", "1e3") as numbers.

The same spec runs locally and on a cluster, so the local executor must read `requests`
and `limits` exactly as the kubelet does: it needs cores and bytes, not strings.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

__all__ = ["MAX_QUANTITY", "parse_cpu", "parse_memory", "parse_quantity"]

# The largest quantity accepted: far above any node's cores or bytes (8 EiB), and what
# an int64 (the kubelet's, and a cgroup's limits) holds.
MAX_QUANTITY = Decimal(2**63 - 1)

_SUFFIXES: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<exponent>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$"
)


def parse_quantity(quantity: str | int | float) -> Decimal:
    """The value of a non-negative Kubernetes quantity; ValueError when it is not one."""
    if isinstance(quantity, bool) or not isinstance(quantity, str | int | float):
        raise ValueError(f"{quantity!r} is not a quantity (expected e.g. 500m, 2Gi)")
    try:
        text = str(quantity).strip()
    except ValueError:  # NB: an int of more than 4300 digits
        raise ValueError("is too large to be a quantity") from None
    shown = text if len(text) <= 40 else f"{text[:37]}..."
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f'"{shown}" is not a valid quantity (expected e.g. 500m, 2Gi)')
    exponent = match["exponent"]
    if exponent and len(exponent) > 8:  # NB: e+999999 and beyond overflow any context
        raise ValueError(f'"{shown}" is too large (at most {MAX_QUANTITY})')
    try:
        value = Decimal(match["number"])
        if exponent:
            value = value.scaleb(int(exponent[1:]))
        else:
            value *= _SUFFIXES[match["suffix"] or ""]
    except (ArithmeticError, ValueError) as err:
        raise ValueError(f'"{shown}" is not a valid quantity') from err
    if value < 0:
        raise ValueError(f'"{shown}" is negative')
    if not value.is_finite() or value > MAX_QUANTITY:
        raise ValueError(f'"{shown}" is too large (at most {MAX_QUANTITY})')
    return value


def parse_cpu(quantity: str | int | float) -> float:
    """CPU quantity in cores ("500m" -> 0.5)."""
    return float(parse_quantity(quantity))


def parse_memory(quantity: str | int | float) -> int:
    """Memory quantity in bytes, rounded up as the kubelet does ("1Gi" -> 1073741824)."""
    return math.ceil(parse_quantity(quantity))
