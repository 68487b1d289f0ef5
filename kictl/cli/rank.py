"""Commands that read the leaderboards: ``leaderboard`` and ``floor`` (``diff``, ``history`` and ``cite`` are
``kictl.cli.compare``).

Each opens the registry's query index (``kictl.index``, brought up to date
first), calls one function of ``kictl.rank`` and renders its result: text
that fits 100 columns, or one JSON document with ``--json`` (latencies as
integer nanoseconds ``latencyNs``, digests in full).

Unknown names exit 3 (a definition, workload, record or revision that is not
there, with the closest known names); an option value outside its fixed set
exits 2 (a GPU that neither the datasheet table nor the registry knows, an
evidence level, a citation format).
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kictl import render
from kictl.cli import answers
from kictl.cli._common import (
    REFERENCE_HELP,
    JsonOption,
    RegistryOption,
    emit_json,
    err,
    guarded,
    open_registry,
    out,
    table,
)
from kictl.cli.energy_views import render_energy_board
from kictl.definitions import origin_notes, workload_origin
from kictl.index.facts import WorkloadFacts
from kictl.index.query import QueryIndex
from kictl.rank.energy import check_metric, energy_leaderboard
from kictl.rank.floors import floors
from kictl.rank.leaderboards import axes_label, definition_leaderboard, distinguishing_axes, workload_leaderboard
from kictl.render import date as day
from kictl.render import fit, latency, ratio, times
from kictl.standing import held_out_verdicts, with_held_out
from kictl.trust.readers import policy_standing

if TYPE_CHECKING:
    from kictl.policy import Policy
    from kictl.rank import DefinitionBoard, FloorEstimate, RankedGroup, RankedRow, WorkloadBoard
    from kictl.store.registry import Registry

#: kictl.rank's evidence levels, here so that the help text needs no import (tests/rank checks they agree).
EVIDENCE_LEVELS = ("disputed", "unsigned", "reported", "verified")
DEFAULT_EVIDENCE = "disputed"

WIDTH = render.WIDTH

GpuOption = Annotated[
    str | None,
    typer.Option("--gpu", help="GPU product or alias (e.g. H200, 'NVIDIA H200', B200).", show_default=False),
]


def _wrap(text: str, indent: str = "") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ") or [indent]


def _line(text: str) -> str:
    """``text`` whole, or cut to the terminal's width when stdout is a terminal too narrow for it."""
    width = render.terminal_width()
    return text if width is None else fit(text, width)


def _room(indent: int = 0) -> int | None:
    """The columns a table has on the terminal (``None``: stdout is no terminal, nothing is cut)."""
    width = render.terminal_width()
    return None if width is None else width - indent


#: What the summary's columns and marks mean, in one line under each board (docs/leaderboards.md says more).
SUMMARY_LEGEND = "vs floor: record ÷ floor · evidence disputed < unsigned < reported < verified · docs/leaderboards.md"
#: The same for one workload's groups.
GROUP_LEGEND = "1= tied within noise · * not committed · × ref: speed-up over the reference · docs/leaderboards.md"


def _open(registry: RegistryOption) -> tuple[Registry, Policy, QueryIndex]:
    target = open_registry(registry)

    standing = policy_standing(target)
    if standing.note:
        err(f"warning: {standing.note}")
    policy = standing.policy
    index = QueryIndex.open(target)
    report = index.report
    if report.mode in ("rebuilt", "memory") and sys.stderr.isatty():
        err(f"indexed {report.parsed} record files in {report.seconds:.2f} s ({'; '.join(report.reasons)})")
    problems = index.problem_count()
    if problems:
        err(f"warning: {problems} record file(s) could not be indexed and are left out; `kictl validate` says why")
    return target, policy, index


def _floor_note(group: RankedGroup) -> str:
    """How far above its floor a group's record is: ``1.83×``, ``BELOW``, or ``-`` without a floor."""
    if group.record_above_floor is None:
        return "-"
    if group.rows and group.rows[0].below_floor:
        return "BELOW"
    return times(group.record_above_floor)


