"""The site's plots, drawn at build time as SVG with matplotlib.

Why matplotlib: it is the plotting library every Python user of the index
already has or can get from any mirror, it writes SVG without a browser or a
JavaScript runtime, and its SVG output is reproducible when the date metadata
is dropped and the id salt fixed (``svg.hashsalt``), which byte-identical
rebuilds need.  Text stays text (``svg.fonttype: none``): it can be selected and
searched, and the files are smaller and faster to make than with glyph paths;
every plot sits beside a table with the same numbers and carries a text
alternative, so nothing is only in the picture.

Only the object-oriented API (``matplotlib.figure.Figure``) is used: no pyplot
state, no GUI backend.  matplotlib is imported by ``_matplotlib`` when a plot is drawn (an
optional extra, ``kictl[site]``); ``require_matplotlib`` raises ``EnvError`` without it.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kictl import render
from kictl.errors import EnvError

#: Fixed settings: the id salt makes the SVG reproducible; text stays text.
_RC: Any = {
    "svg.hashsalt": "kernelindex",
    "svg.fonttype": "none",
    "font.size": 9.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "path.simplify": False,
    # the title where matplotlib would put it (nothing sits above these axes) without its measuring every tick
    # label of both axes to decide that: a third of the time a plot takes to draw
    "axes.titley": 1.0,
}
_MARKERS = "osD^v<>ph*"


def _matplotlib() -> ModuleType:
    """matplotlib, its ``figure`` and ``ticker`` modules loaded; ``EnvError`` (exit 5) when it is not installed."""
    try:
        # the optional extra ``kictl[site]``: imported when a plot is drawn, so that only a site build needs it
        import matplotlib.figure
        import matplotlib.ticker
    except ImportError as exc:
        raise EnvError(
            "kictl site build draws its plots with matplotlib, which is not installed",
            details=["pip install 'kictl[site]'"],
        ) from exc
    return matplotlib


def require_matplotlib() -> None:
    """Raises ``EnvError`` (exit 5) when matplotlib cannot be imported."""
    _matplotlib()


@dataclass(frozen=True, slots=True)
class Series:
    """One line of a plot: a label and one value per x position (``None`` where there is none)."""

    label: str
    values: tuple[float | None, ...]


def _svg(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue()


def _figure(width: float, height: float, *, right: float = 0.97) -> Any:
    """A figure with fixed margins (a layout engine would measure every label: seconds per plot)."""
    figure = _matplotlib().figure.Figure(figsize=(width, height), dpi=100)
    figure.subplots_adjust(left=0.09, right=right, bottom=0.30, top=0.90)
    return figure


def _log_axis(axis: Any, label: Callable[[float], str], *, subs: tuple[float, ...] = (1.0, 2.0, 5.0)) -> None:
    """A log-scale axis whose tick labels ``label`` writes as kictl.render does (``500 ns``, ``2.00 µs``), plain
    text: matplotlib's own ``10^{2}`` labels go through its mathtext parser, a fifth of a site build's time."""
    ticker = _matplotlib().ticker
    axis.set_major_locator(ticker.LogLocator(base=10.0, subs=subs))
    axis.set_major_formatter(ticker.FuncFormatter(lambda value, _position: label(value)))
    axis.set_minor_locator(ticker.NullLocator())
    axis.set_minor_formatter(ticker.NullFormatter())


def _microseconds(value: float) -> str:
    return render.latency(value * 1e3)


def _millijoules(value: float) -> str:
    return render.joules(value / 1e3)


def latency_plot(title: str, workloads: Sequence[str], series: Sequence[Series]) -> bytes:
    """Latency (log scale) of each implementation across the workloads: SVG bytes."""
    matplotlib = _matplotlib()

    with matplotlib.rc_context(_RC):
        figure = _figure(9.0, 4.0 + 0.12 * max(0, len(series) - 12), right=0.70)
        axes = figure.add_subplot()
        positions = list(range(len(workloads)))
        for number, line in enumerate(series):
            xs = [x for x, value in zip(positions, line.values, strict=True) if value is not None]
            ys = [value / 1e3 for value in line.values if value is not None]
            axes.plot(
                xs,
                ys,
                marker=_MARKERS[number % len(_MARKERS)],
                linestyle="-" if len(xs) > 1 else "none",
                linewidth=1.0,
                markersize=4,
                label=line.label,
            )
        axes.set_yscale("log")
        _log_axis(axes.yaxis, _microseconds)
        axes.set_ylabel("latency (log scale)")
        axes.set_xticks(positions, list(workloads), rotation=60, ha="right", fontsize=7)
        axes.set_title(title, fontsize=9)
        axes.grid(True, which="major", axis="y", linewidth=0.3, alpha=0.6)
        if series:
            axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        return _svg(figure)


def floor_plot(title: str, workloads: Sequence[str], records: Sequence[float], floors: Sequence[float | None]) -> bytes:
    """Each workload's record latency beside its estimated floor (log scale): SVG bytes."""
    matplotlib = _matplotlib()

    with matplotlib.rc_context(_RC):
        figure = _figure(9.0, 4.0)
        axes = figure.add_subplot()
        positions = list(range(len(workloads)))
        axes.bar([x - 0.2 for x in positions], [value / 1e3 for value in records], width=0.4, label="record (achieved)")
        floor_x = [x + 0.2 for x, value in zip(positions, floors, strict=True) if value is not None]
        floor_y = [value / 1e3 for value in floors if value is not None]
        axes.bar(floor_x, floor_y, width=0.4, label="floor (estimate)", hatch="//", fill=False)
        axes.set_yscale("log")
        _log_axis(axes.yaxis, _microseconds)
        axes.set_ylabel("time (log scale)")
        axes.set_xticks(positions, list(workloads), rotation=60, ha="right", fontsize=7)
        axes.set_title(title, fontsize=9)
        axes.grid(True, which="major", axis="y", linewidth=0.3, alpha=0.6)
        axes.legend(fontsize=7, frameon=False)
        return _svg(figure)


