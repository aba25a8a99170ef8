"""Kubernetes quantities parse as the kubelet reads them."""

from __future__ import annotations

from decimal import Decimal

import pytest

from passhat.api.quantity import MAX_QUANTITY, parse_cpu, parse_memory, parse_quantity


@pytest.mark.parametrize(
    ("text", "cores"),
    [("500m", 0.5), ("1", 1.0), ("2.5", 2.5), (2, 2.0), ("100m", 0.1)],
)
def test_cpu_in_cores(text: str | int, cores: float) -> None:
    """CPU quantities come out in cores."""
    assert parse_cpu(text) == pytest.approx(cores)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1Gi", 2**30),
        ("4Gi", 4 * 2**30),
        ("512Mi", 512 * 2**20),
        ("1G", 10**9),
        ("100M", 10**8),
        ("1k", 1000),
        ("1Ki", 1024),
        ("0.5Ki", 512),
        ("1e3", 1000),
        ("1E", 10**18),
        (1000, 1000),
        ("1.5", 2),
        ("1m", 1),
    ],
)
def test_memory_in_bytes_rounded_up(text: str | int, size: int) -> None:
    """Memory quantities come out in whole bytes, fractions rounded up."""
    assert parse_memory(text) == size


@pytest.mark.parametrize("text", ["", "x", "1Gx", "1 Gi", "Gi", "-1", "1.2.3", "0x10", True, None])
def test_invalid_quantities_are_refused(text: object) -> None:
    """Anything that is not a non-negative quantity raises ValueError with the text in it."""
    with pytest.raises(ValueError, match=r"quantity|negative"):
        parse_quantity(text)  # type: ignore[arg-type]


def test_exponent_and_suffix_are_exact() -> None:
    """Parsing is exact decimal arithmetic, not float."""
    assert parse_quantity("1.1k") == Decimal(1100)
    assert parse_quantity("3m") == Decimal("0.003")


@pytest.mark.parametrize(
    "text",
    ["1e400", "1e999999999999", "8Ei", "9" * 5000, 1e308, pytest.param(10**5000, id="int5000")],
)
def test_absurdly_large_quantities_are_refused(text: object) -> None:
    """1e400 bytes reached the local capacity check as an OverflowError."""
    with pytest.raises(ValueError, match="too large") as info:
        parse_quantity(text)  # type: ignore[arg-type]
    assert len(str(info.value)) < 120


def test_largest_quantity_is_int64() -> None:
    assert parse_quantity("7Ei") < MAX_QUANTITY == 2**63 - 1