def _render_definition(result: DefinitionBoard) -> list[str]:
    definition = result.definition
    lines = [
        _line(f"{definition.name}  ({definition.family}, {len(result.workloads)} workloads)"),
        f"digest    {definition.digest}",
    ]
    if result.baseline is not None:
        if result.baseline.source == "reference":
            lines.append("baseline  the definition's reference")
        else:
            why = "named by the policy" if result.baseline.source == "policy" else "the FlashInfer wrapper"
            lines.append(_line(f"baseline  {result.baseline.name} ({why})"))
    else:
        lines.append("baseline  none (no policy baseline, FlashInfer wrapper or reference run)")
    lines.append(f"evidence  {result.min_evidence} or better")
    if not result.boards:
        lines.append("")
        lines.append("no passed runs" + (f" on {result.gpu}" if result.gpu else ""))
    axes = distinguishing_axes(result.workloads)
    by_digest = {workload.digest: workload for workload in result.workloads}
    for board in result.boards:
        lines.append("")
        lines.append(
            _line(
                f"{board.gpu} · {board.comparability} · {board.statistic}: "
                f"records on {len(board.records)} of {len(result.workloads)} workloads"
            )
        )
        if board.baseline is not None and board.baseline.instead_of is not None:
            lines.extend(
                _wrap(
                    f"speed-ups over the reference ({board.baseline.name}) here: "
                    f"{board.baseline.instead_of} has no run on this board",
                    "  ",
                )
            )
        rows = []
        for record in board.records:
            leader = record.leader
            holder = leader.implementation_label
            extra = len(record.group.first()) - 1
            if extra:
                holder = f"{holder} +{extra} tied"
            baseline = "-" if record.baseline_unbeaten is None else "unbeaten" if record.baseline_unbeaten else "beaten"
            workload = by_digest.get(record.group.key.workload)
            rows.append(
                [
                    record.group.workload_name,
                    *([axes_label(workload, axes) if workload else "-"] if axes else []),
                    latency(leader.latency_ns),
                    holder,
                    render.with_advisories(leader.evidence, leader.advisories),
                    baseline,
                    _floor_note(record.group),
                    "stale" if leader.stale else "",
                ]
            )
        shift = 1 if axes else 0
        lines.extend(
            "  " + line
            for line in table(
                [
                    "workload",
                    *(["axes"] if axes else []),
                    "record",
                    "implementation",
                    "evidence",
                    "baseline",
                    "vs floor",
                    "stale",
                ],
                rows,
                right=(1 + shift, 5 + shift),
                cut=(0, 2 + shift, *((1,) if axes else ())),
                width=_room(2),
            )
        )
        if any(record.leader.below_floor for record in board.records):
            lines.append("  BELOW: the record is faster than its physical floor, which is impossible: check the run")
        lines.append("")
        rows = [
            [
                summary.name,
                f"{summary.covered}/{summary.workloads}",
                str(summary.wins),
                render.speedup(summary.geomean_speedup, summary.speedup_workloads),
            ]
            for summary in board.implementations
        ]
        over = "reference" if board.baseline is not None and board.baseline.instead_of is not None else "baseline"
        lines.extend(
            "  " + line
            for line in table(
                ["implementation", "covered", "wins", f"geomean vs {over} (workloads)"],
                rows,
                right=(1, 2, 3),
                cut=(0,),
                width=_room(2),
            )
        )
        lines.append(SUMMARY_LEGEND)
    if result.challenges:
        lines.append("")
        # a product name is one word here ("RTX 4090"): no line breaks inside it
        names = ", ".join(name.replace(" ", "\u00a0") for name in result.challenges)
        lines.extend(line.replace("\u00a0", " ") for line in _wrap("open challenges (no passed run yet): " + names))
    if result.unranked:
        lines.append("")
        lines.append(f"{result.unranked} run(s) name a workload, protocol or environment not in the registry")
    return lines