def energy_plot(title: str, points: list[tuple[str, float, float, bool]]) -> bytes:
    """Joules per call (y) against latency (x), log-log, one labelled point per implementation (name, latency ns,
    joules, on the front); the Pareto front joined by a step line: SVG bytes."""
    matplotlib = _matplotlib()

    with matplotlib.rc_context(_RC):
        figure = _figure(6.5, 4.2, right=0.97)
        figure.subplots_adjust(bottom=0.14)
        axes = figure.add_subplot()
        for name, ns, joules, front in points:
            axes.plot(
                [ns / 1e3],
                [joules * 1e3],
                marker="o",
                markersize=6,
                linestyle="none",
                markerfacecolor="C0" if front else "white",
                markeredgecolor="C0",
            )
            axes.annotate(name, (ns / 1e3, joules * 1e3), textcoords="offset points", xytext=(5, 4), fontsize=7)
        front_points = sorted((ns / 1e3, joules * 1e3) for _, ns, joules, on in points if on)
        if len(front_points) > 1:
            axes.plot(
                [x for x, _ in front_points],
                [y for _, y in front_points],
                drawstyle="steps-post",
                linewidth=0.8,
                color="C0",
                label="Pareto front",
            )
            axes.legend(fontsize=7, frameon=False)
        axes.set_xscale("log")
        axes.set_yscale("log")
        _log_axis(axes.xaxis, _microseconds, subs=(1.0,))
        _log_axis(axes.yaxis, _millijoules, subs=(1.0,))
        axes.set_xlabel("latency (log scale; cold L2)")
        axes.set_ylabel("energy per call (log scale; idle subtracted)")
        axes.set_title(title, fontsize=9)
        axes.grid(True, which="major", linewidth=0.3, alpha=0.6)
        return _svg(figure)
