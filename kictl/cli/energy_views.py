"""Text views of energy results (issue 31) for ``kictl leaderboard --metric energy``, ``diff`` and ``history``.

Rendering only: the results come from ``kictl.rank.energy``.  Joules are shown with an SI prefix, watts
whole, latencies as the latency boards show them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kictl import render
from kictl.cli._common import table
from kictl.render import date as day
from kictl.render import fit, latency

if TYPE_CHECKING:
    from kictl.rank.energy import EnergyBoard, EnergyGroup

WIDTH = render.WIDTH


def joules(value: float | None) -> str:
    return render.joules(value)


def _watts(limit_mw: int | None) -> str:
    return render.watts(None if limit_mw is None else limit_mw / 1000)


def render_energy_group(group: EnergyGroup) -> list[str]:
    key = group.key
    lines = [
        fit(
            f"{group.workload_name} on {key.gpu}, power limit {_watts(key.power_limit_mw)} ({key.comparability})", WIDTH
        ),
        f"  comparison key {key.digest}",
    ]
    rows = [
        [
            f"{row.rank}{'=' if row.tied else ''}",
            fit(row.implementation_label, 28),
            joules(row.joules_per_call),
            f"{row.times_vs_first:.2f}x",
            render.watts(row.figures.average_watts, unit=False),
            render.watts(row.figures.idle_watts, 1, unit=False),
            render.percent(row.figures.spread),
            latency(row.run.latency_ns),
            "*" if row.pareto else "",
            row.evidence + (" stale" if row.stale else ""),
        ]
        for row in group.rows
    ]
    headers = ["#", "implementation", "J/call", "x #1", "W", "idle W", "spread", "latency", "front", "evidence"]
    lines.extend("  " + line for line in table(headers, rows, right=(2, 3, 4, 5, 6, 7)))
    left = {name: count for name, count in group.excluded.items() if count}
    if left:
        lines.append("  left out: " + ", ".join(f"{name} {count}" for name, count in sorted(left.items())))
    return lines


def render_energy_board(board: EnergyBoard) -> list[str]:
    definition = board.definition
    lines = [fit(f"{definition.name}: energy per call (idle draw subtracted; warm caches)", WIDTH)]
    if not board.groups:
        lines.append("no energy runs (kictl bench --measure energy makes them)")
        return lines
    for group in board.groups:
        lines.append("")
        lines.extend(render_energy_group(group))
    lines.append("")
    lines.append("front: on the Pareto front of J/call against latency (no ranked run both faster and cheaper)")
    return lines


def render_energy_diff(result: dict[str, Any]) -> list[str]:
    energy_before = result["joulesPerCall"]["before"]
    energy_after = result["joulesPerCall"]["after"]
    line = f"energy: {joules(energy_before)} -> {joules(energy_after)} per call"
    if result["sameGroup"] and result["ratio"] is not None:
        noise = "exceeds the noise" if result["exceedsNoise"] else "within the noise"
        line += f", ratio {result['ratio']:.3f} ({noise})"
    else:
        line += " (not comparable: another workload, GPU, power limit or family)"
    return [line]


def render_energy_changes(changes: list[dict[str, Any]]) -> list[str]:
    lines = ["", "energy groups:"]
    for change in changes:
        after = change["after"]
        before = change["before"]
        now = f"{after['implementation']} {joules(after['joulesPerCall'])}" if after else "no ranked run"
        was = f"{before['implementation']} {joules(before['joulesPerCall'])}" if before else "none"
        mark = "new #1" if change["newFirst"] else "#1"
        lines.append(fit(f"  {change['workloadName']} on {change['gpu']}: {mark} {now} (was {was})", WIDTH))
    return lines


def render_energy_history(result: dict[str, Any]) -> list[str]:
    lines = [
        fit(f"{result['kind']} {result['name']}", WIDTH),
        f"digest {result['digest']}",
        "",
        "#1 by energy over time:",
    ]
    if not result["groups"]:
        lines.append("  no energy runs")
    for group in result["groups"]:
        lines.append(
            fit(
                f"  {group['workloadName']} on {group['gpu']}, power limit {_watts(group['powerLimitMilliwatts'])}",
                WIDTH,
            )
        )
        lines.append(f"    comparison key {group['comparisonKey']}")
        for change in group["firstOverTime"]:
            commit = change["commit"][:12] if change["commit"] else "uncommitted"
            text = (
                f"    {day(change['date'])}  {commit:<12}  {change['implementation']} {joules(change['joulesPerCall'])}"
            )
            lines.append(fit(text, WIDTH))
            if change["previousImplementation"] is not None:
                previous = f"{change['previousImplementation']} {joules(change['previousJoulesPerCall'])}"
                lines.append(fit(f"{'':30}was {previous}", WIDTH))
    return lines
