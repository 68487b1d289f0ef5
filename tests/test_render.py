"""kictl.render: one formatter per kind of value, so a value reads the same in every command."""

from __future__ import annotations

import pytest

from kictl import render


@pytest.mark.parametrize(
    ("nanoseconds", "text"),
    [
        (None, "-"),
        (0, "0 ns"),
        (0.4632, "0.46 ns"),
        (7, "7.00 ns"),
        (8.533, "8.53 ns"),
        (812, "812 ns"),
        (999.4, "999 ns"),
        (999.7, "1.00 µs"),  # rounds into the next unit, never "1e+03 ns" nor "1000 ns"
        (1_000, "1.00 µs"),
        (99_960, "100 µs"),
        (100_000, "100 µs"),
        (999_600, "1.00 ms"),
        (1_204_000, "1.20 ms"),
        (2_100_000_000, "2.10 s"),
        (1_234_000_000_000, "1234 s"),
    ],
)
def test_latency_has_three_significant_digits_in_the_unit_that_suits(nanoseconds: float | None, text: str) -> None:
    assert render.latency(nanoseconds) == text


def test_every_command_module_uses_the_one_latency_formatter() -> None:
    from kictl import submit
    from kictl.cli import _common

    assert _common.format_ns is render.latency
    assert submit.latency_text is render.latency


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "0 B"),
        (812, "812 B"),
        (40_960, "41.0 kB"),
        (35_651_584, "35.7 MB"),
        (2_223_164, "2.22 MB"),
        (1e12, "1.00 TB"),
    ],
)
def test_size_in_decimal_units(count: float, text: str) -> None:
    assert render.size(count) == text


def test_small_values() -> None:
    assert render.ratio(1.25) == "1.25×"
    assert render.ratio(None) == "-"
    assert render.times(3.4) == "3.4×"
    assert render.times(1234.4) == "1,234×"
    assert render.count(2_223_164) == "2,223,164"
    assert render.date("2026-11-30T12:00:00.000Z") == "2026-11-30"
    assert render.date(None) == "-"
    digest = "sha256:" + "ab" * 32
    assert render.short(digest) == "sha256:abababababab"
    assert render.compact_hex(f"record {digest[7:]}.json") == "record abababababab….json"


def test_tables_align_and_fit() -> None:
    lines = render.table(["name", "latency"], [["fast", render.latency(9_000)], ["slow", "12.5 µs"]], right=[1])
    assert lines == ["name  latency", "----  -------", "fast  9.00 µs", "slow  12.5 µs"]
    assert render.fit("x" * 120, render.WIDTH) == "x" * 99 + "…"
    assert all(len(line) <= render.WIDTH for line in render.wrap("word " * 100, "  "))
