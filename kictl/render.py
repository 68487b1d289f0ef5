"""How kictl writes values as text: one formatter per kind of value, and 100-column tables.

Every command, the review comment and the submission's commit message say a
latency, a ratio, a size, a date or a digest through these functions, so the
same value reads the same everywhere:

=========  ===================================================  ===========================
value      rule                                                 examples
=========  ===================================================  ===========================
latency    three significant digits in the unit that suits it   ``812 ns``, ``12.5 µs``,
           (nanoseconds in, ``-`` for none, exact zero ``0 ns``) ``1.00 ms``, ``2.10 s``
energy     joules, three significant digits, an SI prefix       ``812 µJ``, ``2.31 mJ``
power      whole watts unless told (a power limit, a board)     ``700 W``, ``119.9``
share      a fraction as a percentage, one decimal unless told  ``11.1%``
ratio      fixed decimals and ``×``                             ``1.25×``
times      "N× above": thousands separated from 100 up          ``3.4×``, ``1,234×``
size       decimal units (SI), three significant digits         ``812 B``, ``35.7 MB``
other      a count of a unit with an SI prefix (``si``)         ``35.7 GFLOP``, ``50.0 GB/s``
peak       a datasheet figure in tera-units, all its digits     ``4.8 TB/s``, ``989.4 TFLOP/s``
count      thousands separated                                  ``2,223,164``
date       the day of an RFC 3339 timestamp                     ``2026-11-30``
digest     ``sha256:`` and the first 12 hex digits              ``sha256:1f22d1ea605a``
names      in listings, numbers inside by value (``natural_key``) ``b1``, ``b8x``, ``b1024``
=========  ===================================================  ===========================

Text is plain: no colour, no wrapping console (digests must stay whole and
copyable).  A value that rounds up to the next prefix is written in it
(999.7 ns is ``1.00 µs``, never ``1000 ns`` nor ``1e+03 ns``).  The site
(``kictl.site.html``) writes figures through these same functions.  Tables
are aligned columns, and ``fit``/``wrap`` keep lines within ``WIDTH`` (100)
columns.  Nothing here prints; the CLI writes what these return.
"""

from __future__ import annotations

import re
import shutil
import sys
import textwrap
from collections.abc import Sequence

WIDTH = 100
DIGEST_PREFIX = "sha256:"

#: Each unit's scales, smallest first: (how many of the base unit, name).
_TIMES = ((1.0, "ns"), (1e3, "µs"), (1e6, "ms"), (1e9, "s"))
_SIZES = ((1.0, "B"), (1e3, "kB"), (1e6, "MB"), (1e9, "GB"), (1e12, "TB"))
_JOULES = ((1e-9, "nJ"), (1e-6, "µJ"), (1e-3, "mJ"), (1.0, "J"), (1e3, "kJ"))
_PREFIXES = ((1.0, ""), (1e3, "k"), (1e6, "M"), (1e9, "G"), (1e12, "T"), (1e15, "P"))


