from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gemini.core.units import GIB, KIB, MIB, TIB, format_bytes, parse_bytes


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("327374182400", 327374182400),
        ("  42  ", 42),
        ("42B", 42),
        ("1KB", 1000),
        ("1MB", 1000**2),
        ("2GB", 2 * 1000**3),
        ("1TB", 1000**4),
        ("1KiB", KIB),
        ("4MiB", 4 * MIB),
        ("4GiB", 4 * GIB),
        ("1TiB", TIB),
        ("8K", 8 * KIB),
        ("8M", 8 * MIB),
        ("8G", 8 * GIB),
        ("1T", TIB),
        ("4gib", 4 * GIB),
        ("4GIB", 4 * GIB),
        ("1.5GiB", 3 * GIB // 2),
        ("0.5 KiB", 512),
        (".5K", 512),
        ("1.25 gb", 1_250_000_000),
        ("0.3KB", 300),
    ],
)
def test_parse_bytes(text: str, expected: int) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is not a size"),
        ("GiB", "is not a size"),
        ("-1", "is not a size"),
        ("1e9", "is not a size"),
        ("4 GiB extra", "is not a size"),
        ("4XB", "unknown unit 'XB'"),
        ("1.5", "not a whole number of bytes"),
        ("0.0001KB", "whole"),
    ],
)
def test_parse_bytes_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_bytes(text)


def test_parse_bytes_error_lists_units() -> None:
    with pytest.raises(ValueError, match=r"KiB, MiB, GiB, TiB"):
        parse_bytes("4 GiBs")


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (KIB, "1.0 KiB"),
        (4 * GIB, "4.0 GiB"),
        (3 * GIB // 2, "1.5 GiB"),
        (5 * TIB, "5.0 TiB"),
    ],
)
def test_format_bytes(n: int, text: str) -> None:
    assert format_bytes(n) == text


@given(st.integers(min_value=0, max_value=1 << 60))
def test_plain_integers_round_trip(n: int) -> None:
    assert parse_bytes(str(n)) == n


@given(st.integers(min_value=0, max_value=1 << 20), st.sampled_from(["KiB", "MiB", "GiB", "K"]))
def test_binary_units_multiply(n: int, unit: str) -> None:
    assert parse_bytes(f"{n}{unit}") == n * {"KiB": KIB, "MiB": MIB, "GiB": GIB, "K": KIB}[unit]
