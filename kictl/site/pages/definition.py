"""The page of one definition: its semantics, floors, workloads and boards."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kictl import render
from kictl.definitions import placement, workload_origin
from kictl.errors import KictlError
from kictl.families.gpus import find_gpu
from kictl.importers.flashinfer_bench.catalogue import LABEL_COMMIT, LABEL_PATH, LABEL_SOURCE
from kictl.records import DefinitionSpec
from kictl.site import documents, html, plots
from kictl.site.energy import definition_energy
from kictl.site.html import (
    code,
    deflist,
    esc,
    floor_ns,
    latency,
    link,
    short,
    slug,
    table,
    times,
)
from kictl.site.pages.common import (
    PLOTTED_IMPLEMENTATIONS,
    Files,
    _axes_text,
    _beside,
    _html,
    _impl_link,
    _rel_run,
    definition_path,
    families_nav,
    gpu_path,
    group_path,
    implementation_path,
    ranked_table,
    run_badges,
    run_path,
)

if TYPE_CHECKING:
    from kictl.index.facts import DefinitionFacts, RunFacts
    from kictl.rank import DefinitionBoard
    from kictl.site.context import SiteContext

# --------------------------------------------------------------------------- definition


def _record_spec(ctx: SiteContext, digest: str) -> dict[str, Any]:
    try:
        spec = ctx.index.load_record(digest).raw.get("spec", {})
    except KictlError:
        return {}
    return spec if isinstance(spec, dict) else {}


def _record_labels(ctx: SiteContext, digest: str) -> dict[str, Any]:
    try:
        metadata = ctx.index.load_record(digest).raw.get("metadata", {})
    except KictlError:
        return {}
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    return labels if isinstance(labels, dict) else {}


def _runs_on(ctx: SiteContext, digest: str) -> str:
    try:
        spec = ctx.index.load_record(digest).model.spec
    except KictlError:
        return "–"
    if not isinstance(spec, DefinitionSpec):
        return "–"
    where = placement(spec)
    return f"{esc(where.label)}: {esc(where.reason)} (the source baseline; the reference runs anywhere)"


def _provenance(labels: dict[str, Any]) -> str:
    if LABEL_SOURCE not in labels:
        return "written in this registry"
    commit = str(labels.get(LABEL_COMMIT, ""))
    path = str(labels.get(LABEL_PATH, ""))
    return f"{esc(labels[LABEL_SOURCE])} at {code(commit[:12] or '?')}" + (f", {code(path)}" if path else "")


def _workload_origin(ctx: SiteContext, digest: str) -> str:
    """Where a workload's inputs come from (kictl.definitions.workload_origin), read from its file's JSON.

    The file is read as plain JSON, not validated again: the index validated it, and a page of 40
    workloads would otherwise spend most of its time in pydantic (1,600 workloads in the catalogue).
    """

    try:
        raw = json.loads(ctx.registry.record_path("Workload", digest).read_bytes())
    except (OSError, ValueError):
        return "–"
    origin = workload_origin(raw) if isinstance(raw, dict) else None
    return "captured or written here" if origin is None else esc(origin)


def _semantics(spec: dict[str, Any]) -> str:
    parts = []
    axes = spec.get("axes") or {}
    axis_rows = [
        [code(name), esc(axis.get("type")), esc(axis.get("value", "varies by workload"))]
        for name, axis in axes.items()
        if isinstance(axis, dict)
    ]
    parts.append(table("Axes", ["axis", "type", "value"], axis_rows))
    tensor_rows = []
    for group in ("inputs", "outputs"):
        for name, tensor in (spec.get(group) or {}).items():
            shape = tensor.get("shape")
            shape_text = "scalar" if shape is None else "[" + ", ".join(shape) + "]"
            tensor_rows.append([code(name), esc(group[:-1]), esc(tensor.get("dtype")), esc(shape_text)])
    parts.append(table("Inputs and outputs", ["tensor", "role", "dtype", "shape"], tensor_rows))
    constraints = spec.get("constraints") or []
    if constraints:
        parts.append("<h3>Constraints</h3><ul>" + "".join(f"<li>{code(c)}</li>" for c in constraints) + "</ul>")
    parts.append(f"<p>Determinism: {esc(spec.get('determinism') or 'not stated')}.</p>")
    reference = spec.get("reference")
    if reference:
        parts.append(
            "<details><summary>Reference implementation (embedded in the record, covered by its digest)</summary>"
            f"<pre><code>{esc(reference)}</code></pre></details>"
        )
    return "\n".join(parts)


def _floor_section(
    ctx: SiteContext, path: str, definition: DefinitionFacts, board_gpus: Sequence[str]
) -> tuple[str, Files, list[tuple[str, str]]]:
    """The floor per workload on each measured datasheet GPU: HTML, the JSON files, their descriptions."""
    parts = [
        '<section aria-labelledby="floor"><h2 id="floor">Physical floor</h2>',
        "<p>An estimate, never evidence (DESIGN §6): the bytes that must cross memory (every input read once, "
        "every output written once) over the datasheet bandwidth, and, where the family has a FLOP formula, "
        "the FLOPs over the datasheet dense peak; the larger is the floor: "
        "<code>floor = max(bytes ÷ bandwidth, FLOPs ÷ peak)</code>.</p>",
    ]
    files: Files = {}
    documents_list: list[tuple[str, str]] = []
    for gpu in board_gpus:
        if find_gpu(gpu) is None:
            parts.append(f"<p>{esc(gpu)}: not in the datasheet table, no floor.</p>")
            continue
        estimates = ctx.floors(definition.digest, gpu)
        if isinstance(estimates, str):
            parts.append(f"<p>{esc(gpu)}: the floor cannot be estimated: {esc(estimates)}</p>")
            continue
        name = f"floor.{slug(gpu)}.json"
        files[_beside(path, name)] = documents.dumps(documents.floor(estimates))
        documents_list.append((name, f"`kictl floor {definition.name} --gpu '{gpu}' --json`"))
        rows = [
            [
                esc(estimate.workload_name),
                render.count(estimate.bytes),
                "–" if estimate.flops is None else render.count(estimate.flops),
                esc(floor_ns(estimate.bandwidth_bound_ns)),
                esc(floor_ns(estimate.compute_bound_ns)),
                esc(floor_ns(estimate.floor_ns)),
                esc(estimate.bound),
            ]
            for estimate in estimates
        ]
        parts.append(f"<h3>On {esc(gpu)}</h3>")
        parts.append(
            table(
                f"Floor of {definition.name} on {gpu}",
                ["workload", "bytes", "FLOPs", "bandwidth bound", "compute bound", "floor", "bound"],
                rows,
                numeric=(1, 2, 3, 4, 5),
            )
        )
        synthesized = sorted({name for estimate in estimates for name in estimate.synthesized})
        if synthesized:
            parts.append(f"<p>{esc(', '.join(synthesized))} synthesised from the axes where no blob is given.</p>")
        sources = sorted({source for estimate in estimates for source in estimate.sources})
        if sources:
            parts.append(
                "<p>Figures and their sources:</p><ul>" + "".join(f"<li>{esc(s)}</li>" for s in sources) + "</ul>"
            )
    parts.append("</section>")
    return "\n".join(parts), files, documents_list


def _per_gpu(ctx: SiteContext, board: DefinitionBoard, runs: Sequence[RunFacts]) -> str:
    """Per GPU product this registry holds passed runs on: this definition's boards there (linked), or that it is
    not measured there (and how many of its runs there failed), or how many passed runs of it there no board holds."""
    items = []
    for gpu in ctx.measured_gpus():
        sections = [(number, section) for number, section in enumerate(board.boards) if section.gpu == gpu]
        if sections:
            parts = [
                f'<a href="#board-{number + 1}">{esc(section.comparability)}</a>: records on '
                f"{len(section.records)} of {len(board.workloads)} workloads"
                for number, section in sections
            ]
            items.append(f"<li><strong>{esc(gpu)}</strong>: {'; '.join(parts)}</li>")
            continue
        tried = [run for run in runs if run.gpu == gpu]
        shown_not = [run for run in tried if run.status == "passed"]
        if shown_not:  # measured, but no run of it is one this page ranks (its evidence, a defect)
            text = (
                f"{len(shown_not)} passed run(s), none on a board here (evidence shown: {board.min_evidence} or better)"
            )
        else:
            text = f"not measured on {gpu}" + (f" ({len(tried)} run(s), none passed)" if tried else "")
        items.append(f"<li><strong>{esc(gpu)}</strong>: {esc(text)}</li>")
    if not items:
        return ""
    return (
        '<section aria-labelledby="per-gpu"><h2 id="per-gpu">Per GPU</h2>'
        "<p>Every GPU product this registry holds passed runs on, with this definition's boards there.</p>"
        f"<ul>{''.join(items)}</ul></section>"
    )


def render_definition(ctx: SiteContext, digest: str) -> Files:
    definition = ctx.definitions[digest]
    path = definition_path(ctx, definition)
    board = ctx.definition_board(digest)
    spec = _record_spec(ctx, digest)
    runs = ctx.runs_by_definition.get(digest, [])
    passed = [run for run in runs if run.status == "passed"]
    files: Files = {_beside(path, "leaderboard.json"): documents.dumps(documents.leaderboard(board))}
    docs: list[tuple[str, str]] = [("leaderboard.json", f"`kictl leaderboard {definition.name} --json`")]
    tags = [tag for tag in spec.get("tags") or [] if isinstance(tag, str)]
    body = [
        families_nav(ctx, path),
        f"<p>{esc(spec.get('description') or definition.title or '')}</p>",
        deflist(
            [
                ("family", esc(definition.family)),
                ("runs on", _runs_on(ctx, digest)),
                ("source", _provenance(_record_labels(ctx, digest))),
                ("alias", code(definition.name)),
                ("digest", code(definition.digest)),
                ("model", esc(", ".join(t.removeprefix("model:") for t in tags if t.startswith("model:")) or "–")),
                ("tags", esc(", ".join(tags) or "–")),
                ("workloads", str(len(board.workloads))),
                ("eligible runs", f"{len(passed)} passed of {len(runs)}"),
                ("evidence shown", f"{esc(board.min_evidence)} or better"),
                (
                    "baseline",
                    "none" if board.baseline is None else esc(f"{board.baseline.name} ({board.baseline.source})"),
                ),
            ]
        ),
    ]
    body.append(_per_gpu(ctx, board, runs))
    board_gpus: list[str] = []
    for number, section in enumerate(board.boards):
        if section.gpu not in board_gpus:
            board_gpus.append(section.gpu)
        label = f"{section.gpu} · {section.comparability} · {section.statistic}"
        anchor = f"board-{number + 1}"
        body.append(f'<section aria-labelledby="{anchor}"><h2 id="{anchor}">{esc(label)}</h2>')
        body.append(f"<p>Records on {len(section.records)} of {len(board.workloads)} workloads.</p>")
        rows = []
        for record in section.records:
            leader = record.leader
            tied = len(record.group.first()) - 1
            holder = _impl_link(path, leader.run.implementation, leader.implementation_label)
            if tied:
                holder += f" (+{tied} tied)"
            baseline = "–" if record.baseline_unbeaten is None else "unbeaten" if record.baseline_unbeaten else "beaten"
            vs_floor = "–"
            if record.group.record_above_floor is not None:
                vs_floor = "below floor" if leader.below_floor else times(record.group.record_above_floor)
            rows.append(
                [
                    link(path, group_path(record.group.key), record.group.workload_name),
                    f'<a href="{esc(_rel_run(path, leader.run.digest))}" data-latency-ns="{leader.latency_ns}">'
                    f"{esc(latency(leader.latency_ns))}</a>",
                    holder,
                    run_badges(ctx, leader.run.digest, stale=leader.stale),
                    esc(baseline),
                    esc(vs_floor),
                ]
            )
        body.append(
            table(
                f"Records on {label}",
                ["workload", "record", "implementation", "evidence", "baseline", "record ÷ floor"],
                rows,
                numeric=(1, 5),
                table_id=f"records-{number + 1}",
            )
        )
        summary_rows = [
            [
                _impl_link(path, summary.digest, summary.name),
                f"{summary.covered}/{summary.workloads}",
                str(summary.wins),
                html.speedup(summary.geomean_speedup, summary.speedup_workloads),
            ]
            for summary in section.implementations
        ]
        body.append(
            table(
                f"Implementations on {label}",
                ["implementation", "covered", "wins", "geomean vs baseline (workloads)"],
                summary_rows,
                numeric=(1, 2, 3),
            )
        )
        # plots: latency per implementation across workloads, and the record beside the floor
        names = [record.group.workload_name for record in section.records]
        # the leading implementations (the board's own order: wins, then speed-up); all of them are in the tables
        plotted = section.implementations[:PLOTTED_IMPLEMENTATIONS]
        latencies: dict[str, dict[str, float]] = {}
        for record in section.records:
            for row in record.group.rows:
                latencies.setdefault(row.run.implementation, {})[record.group.workload_name] = row.latency_ns
        series = [
            plots.Series(summary.name, tuple(latencies.get(summary.digest, {}).get(name) for name in names))
            for summary in plotted
        ]
        left_out = len(section.implementations) - len(plotted)
        plot_name = f"latency.{number + 1}.svg"
        files[_beside(path, plot_name)] = plots.latency_plot(f"{definition.name} on {label}", names, series)
        fastest = min(section.records, key=lambda r: r.leader.latency_ns, default=None)
        alt = (
            f"Line plot, log scale: latency of {len(series)} implementations across {len(names)} workloads on "
            f"{section.gpu}"
            + (f" (the {len(series)} with most wins; {left_out} more are in the tables)" if left_out else "")
            + "; the numbers are in the ranked lists below."
            + (
                f" Fastest record: {fastest.leader.implementation_label} at {latency(fastest.leader.latency_ns)} "
                f"on {fastest.group.workload_name}."
                if fastest
                else ""
            )
        )
        body.append(
            f'<figure><img src="{esc(plot_name)}" alt="{esc(alt)}" width="800" loading="lazy">'
            f"<figcaption>Latency of {'the leading' if left_out else 'each'} implementation"
            f"{'s' if left_out else ''} per workload on {esc(label)} (log scale).</figcaption></figure>"
        )
        floor_values = [record.group.floor.floor_ns if record.group.floor else None for record in section.records]
        if any(value is not None for value in floor_values):
            floor_name = f"floor.{number + 1}.svg"
            files[_beside(path, floor_name)] = plots.floor_plot(
                f"{definition.name}: record vs floor on {section.gpu}",
                names,
                [record.leader.latency_ns for record in section.records],
                floor_values,
            )
            above = [r.group.record_above_floor for r in section.records if r.group.record_above_floor is not None]
            alt_floor = (
                f"Bar chart, log scale: each workload's record beside its estimated floor on {section.gpu}; "
                f"records are between {times(min(above))} and {times(max(above))} above their floors; "
                "the ratios are in the records table above."
            )
            body.append(
                f'<figure><img src="{esc(floor_name)}" alt="{esc(alt_floor)}" width="800" loading="lazy">'
                f"<figcaption>Achieved (record) vs floor per workload on {esc(section.gpu)}.</figcaption></figure>"
            )
        body.append(f'<h3 id="ranked-{number + 1}">Ranked lists</h3>')
        for record in section.records:
            group = record.group
            body.append(
                f"<details{' open' if len(section.records) <= 12 else ''}><summary>"
                f"{esc(group.workload_name)}: {len(group.rows)} ranked</summary>"
                f"{ranked_table(ctx, path, group, f'Ranking of {group.workload_name} on {label}')}"
                f"<p>{link(path, group_path(group.key), 'Group page')} · "
                f"comparison key {code(short(group.key.digest, 16))}</p>"
                "</details>"
            )
        body.append("</section>")
    if not board.boards:
        body.append("<p>No passed run yet.</p>")

    energy_html, energy_files, energy_docs = definition_energy(ctx, path, definition, _rel_run)
    if energy_html:
        body.append(energy_html)
        files.update(energy_files)
        docs.extend(energy_docs)
    floor_html, floor_files, floor_docs = _floor_section(ctx, path, definition, board_gpus)
    docs.extend(floor_docs)
    files.update(floor_files)
    body.append(floor_html)
    # implementations
    impl_rows = []
    for impl in ctx.index.implementations(digest):
        mine = [run for run in runs if run.implementation == impl.digest and run.status == "passed" and run.latency_ns]
        best = min(mine, key=lambda run: (run.latency_ns or 0, run.digest), default=None)
        impl_rows.append(
            [
                link(path, implementation_path(impl.digest), impl.name),
                esc(impl.runtime),
                esc(impl.availability or "–"),
                esc(impl.project or "–"),
                "–"
                if best is None
                else link(
                    path, run_path(best.digest), f"{latency(best.latency_ns)} ({best.workload_name}, {best.gpu})"
                ),
                run_badges(ctx, best.digest) if best else "–",
            ]
        )
    body.append('<section aria-labelledby="impls"><h2 id="impls">Implementations</h2>')
    body.append(
        table(
            f"Implementations of {definition.name}",
            ["implementation", "runtime", "availability", "project", "best latency", "its evidence"],
            impl_rows,
        )
    )
    body.append("</section>")
    body.append('<section aria-labelledby="semantics"><h2 id="semantics">Semantics</h2>')
    body.append(_semantics(spec))
    body.append("</section>")
    body.append('<section aria-labelledby="workloads"><h2 id="workloads">Workloads</h2>')
    body.append(
        table(
            f"Workloads of {definition.name}",
            ["workload", "axes", "inputs", "digest"],
            [
                [esc(w.name), esc(_axes_text(w.axes)), _workload_origin(ctx, w.digest), code(short(w.digest))]
                for w in board.workloads
            ],
        )
    )
    body.append("</section>")
    body.append('<section aria-labelledby="challenges"><h2 id="challenges">Challenges</h2>')
    if board.challenges:
        body.append(
            "<p>GPUs without a passed measurement yet:</p><ul class=inline>"
            + "".join(f"<li>{link(path, gpu_path(gpu), gpu)}</li>" for gpu in board.challenges)
            + "</ul>"
        )
    else:
        body.append("<p>Every known GPU has a measurement.</p>")
    if board.unranked:
        body.append(f"<p>{board.unranked} run(s) name a workload, protocol or environment not in the registry.</p>")
    body.append("</section>")
    result = ctx.history(digest)
    files[_beside(path, "history.json")] = documents.dumps(documents.history(result))
    docs.append(("history.json", f"`kictl history {definition.name} --json`"))
    files[path] = _html(ctx, path, definition.name, "\n".join(body), documents=docs)
    return files