def _render_group(group: RankedGroup, held_out: Mapping[str, str] | None = None) -> list[str]:
    lines = [
        _line(f"{group.key.gpu} · {group.key.comparability} · {group.key.statistic}"),
        f"comparison key {group.comparison_key}",
    ]
    if group.floor is not None:
        floor = group.floor
        above = group.record_above_floor
        verdict = "" if above is None else f"; record is {times(above)} above it"
        if group.rows and group.rows[0].below_floor:
            verdict = "; the record is BELOW it (impossible: check the run)"
        lines.extend(_wrap(f"floor {latency(floor.floor_ns)} ({floor.method}, an estimate){verdict}"))
        flops = "no FLOP formula" if floor.flops is None else f"{render.count(floor.flops)} FLOP"
        lines.extend(
            _wrap(f"{render.count(floor.bytes)} bytes, {flops}; datasheet figures in `kictl floor --json`", "  ")
        )
    else:
        lines.append(f"floor unknown ({group.key.gpu} is not in the datasheet table)")
    rows = []
    for row in group.rows:
        notes = [label for flag, label in ((row.stale, "stale"), (row.below_floor, "BELOW FLOOR")) if flag]
        notes += [(held_out or {})[row.run.digest]] if row.run.digest in (held_out or {}) else []  # issue 32
        notes += ["no samples"] if row.note else []  # kictl.derived: its figures are as stated
        mark = ("=" if row.tied or _tied_below(group, row) else "") + ("" if row.run.committed else "*")
        rows.append(
            [
                f"{row.rank}{mark}",
                row.implementation_label,
                latency(row.latency_ns),
                ratio(row.times_vs_first),
                ratio(row.speedup_over_reference),
                render.with_advisories(row.evidence, row.advisories),
                day(row.run.observed_at),
                ", ".join(notes),
            ]
        )
    lines.extend(
        table(
            ["rank", "implementation", "latency", "× vs #1", "× ref", "evidence", "observed", "notes"],
            rows,
            right=(2, 3, 4),
            cut=(1,),
            width=_room(),
        )
    )
    if any(not row.run.committed for row in group.rows):
        lines.append("* not committed yet")
    unbacked = next((row.note for row in group.rows if row.note), None)
    if unbacked:
        lines.extend(_wrap(unbacked))
    left_out = {name: count for name, count in group.excluded.items() if count}
    if left_out:
        words = {
            "notPassed": "not passed",
            "evidence": "below the evidence level",
            "notBest": "not their best",
            "advisory": "under a harness advisory (policy advisedRuns: drop)",
        }
        lines.append("left out: " + ", ".join(f"{count} {words[name]}" for name, count in left_out.items()))
    lines.append(GROUP_LEGEND)
    return lines


def _tied_below(group: RankedGroup, row: RankedRow) -> bool:
    position = group.rows.index(row)
    return (
        position + 1 < len(group.rows) and group.rows[position + 1].tied and group.rows[position + 1].rank == row.rank
    )


def _render_workload(result: WorkloadBoard, held_out: Mapping[str, str] | None = None) -> list[str]:
    workload = result.workload
    axes = " · ".join(f"{name} = {value}" for name, value in sorted(workload.axes.items()))
    lines = [_line(f"{result.definition.name} / {workload.name}"), f"workload  {workload.digest}"]
    lines.extend(_wrap(f"axes      {axes}"))
    lines.append(f"evidence  {result.min_evidence} or better")
    if not result.groups:
        lines.append("")
        lines.append("no runs" + (f" on {result.gpu}" if result.gpu else ""))
    for group in result.groups:
        lines.append("")
        lines.extend(_render_group(group, held_out))
    if result.unranked:
        lines.append("")
        lines.append(f"{result.unranked} run(s) name a protocol or environment not in the registry")
    return lines