_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders the numbers inside names by value: ``b1``, ``b8x``, ``b256``, ``b1024``.

    Text parts compare case-insensitively, then as given (so the order is total).
    """
    parts: list[tuple[int, int | str]] = []
    for position, part in enumerate(_DIGITS.split(name)):
        if position % 2:
            parts.append((0, int(part)))
        elif part:
            parts.append((1, part.lower()))
    return (*parts, (2, name))


def _three_digits(value: float) -> str:
    magnitude = abs(value)
    digits = 2 if magnitude < 9.995 else 1 if magnitude < 99.95 else 0
    return f"{value:.{digits}f}"


def _scaled(value: float, scales: Sequence[tuple[float, str]]) -> str:
    """``value`` (in the base unit) in the largest of ``scales`` it reaches once rounded to three digits.

    ``scales`` are (size in the base unit, name), smallest first; a value below the
    smallest is written in it (``0.46 ns``).  The threshold is 0.9995 of a scale, so a
    value that rounds up to the next scale is written in it: ``1.00 µs``, never ``1000 ns``.
    """
    scale, name = scales[0]
    for candidate, candidate_name in scales[1:]:
        if abs(value) >= candidate * 0.9995:
            scale, name = candidate, candidate_name
    return f"{_three_digits(value / scale)} {name}"


def latency(ns: float | None) -> str:
    """A latency in nanoseconds, three significant digits in the unit that suits it; ``-`` for ``None``.

    ``7.00 ns``, ``812 ns``, ``12.5 µs``, ``1.20 ms``, ``2.10 s``; a value that
    rounds up to the next unit is written in it (999.7 ns is ``1.00 µs``).
    """
    if ns is None:
        return "-"
    if ns == 0:
        return "0 ns"
    return _scaled(float(ns), _TIMES)


def joules(value: float | None) -> str:
    """An energy in joules with an SI prefix, three significant digits: ``812 µJ``, ``2.31 mJ``, ``1.08 J``.

    ``-`` for ``None``, ``0 J`` for exact zero; a value that rounds up to the next prefix is written in
    it (999.96 µJ is ``1.00 mJ``).
    """
    if value is None:
        return "-"
    if value == 0:
        return "0 J"
    return _scaled(float(value), _JOULES)


def watts(value: float | None, digits: int = 0, *, unit: bool = True) -> str:
    """A power in watts with ``digits`` decimals: ``700 W`` (a power limit), ``119.9`` (a table's ``W`` column,
    ``unit=False``); ``-`` for ``None``."""
    if value is None:
        return "-"
    return f"{value:.{digits}f}" + (" W" if unit else "")


def percent(fraction: float | None, digits: int = 1) -> str:
    """A fraction as a percentage with ``digits`` decimals: 0.111 is ``11.1%``; ``-`` for ``None``."""
    return "-" if fraction is None else f"{100 * fraction:.{digits}f}%"


def si(value: float, unit: str) -> str:
    """A quantity of ``unit`` with an SI prefix, three significant digits: ``35.7 GFLOP``, ``812 FLOP``."""
    if value == 0:
        return f"0 {unit}"
    return _scaled(float(value), [(scale, prefix + unit) for scale, prefix in _PREFIXES])


def ratio(value: float | None, digits: int = 2) -> str:
    """``1.25×`` (``-`` for ``None``)."""
    return "-" if value is None else f"{value:.{digits}f}×"


def speedup(geomean: float | None, workloads: int) -> str:
    """A geometric-mean speed-up over the baseline and how many workloads it is over: ``1.25× (4)``; ``-`` for
    none."""
    return "-" if geomean is None else f"{ratio(geomean)} ({workloads})"


def times(value: float) -> str:
    """How many times above something: ``3.4×``, ``1,234×``."""
    return f"{value:,.0f}×" if value >= 100 else f"{value:.3g}×"


def peak(value: float, unit: str) -> str:
    """A datasheet figure in tera-units with every digit the datasheet gives: ``4.8 TB/s``, ``989.4 TFLOP/s``."""
    return f"{value / 1e12:g} T{unit}"


def size(count_bytes: float) -> str:
    """A number of bytes in decimal units: ``812 B``, ``40.9 kB``, ``35.7 MB`` (whole bytes below a kilobyte)."""
    if abs(count_bytes) < 999.5:
        return f"{count_bytes:.0f} B"
    return _scaled(float(count_bytes), _SIZES)


def count(value: int) -> str:
    """An integer with thousands separated: ``2,223,164``."""
    return f"{value:,}"


def date(timestamp: str | None) -> str:
    """The day (``YYYY-MM-DD``) of an RFC 3339 timestamp; ``-`` for ``None``."""
    return timestamp[:10] if timestamp else "-"


def short(digest: str, length: int = 12) -> str:
    """``sha256:`` and the first ``length`` hex digits of a digest."""
    return digest[: len(DIGEST_PREFIX) + length] if digest.startswith(DIGEST_PREFIX) else digest[:length]


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, an ellipsis marking the cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def wrap(text: str, indent: str = "", width: int = WIDTH) -> list[str]:
    """``text`` wrapped to ``width`` columns, continuation lines indented two more; never splits a digest."""
    return textwrap.wrap(
        text,
        width,
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent]


def terminal_width() -> int | None:
    """The columns of the terminal stdout writes to; ``None`` when stdout is no terminal (then nothing is cut)."""
    try:
        if not sys.stdout.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return shutil.get_terminal_size((WIDTH, 24)).columns


#: The narrowest a name column is cut to when a table must fit a terminal.
MIN_CUT = 12


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: Sequence[int] = (),
    cut: Sequence[int] = (),
    width: int | None = None,
) -> list[str]:
    """Plain aligned columns (no wrapping: digests stay whole); ``right`` are right-aligned column indexes.

    Names are given whole.  Where ``width`` is given (a terminal's, less any
    indent) and the table is wider, the ``cut`` columns (names) are cut, the
    widest first and none below ``MIN_CUT``, an ellipsis marking each cut; a
    file or a pipe (``width`` None) gets every name whole.
    """
    widths = [len(header) for header in headers]
    for row in rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))
    if width is not None and cut:
        excess = sum(widths) + 2 * (len(widths) - 1) - width
        while excess > 0:
            widest = max(cut, key=lambda index: widths[index])
            floor = max(MIN_CUT, len(headers[widest]))
            if widths[widest] <= floor:
                break
            step = min(excess, widths[widest] - floor)
            widths[widest] -= step
            excess -= step
        rows = [[fit(cell, widths[index]) if index in cut else cell for index, cell in enumerate(row)] for row in rows]

    def line(cells: Sequence[str]) -> str:
        parts = []
        for index, cell in enumerate(cells):
            parts.append(cell.rjust(widths[index]) if index in right else cell.ljust(widths[index]))
        return "  ".join(parts).rstrip()

    return [line(headers), line(["-" * width for width in widths]), *(line(row) for row in rows)]


_HEX64 = re.compile(r"\b[0-9a-f]{64}\b")


def compact_hex(text: str) -> str:
    """``text`` with each run of 64 hex digits cut to 12 and an ellipsis, for a terminal (JSON keeps them whole)."""
    return _HEX64.sub(lambda match: match.group(0)[:12] + "…", text)


def with_advisories(level: str, advisories: Sequence[str]) -> str:
    """An evidence level with the harness advisories that mark the run (docs/advisories.md).

    ``verified · harness advisory KI-2026-0001``; the level alone when none marks it.
    """
    if not advisories:
        return level
    noun = "advisories" if len(advisories) > 1 else "advisory"
    return f"{level} · harness {noun} {', '.join(advisories)}"
