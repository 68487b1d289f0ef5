"""kictl.render: one formatter per kind of value, so a value reads the same in every command."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


# --------------------------------------------------------------------------- one formatter per unit

#: Values at and around every unit boundary: 0.9994 of a scale stays below it, 0.9995 and up rounds into it.
BOUNDARY_SHARES = (0.9994, 0.99949, 0.9995, 0.99955, 0.9996, 0.99996, 1.0, 1.0004, 9.994, 9.996, 99.94, 99.96)


def _boundaries(scales: list[float]) -> list[float]:
    return [scale * share for scale in scales for share in BOUNDARY_SHARES]


@pytest.mark.parametrize(
    ("nanoseconds", "text"),
    [(999.7, "1.00 µs"), (999_700, "1.00 ms"), (999_960, "1.00 ms"), (999.96e6, "1.00 s"), (99_940, "99.9 µs")],
)
def test_a_latency_that_rounds_up_is_written_in_the_next_unit(nanoseconds: float, text: str) -> None:
    assert render.latency(nanoseconds) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "-"),
        (0, "0 J"),
        (4e-10, "0.40 nJ"),
        (812e-6, "812 µJ"),
        (999.96e-6, "1.00 mJ"),  # never "1e+03 µJ"
        (0.0164, "16.4 mJ"),
        (0.9996, "1.00 J"),
        (1.08, "1.08 J"),
    ],
)
def test_joules_take_an_si_prefix_and_three_digits(value: float | None, text: str) -> None:
    assert render.joules(value) == text


def test_watts_percent_and_si() -> None:
    assert render.watts(700) == "700 W"
    assert render.watts(119.94, 1, unit=False) == "119.9"
    assert render.watts(None) == "-"
    assert render.percent(0.111) == "11.1%"
    assert render.percent(0.5, 0) == "50%"
    assert render.percent(None) == "-"
    assert render.si(35.7e9, "FLOP") == "35.7 GFLOP"
    assert render.si(1e11, "B/s") == "100 GB/s"
    assert render.si(999.96e3, "FLOP") == "1.00 MFLOP"
    assert render.si(812, "FLOP") == "812 FLOP"
    assert render.si(0, "FLOP") == "0 FLOP"
    assert render.peak(4.8e12, "B/s") == "4.8 TB/s"
    assert render.peak(989.4e12, "FLOP/s") == "989.4 TFLOP/s"


_MANTISSA = re.compile(r"^-?(\d+(?:\.\d+)?) (\S+)$")


@pytest.mark.parametrize(
    ("write", "scales", "units"),
    [
        (render.latency, [1e3, 1e6, 1e9], ("ns", "µs", "ms", "s")),
        (render.joules, [1e-9, 1e-6, 1e-3, 1.0], ("nJ", "µJ", "mJ", "J", "kJ")),
        (render.size, [1e3, 1e6, 1e9, 1e12], ("B", "kB", "MB", "GB", "TB")),
        (lambda value: render.si(value, "FLOP"), [1e3, 1e6, 1e9, 1e12], ("FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP")),
    ],
)
def test_every_boundary_reads_as_three_digits_below_a_thousand(
    write: Callable[[float], str], scales: list[float], units: tuple[str, ...]
) -> None:
    """The class of the ``1.00e+03 µs`` defect: at no unit boundary does a figure read 1000 or in exponent form."""
    for value in _boundaries(scales):
        text = write(value)
        match = _MANTISSA.match(text)
        assert match, f"{value!r}: {text!r}"
        number, unit = match.groups()
        assert unit in units, f"{value!r}: {text!r}"
        assert "e" not in number, f"{value!r}: {text!r}"
        assert float(number) < 999.5, f"{value!r}: {text!r} reads a thousand of a unit"
        significant = number.replace(".", "").lstrip("0")
        assert len(significant) == 3 or (unit == "B" and float(number) < 100), f"{value!r}: {text!r}"


@given(st.floats(min_value=1.0, max_value=1e11, allow_nan=False))
def test_a_latency_reads_back_within_its_rounding(nanoseconds: float) -> None:
    text = render.latency(nanoseconds)
    number, unit = text.split(" ")
    scale = {"ns": 1.0, "µs": 1e3, "ms": 1e6, "s": 1e9}[unit]
    assert float(number) * scale == pytest.approx(nanoseconds, rel=5e-3)
