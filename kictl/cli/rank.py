"""Commands that read the leaderboards: ``leaderboard``, ``floor``, ``diff``, ``history``, ``cite``.

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

import json
import re
import sys
import textwrap
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kictl import render
from kictl.cli._common import (
    REFERENCE_HELP,
    JsonOption,
    LazyModule,
    RegistryOption,
    emit_json,
    err,
    guarded,
    open_registry,
    out,
    table,
)
from kictl.errors import CheckFailed, NotFoundError, UsageError
from kictl.render import date as day
from kictl.render import fit, latency, ratio, times

if TYPE_CHECKING:
    from kictl.index import QueryIndex
    from kictl.policy import Policy
    from kictl.rank import (
        Citation,
        DefinitionBoard,
        FloorEstimate,
        History,
        RankedGroup,
        RankedRow,
        RecordDiff,
        StateDiff,
        WorkloadBoard,
    )
    from kictl.store import Registry

#: ``kictl.rank`` and the index, imported on first use (``kictl --help`` never pays for them).
_rank = LazyModule("kictl.rank")
_index = LazyModule("kictl.index")
#: energy (issue 31): its ranking and its text views
_energy = LazyModule("kictl.rank.energy")
_energy_views = LazyModule("kictl.cli.energy_views")
_heldout = LazyModule("kictl.rerun.heldout")
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
SUMMARY_LEGEND = "vs floor: record ÷ physical floor · evidence: unsigned < reported < verified · docs/leaderboards.md"
#: The same for one workload's groups.
GROUP_LEGEND = "1= tied within noise · * not committed · × ref: speed-up over the reference · docs/leaderboards.md"


def _open(registry: RegistryOption) -> tuple[Registry, Policy, QueryIndex]:
    target = open_registry(registry)
    from kictl.trust.readers import policy_standing

    standing = policy_standing(target)
    if standing.note:
        err(f"warning: {standing.note}")
    policy = standing.policy
    index = _index.QueryIndex.open(target)
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
    axes = _rank.distinguishing_axes(result.workloads)
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
                    *([_rank.axes_label(workload, axes) if workload else "-"] if axes else []),
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
                "-"
                if summary.geomean_speedup is None
                else f"{summary.geomean_speedup:.2f}× ({summary.speedup_workloads})",
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
        flops = "no FLOP formula" if floor.flops is None else f"{floor.flops:,} FLOP"
        lines.extend(_wrap(f"{floor.bytes:,} bytes, {flops}; datasheet figures in `kictl floor --json`", "  "))
    else:
        lines.append(f"floor unknown ({group.key.gpu} is not in the datasheet table)")
    rows = []
    for row in group.rows:
        notes = [label for flag, label in ((row.stale, "stale"), (row.below_floor, "BELOW FLOOR")) if flag]
        notes += [(held_out or {})[row.run.digest]] if row.run.digest in (held_out or {}) else []  # issue 32
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
    _energy.check_metric(metric)
    _, policy, index = _open(registry)
    with index:
        if metric == "energy":  # energy groups (kictl.rank.energy): workload, GPU, power limit, family
            energy_board = _energy.energy_leaderboard(
                index, definition, policy=policy, gpu=gpu, workload=workload, min_evidence=evidence
            )
            if as_json:
                emit_json(energy_board.to_json())
            else:
                for line in _energy_views.render_energy_board(energy_board):
                    out(line)
            return
        if workload is None:
            result = _rank.definition_leaderboard(index, definition, policy=policy, gpu=gpu, min_evidence=evidence)
            if as_json:
                emit_json(result.to_json())
            else:
                for line in _render_definition(result):
                    out(line)
            return
        board = _rank.workload_leaderboard(index, definition, workload, policy=policy, gpu=gpu, min_evidence=evidence)
        # issue 32: what verifiers' reruns found on held-out shapes (kictl.rerun.heldout)
        held_out = _heldout.held_out_verdicts(index.registry, [row.run.digest for g in board.groups for row in g.rows])
        if as_json:
            emit_json([_heldout.with_held_out(group, held_out) for group in board.to_json()])
        else:
            for line in _render_workload(board, held_out):
                out(line)


# --------------------------------------------------------------------------- floor


def _render_floors(definition_name: str, estimates: list[FloorEstimate], gpu: str) -> list[str]:
    lines = [_line(f"floor of {definition_name} on {gpu} (an estimate, never evidence)")]
    rows = [
        [
            estimate.workload_name,
            f"{estimate.bytes:,}",
            "-" if estimate.flops is None else f"{estimate.flops:,}",
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
        facts, estimates = _rank.floors(index, definition, gpu, workload)
        if as_json:
            emit_json([estimate.to_json() for estimate in estimates])
            return
        product = estimates[0].gpu if estimates else gpu
        for line in _render_floors(facts.name, estimates, product):
            out(line)


# --------------------------------------------------------------------------- diff


def _value(value: Any, present: bool, width: int) -> str:
    if not present:
        return "(absent)"
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return fit(text, width)


#: A change to one element of a list of samples (``$.spec.timing.samples[12]``): shown only with --samples.
_SAMPLE_PATH = re.compile(r"^(.*\.samples)\[\d+\]")


def _key_comparison(result: RecordDiff) -> str | None:
    """The line that matters for two runs: their primary latencies, the ratio, whether they are comparable."""
    if result.same_group is None:
        return None
    before, after = result.latencies_ns
    statistic = result.statistics[0] if result.statistics[0] == result.statistics[1] else "latency"
    figures = f"{statistic or 'latency'} {latency(before)} → {latency(after)}"
    if result.same_group and result.latency_ratio is not None:
        verdict = "exceeds the noise" if result.exceeds_noise else "within the noise: a tie"
        return f"{figures}: b/a {result.latency_ratio:.4f} ({verdict}); same comparison group"
    if result.same_group:
        return f"{figures}: same comparison group, no latency to compare"
    differ = ", ".join(result.group_differences) or "their comparison key"
    return f"{figures}: not compared, different comparison groups (other {differ})"


def _render_record_diff(result: RecordDiff, *, samples: bool = False) -> list[str]:
    key_line = _key_comparison(result)
    lines = [] if key_line is None or result.equal else [_line(key_line)]
    lines += [
        f"a  {result.before.digest}  {fit(result.before.kind + ' ' + result.before.name, 20)}",
        f"b  {result.after.digest}  {fit(result.after.kind + ' ' + result.after.name, 20)}",
    ]
    if result.equal:
        lines.append("the same record")
        return lines
    if result.comparison_key is not None:
        lines.append(f"comparison key {result.comparison_key}")
    hidden: dict[str, int] = {}
    for change in result.changes:
        sample = _SAMPLE_PATH.match(change.path)
        if sample is not None and not samples:
            hidden[sample.group(1)] = hidden.get(sample.group(1), 0) + 1
            continue
        room = max(20, (WIDTH - len(change.path) - 6) // 2)
        line = (
            f"{change.path}: {_value(change.before, change.before_present, room)}"
            f" → {_value(change.after, change.after_present, room)}"
        )
        lines.append(_line(line))
    for path, count in hidden.items():
        lines.append(_line(f"{path}: {count} sample(s) differ (--samples lists them)"))
    return lines


def _render_state_diff(result: StateDiff, before: str, after: str) -> list[str]:
    lines = [
        f"{before} ({result.before[:12]}) → {after} ({result.after[:12]}): "
        f"{len(result.added)} record(s) added, {len(result.removed)} removed"
    ]
    for title, items in (("added", result.added), ("removed", result.removed)):
        if items:
            lines.append(f"{title}:")
            lines.extend(f"  {kind:<20}  {digest}" for kind, digest, _ in items)
    for change in result.groups:
        lines.append("")
        label = f"{change.definition or '?'} / {change.workload_name} on {change.key.gpu}"
        lines.append(_line(f"{label} ({change.key.comparability}, {change.key.statistic})"))
        lines.append(f"  comparison key {change.key.digest}")
        if change.new_first and change.after_leader is not None:
            now = f"{change.after_leader.implementation_label} {latency(change.after_leader.latency_ns)}"
            lines.append(_line(f"  new #1: {now}"))
            if change.before_leader is not None:
                was = f"{change.before_leader.implementation_label} {latency(change.before_leader.latency_ns)}"
                margin = f"; {change.margin:.3f}× faster" if change.margin else ""
                lines.append(_line(f"    was: {was}{margin}"))
            else:
                lines.append("    the group's first ranked run")
        for rank in change.rank_changes:
            before_rank = "-" if rank.before_rank is None else str(rank.before_rank)
            after_rank = "-" if rank.after_rank is None else str(rank.after_rank)
            times_ = latency(rank.after_ns)
            if rank.before_ns != rank.after_ns:
                times_ = f"{latency(rank.before_ns)} → {latency(rank.after_ns)}"
            lines.append(_line(f"  rank {before_rank} → {after_rank}: {rank.name} ({times_})"))
        for row in change.became_stale:
            lines.append(_line(f"  became stale: {row.implementation_label} (observed {day(row.run.observed_at)})"))
    return lines


def _as_record(index: QueryIndex, ref: str) -> bool:
    try:
        index.resolve_any(ref)
    except NotFoundError:
        return False
    return True


def _as_revision(target: Registry, ref: str) -> bool:
    if not target.is_git_repository():
        return False
    try:
        target.git.rev_parse(ref)
    except NotFoundError:
        return False
    return True


@guarded
def diff(
    a: Annotated[str, typer.Argument(help="A record (digest, prefix or name) or a git revision.")],
    b: Annotated[str, typer.Argument(help="The same kind of thing as A.")],
    samples: Annotated[
        bool, typer.Option("--samples", help="List every differing sample of two runs (else one line counts them).")
    ] = False,
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Compare two records field by field, or the registry at two git revisions.

    Two runs start with the line that matters: their primary latencies, the
    ratio b/a and whether it exceeds the noise, or why they are not comparable
    (another workload, GPU, protocol family or statistic). Two revisions give the records added and, per
    comparison group, the new #1, rank changes and runs that became stale.
    A and B are taken as records when both name one (prefix a digest with
    sha256: to insist), else as revisions. Exit 0 when equal, 1 when different,
    3 when either is unknown.
    """
    target, policy, index = _open(registry)
    with index:
        records = _as_record(index, a) and _as_record(index, b)
        if records:
            record_result = _rank.diff_records(index, a, b, policy=policy)
            equal = record_result.equal
            energy_diff = _energy.energy_record_diff(  # energy (issue 31): two energy runs' figures
                index, record_result.before.digest, record_result.after.digest, policy=policy
            )
            if as_json:
                emit_json({**record_result.to_json(), **({"energy": energy_diff} if energy_diff else {})})
            else:
                for line in _render_record_diff(record_result, samples=samples):
                    out(line)
                for line in _energy_views.render_energy_diff(energy_diff) if energy_diff else []:
                    out(line)
        else:
            revisions = {ref: _as_revision(target, ref) for ref in (a, b)}
            if not all(revisions.values()):
                records_known = {ref: _as_record(index, ref) for ref in (a, b)}
                if any(records_known.values()) and any(revisions.values()):
                    raise UsageError(f"{a!r} and {b!r} are not both records nor both revisions")
                unknown = [ref for ref in (a, b) if not revisions[ref] and not records_known[ref]]
                raise NotFoundError(
                    f"{unknown[0]!r} is neither a record of the registry nor a git revision",
                    details=["use a digest (prefix of 8+ hex digits) or a name, or a revision such as HEAD~1"],
                )
            state_result = _rank.diff_revisions(index, a, b, policy=policy)
            equal = state_result.equal
            # energy (issue 31): the energy groups the added or removed runs are in, when any is an energy run
            moved = [d for kind, d, _ in (*state_result.added, *state_result.removed) if kind == "BenchmarkRun"]
            energy_changes: list[dict[str, Any]] = []
            if _energy.touches_energy(index, moved):
                with index.snapshot(a) as before_state, index.snapshot(b) as after_state:
                    energy_changes = _energy.energy_group_changes(before_state, after_state, moved, policy=policy)
            if as_json:
                emit_json({**state_result.to_json(), **({"energyGroups": energy_changes} if energy_changes else {})})
            else:
                for line in _render_state_diff(state_result, a, b):
                    out(line)
                for line in _energy_views.render_energy_changes(energy_changes) if energy_changes else []:
                    out(line)
    if not equal:
        raise typer.Exit(CheckFailed.exit_code)


