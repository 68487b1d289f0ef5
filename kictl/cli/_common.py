"""What every command module shares: options, error handling, output.

Commands parse their options, call one domain function and render its
result.  ``guarded`` turns a ``KictlError`` into ``error: ...`` on stderr and
the error's exit code (``--debug`` re-raises it instead).  stdout carries
data only; ``emit_json`` prints one JSON document with the stdlib encoder.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer

from kictl.errors import KictlError
from kictl.store import Registry

P = ParamSpec("P")
R = TypeVar("R")


class _State:
    debug = False


STATE = _State()

RegistryOption = Annotated[
    Path | None,
    typer.Option(
        "--registry",
        help="Registry root (default: $KICTL_REGISTRY, else the nearest folder upwards with a registry/ folder).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")]

#: How every command's help names a record argument (the order of ``kictl.lookup``).
REFERENCE_HELP = "a digest, a unique prefix of 8+ hex digits, a name, or a unique prefix of 8+ characters of a name"


class LazyModule:
    """A module imported on first use, so that `kictl --help` and unrelated commands do not pay for it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)


def guarded(func: Callable[P, R]) -> Callable[P, R]:
    """Map ``KictlError`` to its message on stderr and its exit code."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except KictlError as exc:
            if STATE.debug:
                raise
            print(f"error: {exc.diagnostics()}", file=sys.stderr)
            raise typer.Exit(exc.exit_code) from None

    return wrapper


def open_registry(path: Path | None) -> Registry:
    return Registry.locate(path)


def emit_json(document: Any) -> None:
    """One JSON document on stdout."""
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def out(line: str = "") -> None:
    """A line of data on stdout."""
    sys.stdout.write(line + "\n")


def err(line: str = "") -> None:
    """A line of logging on stderr."""
    sys.stderr.write(line + "\n")


def short(digest: str, length: int = 12) -> str:
    """``sha256:`` and the first ``length`` hex digits."""
    return digest[: len("sha256:") + length]


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = ()) -> list[str]:
    """Plain aligned columns (no wrapping: digests stay whole)."""
    widths = [len(header) for header in headers]
    for row in rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))

    def render(cells: Sequence[str]) -> str:
        parts = []
        for index, cell in enumerate(cells):
            parts.append(cell.rjust(widths[index]) if index in right else cell.ljust(widths[index]))
        return "  ".join(parts).rstrip()

    return [render(headers), render(["-" * width for width in widths]), *(render(row) for row in rows)]


def format_ns(value: float | None) -> str:
    """A latency in the unit that suits it: ``812 ns``, ``12.5 µs``, ``1.94 ms``, ``2.10 s``."""
    if value is None:
        return "-"
    if value < 1e3:
        return f"{value:.0f} ns"
    if value < 1e6:
        return f"{value / 1e3:.3g} µs" if value < 1e5 else f"{value / 1e3:.1f} µs"
    if value < 1e9:
        return f"{value / 1e6:.3g} ms" if value < 1e8 else f"{value / 1e6:.1f} ms"
    return f"{value / 1e9:.3g} s"