@guarded
def leaderboard(
    definition: Annotated[str, typer.Argument(help=f"The definition: {REFERENCE_HELP}.")],
    gpu: GpuOption = None,
    workload: Annotated[
        str | None, typer.Option("--workload", help="Workload label or digest: show its groups in full.")
    ] = None,
    evidence: Annotated[
        str,
        typer.Option(
            "--evidence",
            help=f"Minimum evidence level: {', '.join(EVIDENCE_LEVELS)} (weakest first; disputed shows every run).",
        ),
    ] = DEFAULT_EVIDENCE,
    metric: Annotated[
        str, typer.Option("--metric", help="latency (the latency boards) or energy (joules per call, issue 31).")
    ] = "latency",
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """The fastest correct implementations of a definition, per GPU and workload.

    Without --workload: per GPU, the record of every workload and each
    implementation's coverage, wins and geometric-mean speed-up over the
    baseline. With --workload: every ranked run of that workload's groups,
    with the comparison key and the physical floor. Exit 3 for an unknown
    definition or workload, 2 for an unknown GPU or evidence level.
    """
    document, policy = _leaderboard(definition, gpu, workload, evidence, metric, registry, as_json)
    # the command table keeps what it printed for the registry's state (kictl.cli.answers)
    answers.made(registry, document, stale_after=timedelta(days=policy.stale_after_days))


def _leaderboard(
    definition: str,
    gpu: str | None,
    workload: str | None,
    evidence: str,
    metric: str,
    registry: Path | None,
    as_json: bool,
) -> tuple[Any, Policy]:
    """Print the board; return its JSON form (whose times the kept answer's lifetime reads) and the policy."""
    check_metric(metric)
    _, policy, index = _open(registry)
    with index:
        if metric == "energy":  # energy groups (kictl.rank.energy): workload, GPU, power limit, family
            energy_board = energy_leaderboard(
                index, definition, policy=policy, gpu=gpu, workload=workload, min_evidence=evidence
            )
            document: Any = energy_board.to_json()
            if as_json:
                emit_json(document)
            else:
                for line in render_energy_board(energy_board):
                    out(line)
            return document, policy
        if workload is None:
            result = definition_leaderboard(index, definition, policy=policy, gpu=gpu, min_evidence=evidence)
            document = result.to_json()
            if as_json:
                emit_json(document)
            else:
                for line in _render_definition(result):
                    out(line)
                for line in _origin_lines(index, result.workloads):  # issue 42: generated, not captured
                    out(line)
            return document, policy
        board = workload_leaderboard(index, definition, workload, policy=policy, gpu=gpu, min_evidence=evidence)
        # issue 32: what verifiers' reruns found on held-out shapes (kictl.standing)
        held_out = held_out_verdicts(index.registry, [row.run.digest for g in board.groups for row in g.rows])
        document = [with_held_out(group, held_out) for group in board.to_json()]
        if as_json:
            emit_json(document)
        else:
            for line in _render_workload(board, held_out):
                out(line)
            for line in _origin_lines(index, [board.workload]):  # issue 42: generated, not captured
                out(line)
        return document, policy


def _origin_lines(index: QueryIndex, workloads: Sequence[WorkloadFacts]) -> list[str]:
    """The workloads whose inputs are not the captured tensors, or a generated suite (kictl.definitions)."""
    origins = {workload.name: workload_origin(index.load_record(workload.digest).raw) for workload in workloads}
    notes = origin_notes(origins)
    return ["", *(line for note in notes for line in _wrap(f"inputs: {note}"))] if notes else []


# --------------------------------------------------------------------------- floor


def _render_floors(definition_name: str, estimates: list[FloorEstimate], gpu: str) -> list[str]:
    lines = [_line(f"floor of {definition_name} on {gpu} (an estimate, never evidence)")]
    rows = [
        [
            estimate.workload_name,
            render.count(estimate.bytes),
            "-" if estimate.flops is None else render.count(estimate.flops),
            latency(estimate.bandwidth_bound_ns),
            latency(estimate.compute_bound_ns),
            latency(estimate.floor_ns),
            estimate.bound,
        ]
        for estimate in estimates
    ]
    lines.extend(
        table(
            ["workload", "bytes", "FLOPs", "bandwidth", "compute", "floor", "bound"],
            rows,
            right=(1, 2, 3, 4, 5),
            cut=(0,),
            width=_room(),
        )
    )
    by_inputs: dict[tuple[str, ...], list[str]] = {}
    for estimate in estimates:
        if estimate.synthesized:
            by_inputs.setdefault(estimate.synthesized, []).append(estimate.workload_name)
    for inputs, names in sorted(by_inputs.items()):
        lines.append("")
        which = "every workload" if len(names) == len(estimates) else ", ".join(names)
        lines.extend(_wrap(f"{', '.join(inputs)} synthesised from the axes (no blob given) for {which}"))
    figures: list[str] = []
    documents: list[str] = []
    for estimate in estimates:
        for source in estimate.sources:
            figure, _, document = source.partition(": ")
            if figure not in figures:
                figures.append(figure)
            if document not in documents:
                documents.append(document)
    if figures:
        lines.append("")
        lines.extend(_wrap("figures: " + "; ".join(figures)))
        for document in documents:
            lines.extend(_wrap(f"source: {document}"))
    return lines


@guarded
def floor(
    definition: Annotated[str, typer.Argument(help=f"The definition: {REFERENCE_HELP}.")],
    gpu: Annotated[str, typer.Option("--gpu", help="A GPU of the datasheet table (product or alias).")],
    workload: Annotated[str | None, typer.Option("--workload", help="Only this workload (label or digest).")] = None,
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """The physical floor of a definition's workloads on a datasheet GPU.

    Bytes that must cross memory over the datasheet bandwidth and FLOPs over
    the datasheet dense peak; the larger is the floor. Exit 3 for an unknown
    definition or workload, 2 for a GPU not in the datasheet table.
    """
    _, _, index = _open(registry)
    with index:
        facts, estimates = floors(index, definition, gpu, workload)
        if as_json:
            emit_json([estimate.to_json() for estimate in estimates])
            return
        product = estimates[0].gpu if estimates else gpu
        for line in _render_floors(facts.name, estimates, product):
            out(line)


def register(app: typer.Typer) -> None:
    app.command()(leaderboard)
    app.command()(floor)