# --------------------------------------------------------------------------- history


def _render_history(result: History) -> list[str]:
    lines = [_line(f"{result.kind} {result.name}"), f"digest {result.digest}", "", "entered the registry:"]
    rows = [
        [
            day(entry.date),
            entry.commit[:12] if entry.commit else "uncommitted",
            entry.author or "-",
            entry.kind,
            entry.name,
        ]
        for entry in result.entries
    ]
    lines.extend(
        "  " + line for line in table(["date", "commit", "author", "kind", "name"], rows, cut=(4, 2), width=_room(2))
    )
    if result.groups:
        lines.append("")
        lines.append("#1 over time:")
    for group in result.groups:
        lines.append(
            _line(f"  {group.workload_name} on {group.key.gpu} ({group.key.comparability}, {group.key.statistic})")
        )
        lines.append(f"    comparison key {group.key.digest}")
        for change in group.changes:
            commit = change.commit[:12] if change.commit else "uncommitted"
            lines.append(
                _line(f"    {day(change.date)}  {commit:<12}  {change.implementation} {latency(change.latency_ns)}")
            )
            if change.previous_implementation is not None:
                previous = f"{change.previous_implementation} {latency(change.previous_latency_ns)}"
                lines.append(_line(f"{'':30}was {previous}"))
    return lines


