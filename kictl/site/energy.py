"""The energy board of a definition page (issue 31), beside its latency boards.

Where the definition has energy runs (family ``kictl-nvml-energy``), its page
gets a section per energy group: the ranked table (``kictl leaderboard DEF
--metric energy``, the same ``kictl.rank.energy`` code), and per workload an
SVG plot of joules per call against latency with the Pareto front drawn and
its points filled.  The numbers are in the table; the plot has a text
alternative.  ``energy.json`` beside the page is the command's ``--json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kictl.rank.energy import EnergyBoard, EnergyGroup, energy_leaderboard
from kictl.render import percent, watts
from kictl.site.html import NONE, esc, joules, latency, link, ratio, table
from kictl.site.plots import energy_plot

if TYPE_CHECKING:
    from kictl.index.facts import DefinitionFacts

Files = dict[str, bytes]


def _group_rows(page: str, group: EnergyGroup, run_link: Any) -> list[list[str]]:
    """The ranked rows; the figures are the ones the board ranks by (derived from the trials, as the CLI shows),
    written by ``kictl.render`` as the CLI writes them."""
    return [
        [
            f"{row.rank}{'=' if row.tied else ''}",
            esc(row.implementation_label),
            f'<a href="{esc(run_link(page, row.run.digest))}" data-joules="{row.joules_per_call!r}">'
            f"{esc(joules(row.joules_per_call))}</a>",
            esc(ratio(row.times_vs_first)),
            esc(watts(row.figures.average_watts, unit=False)),
            esc(watts(row.figures.idle_watts, 1, unit=False)),
            esc(percent(row.figures.spread)),
            esc(latency(row.run.latency_ns)),
            "yes" if row.pareto else NONE,
            esc(row.evidence),
        ]
        for row in group.rows
    ]


def energy_section(
    page: str, definition: DefinitionFacts, board: EnergyBoard, run_link: Any
) -> tuple[str, Files, list[tuple[str, str]]]:
    """The definition page's energy section (HTML), its files (plots, ``energy.json``) and their doc lines.

    Empty where the definition has no energy runs.
    """
    if not board.groups:
        return "", {}, []
    folder = page.rsplit("/", 1)[0] + "/" if "/" in page else ""
    files: Files = {
        folder + "energy.json": (json.dumps(board.to_json(), indent=2, sort_keys=True) + "\n").encode(),
    }
    body = [
        '<section aria-labelledby="energy"><h2 id="energy">Energy per call</h2>',
        "<p>Board energy from NVML's energy counter over long back-to-back loops (warm caches), the idle draw "
        "subtracted; ranked only against energy runs of the same GPU product and power limit. Board power, not "
        "the kernel's alone.</p>",
    ]
    for number, group in enumerate(board.groups, start=1):
        key = group.key
        label = f"{group.workload_name} · {key.gpu} · {watts(key.power_limit_mw / 1000)} limit"
        body.append(f'<h3 id="energy-{number}">{esc(label)}</h3>')
        body.append(
            table(
                f"Energy ranking of {label}",
                ["#", "implementation", "J/call", "× #1", "W", "idle W", "spread", "latency", "Pareto", "evidence"],
                _group_rows(page, group, run_link),
                numeric=(2, 3, 4, 5, 6, 7),
                row_header=1,
                table_id=f"energy-table-{number}",
            )
        )
        points = [
            (row.implementation_label, float(row.run.latency_ns), row.joules_per_call, row.pareto)
            for row in group.rows
            if row.run.latency_ns
        ]
        if points:
            name = f"energy.{number}.svg"
            files[folder + name] = energy_plot(f"{definition.name} {group.workload_name} on {key.gpu}", points)
            front = [p[0] for p in points if p[3]]
            alt = (
                f"Scatter plot, log-log: energy per call against latency of {len(points)} implementation(s) on "
                f"{group.workload_name}; on the Pareto front: {', '.join(front)}; the numbers are in the table above."
            )
            body.append(
                f'<figure><img src="{esc(name)}" alt="{esc(alt)}" width="650" loading="lazy">'
                f"<figcaption>Joules per call against latency on {esc(label)}; filled points are on the "
                "Pareto front.</figcaption></figure>"
            )
        body.append(f"<p>comparison key <code>{esc(key.digest)}</code></p>")
    body.append(f"<p>{link(page, folder + 'energy.json', 'energy.json')}</p>")
    body.append("</section>")
    docs = [("energy.json", f"`kictl leaderboard {definition.name} --metric energy --json`")]
    return "\n".join(body), files, docs


def definition_energy(
    ctx: Any, page: str, definition: DefinitionFacts, rel_run: Callable[[str, str], str]
) -> tuple[str, Files, list[tuple[str, str]]]:
    """``energy_section`` of a definition from the build's context (its index, policy, evidence and moment);
    ``rel_run(page, digest)`` is the pages' link to a run (passed in, so this module never imports pages)."""
    board = energy_leaderboard(
        ctx.index,
        definition.digest,
        policy=ctx.policy,
        evidence={d: level for d, level in ctx.evidence.items() if d not in ctx.reruns},
        now=ctx.moment,
    )
    return energy_section(page, definition, board, rel_run)
