"""Commands that compare records over time: ``diff``, ``history``, ``cite``.

Like ``kictl.cli.rank``, each opens the registry's query index, calls one function of ``kictl.rank`` and
renders its result as text or, with ``--json``, one JSON document.  Unknown names exit 3 with the closest known
names; an option value outside its fixed set exits 2.
"""

from __future__ import annotations

import json
import re
import textwrap
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kictl import render
from kictl.cli._common import (
    REFERENCE_HELP,
    JsonOption,
    RegistryOption,
    emit_json,
    guarded,
    out,
    short,
    table,
)
from kictl.cli.energy_views import render_energy_changes, render_energy_diff, render_energy_history
from kictl.cli.rank import _line, _open, _room  # the boards' text helpers and index opening, shared
from kictl.errors import CheckFailed, NotFoundError, UsageError
from kictl.rank.citation import bibtex, citation
from kictl.rank.diffs import diff_records, diff_revisions
from kictl.rank.energy import check_metric, energy_group_changes, energy_history, energy_record_diff, touches_energy
from kictl.rank.history import history
from kictl.render import date as day
from kictl.render import fit, latency

if TYPE_CHECKING:
    from kictl.index.query import QueryIndex
    from kictl.rank import Citation, History
    from kictl.rank.diffs import RecordDiff, StateDiff
    from kictl.store.registry import Registry

WIDTH = render.WIDTH


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
    for side, record in (("a", result.before), ("b", result.after)):  # the whole name, under its digest
        lines += [f"{side}  {record.digest}", _line(f"   {record.kind} {record.name}")]
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


def _by_kind_and_name(item: tuple[str, str, str]) -> tuple[int, str, str]:
    kind, digest, name = item
    order = ("Definition", "Workload", "Implementation", "BenchmarkProtocol", "ExecutionEnvironment", "BenchmarkRun")
    return (order.index(kind) if kind in order else len(order), name, digest)


def _by_new_rank(rank: Any) -> tuple[int, int, str]:
    """Rank changes as the board reads after the change: #1 first, then who left it (by their old rank)."""
    after = rank.after_rank if rank.after_rank is not None else 1_000_000
    before = rank.before_rank if rank.before_rank is not None else 1_000_000
    return (after, before, rank.name)


def _render_state_diff(result: StateDiff, before: str, after: str) -> list[str]:
    lines = [
        f"{before} ({result.before[:12]}) → {after} ({result.after[:12]}): "
        f"{len(result.added)} record(s) added, {len(result.removed)} removed"
    ]
    for title, items in (("added", result.added), ("removed", result.removed)):
        if items:  # by kind, then name: what a reader looks for (the digest's first 12 digits beside it)
            lines.append(f"{title}:")
            rows = [[kind, name, short(digest)] for kind, digest, name in sorted(items, key=_by_kind_and_name)]
            lines.extend("  " + line for line in table(["kind", "name", "digest"], rows, cut=(1,), width=_room(2)))
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
        for rank in sorted(change.rank_changes, key=_by_new_rank):
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
            record_result = diff_records(index, a, b, policy=policy)
            equal = record_result.equal
            energy_diff = energy_record_diff(  # energy (issue 31): two energy runs' figures
                index, record_result.before.digest, record_result.after.digest, policy=policy
            )
            if as_json:
                emit_json({**record_result.to_json(), **({"energy": energy_diff} if energy_diff else {})})
            else:
                for line in _render_record_diff(record_result, samples=samples):
                    out(line)
                for line in render_energy_diff(energy_diff) if energy_diff else []:
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
            state_result = diff_revisions(index, a, b, policy=policy)
            equal = state_result.equal
            # energy (issue 31): the energy groups the added or removed runs are in, when any is an energy run
            moved = [d for kind, d, _ in (*state_result.added, *state_result.removed) if kind == "BenchmarkRun"]
            energy_changes: list[dict[str, Any]] = []
            if touches_energy(index, moved):
                with index.snapshot(a) as before_state, index.snapshot(b) as after_state:
                    energy_changes = energy_group_changes(before_state, after_state, moved, policy=policy)
            if as_json:
                emit_json({**state_result.to_json(), **({"energyGroups": energy_changes} if energy_changes else {})})
            else:
                for line in _render_state_diff(state_result, a, b):
                    out(line)
                for line in render_energy_changes(energy_changes) if energy_changes else []:
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
    check_metric(metric)
    _, policy, index = _open(registry)
    if metric == "energy":  # energy (issue 31)
        with index:
            energy_result = energy_history(index, target, policy=policy)
        if as_json:
            emit_json(energy_result)
            return
        for line in render_energy_history(energy_result):
            out(line)
        return
    with index:
        result = history(index, target, policy=policy)
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
        f'"{cite.title}". KernelIndex {cite.kind} {cite.digest}.{measured} {cite.where} '
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

    The permalink is the policy's permalinkBase followed by the digest; a registry without one
    (kictl init's default) is cited by its location (origin remote, else folder) and the record's file. --json
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
        result = citation(index, digest, policy=policy, accessed=datetime.now(UTC))
    if citation_format == "json":
        emit_json(result.to_json())
    elif citation_format == "bibtex":
        out(bibtex(result))
    else:
        for line in textwrap.wrap(citation_text(result), WIDTH, break_long_words=False, break_on_hyphens=False):
            out(line)


def register(app: typer.Typer) -> None:
    app.command()(diff)
    app.command("history")(history_command)
    app.command()(cite)