@guarded
def history_command(
    target: Annotated[str, typer.Argument(help=f"A definition, implementation or run: {REFERENCE_HELP}.")],
    metric: Annotated[
        str, typer.Option("--metric", help="latency (#1 by latency) or energy (#1 by joules per call, issue 31).")
    ] = "latency",
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """When each related record entered the registry (git: commit, date, author) and how #1 changed.

    For a definition: its workloads, implementations and runs; for an
    implementation: its runs and the groups they are in; for a run: the records
    it names and its group. Exit 3 for an unknown target.
    """
    _energy.check_metric(metric)
    _, policy, index = _open(registry)
    if metric == "energy":  # energy (issue 31)
        with index:
            energy_result = _energy.energy_history(index, target, policy=policy)
        if as_json:
            emit_json(energy_result)
            return
        for line in _energy_views.render_energy_history(energy_result):
            out(line)
        return
    with index:
        result = _rank.history(index, target, policy=policy)
    if as_json:
        emit_json(result.to_json())
        return
    for line in _render_history(result):
        out(line)


# --------------------------------------------------------------------------- cite


def citation_text(cite: Citation) -> str:
    added = f"added in commit {cite.commit[:12]}, {day(cite.committed)}" if cite.commit else "not yet committed"
    measured = ""
    advised = f" Measured by a harness under advisory {', '.join(cite.advisories)}." if cite.advisories else ""
    if cite.kind == "BenchmarkRun":
        figure = f"{cite.statistic} {latency(cite.latency_ns)}" if cite.latency_ns is not None else "no figure"
        who = f"submitted by {', '.join(cite.submitters)}" if cite.submitters else "no valid submission signature"
        measured = f" {cite.gpu or 'unknown GPU'}, {figure}, {who} ({cite.evidence or 'unsigned'})."
    return (
        f'"{cite.title}". KernelIndex {cite.kind} {cite.digest}.{measured} {cite.permalink} '
        f"({added}; accessed {cite.accessed})." + advised
    )


@guarded
def cite(
    digest: Annotated[str, typer.Argument(help=f"The record: {REFERENCE_HELP}.")],
    citation_format: Annotated[str, typer.Option("--format", help="text, bibtex or json.")] = "text",
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """How to cite a record: title, digest, permalink, the commit that added it, the access date.

    The permalink is the policy's permalinkBase followed by the digest. --json
    is --format json. Exit 3 for an unknown record, 2 for an unknown format,
    1 for a record whose file does not match its digest (never cited).
    """
    if citation_format not in ("text", "bibtex", "json"):
        raise UsageError(f"unknown format {citation_format!r}; expected text, bibtex or json")
    if as_json:
        if citation_format not in ("text", "json"):
            raise UsageError(f"--json and --format {citation_format} ask for two formats; give one")
        citation_format = "json"
    _, policy, index = _open(registry)
    with index:
        result = _rank.citation(index, digest, policy=policy, accessed=datetime.now(UTC))
    if citation_format == "json":
        emit_json(result.to_json())
    elif citation_format == "bibtex":
        out(_rank.bibtex(result))
    else:
        for line in textwrap.wrap(citation_text(result), WIDTH, break_long_words=False, break_on_hyphens=False):
            out(line)


def register(app: typer.Typer) -> None:
    app.command()(leaderboard)
    app.command()(floor)
    app.command()(diff)
    app.command("history")(history_command)
    app.command()(cite)
