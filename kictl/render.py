"""How kictl writes values as text: one formatter per kind of value, and 100-column tables.

Every command, the review comment and the submission's commit message say a
latency, a ratio, a size, a date or a digest through these functions, so the
same value reads the same everywhere:

=========  ===================================================  ===========================
value      rule                                                 examples
=========  ===================================================  ===========================
latency    three significant digits in the unit that suits it   ``812 ns``, ``12.5 µs``,
           (nanoseconds in, ``-`` for none, exact zero ``0 ns``) ``1.00 ms``, ``2.10 s``
ratio      fixed decimals and ``×``                             ``1.25×``
times      "N× above": thousands separated from 100 up          ``3.4×``, ``1,234×``
size       decimal units (SI), three significant digits         ``812 B``, ``35.7 MB``
count      thousands separated                                  ``2,223,164``
date       the day of an RFC 3339 timestamp                     ``2026-11-30``
digest     ``sha256:`` and the first 12 hex digits              ``sha256:1f22d1ea605a``
names      in listings, numbers inside by value (``natural_key``) ``b1``, ``b8x``, ``b1024``
=========  ===================================================  ===========================

Text is plain: no colour, no wrapping console (digests must stay whole and
copyable).  Tables are aligned columns, and ``fit``/``wrap`` keep lines within
``WIDTH`` (100) columns.  Nothing here prints; the CLI writes what these return.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence

WIDTH = 100
DIGEST_PREFIX = "sha256:"

_UNITS = ((1e3, "µs"), (1e6, "ms"), (1e9, "s"))
_SIZES = ((1e3, "kB"), (1e6, "MB"), (1e9, "GB"), (1e12, "TB"))


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


def latency(ns: float | None) -> str:
    """A latency in nanoseconds, three significant digits in the unit that suits it; ``-`` for ``None``.

    ``7.00 ns``, ``812 ns``, ``12.5 µs``, ``1.20 ms``, ``2.10 s``; a value that
    rounds up to the next unit is written in it (999.7 ns is ``1.00 µs``).
    """
    if ns is None:
        return "-"
    if ns == 0:
        return "0 ns"
    value, unit = float(ns), "ns"
    for scale, name in _UNITS:
        if abs(ns) >= scale * 0.9995:
            value, unit = ns / scale, name
    return f"{_three_digits(value)} {unit}"


def ratio(value: float | None, digits: int = 2) -> str:
    """``1.25×`` (``-`` for ``None``)."""
    return "-" if value is None else f"{value:.{digits}f}×"


def times(value: float) -> str:
    """How many times above something: ``3.4×``, ``1,234×``."""
    return f"{value:,.0f}×" if value >= 100 else f"{value:.3g}×"


def size(count_bytes: float) -> str:
    """A number of bytes in decimal units: ``812 B``, ``40.9 kB``, ``35.7 MB``."""
    if abs(count_bytes) < 999.5:
        return f"{count_bytes:.0f} B"
    value, unit = count_bytes, "B"
    for scale, name in _SIZES:
        if abs(count_bytes) >= scale * 0.9995:
            value, unit = count_bytes / scale, name
    return f"{_three_digits(value)} {unit}"


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
    import shutil
    import sys

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
