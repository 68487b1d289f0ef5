"""The pages of the site (DESIGN §2): each ``render_*`` returns the files of one page, HTML and JSON.

A renderer lays out what the core computed (``SiteContext`` holds the core's
answers); it never ranks, compares or judges.  Site paths:

* ``index.html``: definitions by family, counts, the latest records, the evidence legend;
* ``d/<name>/``: a definition (a name shared by several Definition records gets ``<name>.<hex12>``);
* ``g/<key hex>/``: a comparison group, ranked in full, with its #1 over time;
* ``r/sha256:<hex>/``: a BenchmarkRun, the path of its permalink (``policy.permalinkBase`` + digest);
* ``i/<hex>/``: an implementation;  ``gpu/<product>/``: a GPU.

A record that fails verification (``kictl verify`` lists failures: a file whose
bytes no longer hash to its name, a broken reference, a bad signature) is
marked "fails verification" wherever it appears, and its run page opens with
the failures; a run without a valid submission signature is marked
"unsigned".
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

from kictl import canon, families
from kictl.errors import KictlError
from kictl.families.gpus import GPUS, find_gpu
from kictl.rank import DEFAULT_EVIDENCE, NO_EVIDENCE, GroupKey, RankedGroup, RankedRow, bibtex, citation, full_axes
from kictl.records import DefinitionSpec
from kictl.render import with_advisories
from kictl.rerun.heldout import with_held_out
from kictl.site import documents
from kictl.site.html import (
    badge,
    code,
    date,
    deflist,
    esc,
    floor_ns,
    latency,
    link,
    page,
    ratio,
    short,
    slug,
    table,
    times,
)

if TYPE_CHECKING:
    from kictl import trust
    from kictl.index import DefinitionFacts, ImplementationFacts, RunFacts
    from kictl.rank import DefinitionBoard
    from kictl.site.context import SiteContext

Files = dict[str, bytes]


def stylesheet() -> bytes:
    return resources.files("kictl.site").joinpath("style.css").read_bytes()


# --------------------------------------------------------------------------- paths


def _hex(digest: str) -> str:
    return digest.removeprefix(canon.DIGEST_PREFIX)


def group_path(key: GroupKey) -> str:
    return f"g/{_hex(key.digest)}/index.html"


def definition_path(ctx: SiteContext, definition: DefinitionFacts) -> str:
    shared = sum(1 for other in ctx.definitions.values() if other.name == definition.name) > 1
    name = slug(definition.name) + (f".{_hex(definition.digest)[:12]}" if shared else "")
    return f"d/{name}/index.html"


def run_path(digest: str) -> str:
    return f"r/{digest}/index.html"


def implementation_path(digest: str) -> str:
    return f"i/{_hex(digest)}/index.html"


def gpu_path(product: str) -> str:
    return f"gpu/{slug(product)}/index.html"


def _beside(path: str, name: str) -> str:
    return path.rsplit("/", 1)[0] + "/" + name if "/" in path else name


def gpu_products(ctx: SiteContext) -> list[str]:
    """Every GPU with a page: the datasheet table's and the registry's products."""
    return sorted({gpu.product for gpu in GPUS} | set(ctx.index.gpu_products()))


# --------------------------------------------------------------------------- shared pieces


def run_badges(ctx: SiteContext, digest: str, *, stale: bool = False) -> str:
    """The evidence level of a run and every warning about it, as badges."""
    level = ctx.evidence.get(digest, NO_EVIDENCE)
    parts = [badge(level, "level-" + level)]
    state = ctx.states.get(digest)
    if state is not None and not state.ok:
        parts.append(badge("fails verification", "bad"))
    if state is not None and not state.submitted and level != "unsigned":
        parts.append(badge("unsigned", "warn"))  # verified or disputed by a rerun, yet nobody submitted it
    summary = ctx.summaries.get(digest)
    if summary is not None and summary.retracted:
        parts.append(badge("retracted", "bad"))
    if stale:
        parts.append(badge("stale", "warn"))
    parts.extend(badge(f"harness advisory {advisory}", "warn") for advisory in ctx.marks.of(digest))
    held_out = ctx.held_out.get(digest)  # issue 32: a verifier's rerun on held-out shapes
    if held_out is not None:
        parts.append(badge(held_out, "ok" if held_out == "generalizes" else "bad"))
    return " ".join(parts)


def _canonical(ctx: SiteContext, path: str) -> str | None:
    if ctx.base_url is None:
        return None
    return ctx.base_url + (path[: -len("index.html")] if path.endswith("index.html") else path)


def _footer(ctx: SiteContext, path: str) -> str:
    """The footer; only the index page names the commit and time of the build (others change with their inputs)."""
    text = (
        "Every number here is what <code>kictl</code> computes from the registry; "
        "the JSON beside each page is the CLI's <code>--json</code> document."
    )
    if path != "index.html":
        return text
    commit = ctx.index.commit
    state = f"commit {code(commit[:12])}" if commit else "an uncommitted registry"
    return f"Built by kictl from {state}, as of {esc(ctx.moment.strftime('%Y-%m-%d %H:%M UTC'))}. " + text


def _html(ctx: SiteContext, path: str, title: str, body: str, **kwargs: Any) -> bytes:
    return page(path, title, body, canonical=_canonical(ctx, path), footer=_footer(ctx, path), **kwargs).encode("utf-8")


def _impl_link(path: str, row_impl: str, label: str) -> str:
    return link(path, implementation_path(row_impl), label)


def _row_cells(ctx: SiteContext, path: str, row: RankedRow, group: RankedGroup) -> list[str]:
    notes = []
    if row.below_floor:
        notes.append(badge("below floor", "bad"))
    if not row.run.committed:
        notes.append("not committed")
    tie = "=" if row.tied or _tied_below(group, row) else ""
    return [
        f'<span class="rank">{row.rank}{tie}</span>',
        _impl_link(path, row.run.implementation, row.implementation_label),
        f'<a href="{esc(_rel_run(path, row.run.digest))}" data-latency-ns="{row.latency_ns}">'
        f"{esc(latency(row.latency_ns))}</a>",
        esc(ratio(row.times_vs_first)),
        esc(ratio(row.speedup_over_reference)),
        run_badges(ctx, row.run.digest, stale=row.stale),
        esc(date(row.run.observed_at)),
        " ".join(notes),
    ]


def _rel_run(path: str, digest: str) -> str:
    from kictl.site.html import rel

    return rel(path, run_path(digest))


def _tied_below(group: RankedGroup, row: RankedRow) -> bool:
    position = group.rows.index(row)
    following = group.rows[position + 1] if position + 1 < len(group.rows) else None
    return following is not None and following.tied and following.rank == row.rank


#: A latency plot draws at most this many implementations (a legend of 40 helps nobody); the tables have all.
PLOTTED_IMPLEMENTATIONS = 10

RANKED_HEADERS = ("rank", "implementation", "latency", "× vs #1", "× ref", "evidence", "observed", "notes")


def ranked_table(ctx: SiteContext, path: str, group: RankedGroup, caption: str) -> str:
    rows = [_row_cells(ctx, path, row, group) for row in group.rows]
    return table(caption, RANKED_HEADERS, rows, numeric=(2, 3, 4), row_header=1)


def _floor_text(group: RankedGroup) -> str:
    if group.floor is None:
        return f"No floor: {esc(group.key.gpu)} is not in the datasheet table."
    estimate = group.floor
    above = group.record_above_floor
    verdict = ""
    if group.rows and group.rows[0].below_floor:
        verdict = " The record is <strong>below</strong> it, which is impossible: check the run."
    elif above is not None:
        verdict = f" The record is {esc(times(above))} above it."
    flops = "no FLOP formula" if estimate.flops is None else f"{estimate.flops:,} FLOP"
    return (
        f"Floor {esc(floor_ns(estimate.floor_ns))} ({esc(estimate.method)}, an estimate, never evidence): "
        f"{estimate.bytes:,} bytes, {esc(flops)}.{verdict}"
    )


def _excluded(group: RankedGroup) -> str:
    words = {
        "notPassed": "not passed",
        "evidence": "below the evidence level",
        "notBest": "not their implementation's best",
        "advisory": "under a harness advisory (policy: drop)",
    }
    left = [f"{count} {words.get(name, name)}" for name, count in sorted(group.excluded.items()) if count]
    return f"<p>Left out of the ranking: {esc(', '.join(left))}.</p>" if left else ""


def _group_title(ctx: SiteContext, key: GroupKey, workload_name: str) -> str:
    workload = ctx.workloads.get(key.workload)
    definition = ctx.definitions.get(workload.definition) if workload else None
    name = definition.name if definition else "?"
    return f"{name} / {workload_name} on {key.gpu}"


def _axes_text(axes: dict[str, int]) -> str:
    return " · ".join(f"{name} = {value}" for name, value in sorted(axes.items()))


# --------------------------------------------------------------------------- comparison group


def render_group(ctx: SiteContext, key: GroupKey) -> Files:
    path = group_path(key)
    group = ctx.ranked_group(key)
    workload = ctx.workloads[key.workload]
    board = ctx.workload_board(workload.definition, workload.digest)
    definition = ctx.definitions[workload.definition]
    members = ctx.groups.get(key, [])
    title = _group_title(ctx, key, workload.name)
    body = [
        deflist(
            [
                ("comparison key", code(key.digest)),
                ("definition", link(path, definition_path(ctx, definition), definition.name)),
                ("workload", f"{esc(workload.name)} ({code(short(workload.digest))})"),
                ("axes", esc(_axes_text(workload.axes))),
                ("GPU", link(path, gpu_path(key.gpu), key.gpu)),
                ("comparability family", esc(key.comparability)),
                ("primary statistic", esc(key.statistic)),
                ("evidence", f"{esc(board.min_evidence)} or better"),
            ]
        )
    ]
    files: Files = {}
    if group is not None:
        body.append(f'<section aria-labelledby="ranked"><h2 id="ranked">Ranked</h2><p>{_floor_text(group)}</p>')
        body.append(ranked_table(ctx, path, group, f"Ranking of {title}") if group.rows else "<p>No ranked run.</p>")
        body.append(
            "<p>= shares its rank: the latencies differ by less than the runs' noise. "
            "× ref: speed-up over the definition's reference.</p>"
        )
        body.append(_excluded(group) + "</section>")
        element = with_held_out(documents.workload_group(board, group), ctx.held_out)  # issue 32: heldOut per row
        files[_beside(path, "leaderboard.json")] = documents.dumps(element)
    result = ctx.history(definition.digest)
    entry = documents.history_group(result, key.digest)
    changes = next((g.changes for g in result.groups if g.key == key), ())
    body.append('<section aria-labelledby="history"><h2 id="history">#1 over time</h2>')
    if changes:
        rows = [
            [
                esc(date(change.date)),
                code(change.commit[:12]) if change.commit else "not committed",
                link(path, run_path(change.run), change.implementation),
                esc(latency(change.latency_ns)),
                esc(change.previous_implementation or "–"),
                esc(latency(change.previous_latency_ns)),
            ]
            for change in changes
        ]
        body.append(
            table(
                f"#1 over time in {title}",
                ["date", "commit", "new #1", "latency", "previous #1", "its latency"],
                rows,
                numeric=(3, 5),
                row_header=0,
            )
        )
    else:
        body.append("<p>No ranked run yet.</p>")
    body.append("</section>")
    all_rows = [
        [
            link(path, run_path(run.digest), short(run.digest)),
            esc(run.implementation_name or short(run.implementation)),
            esc(run.status),
            esc(latency(run.latency_ns)),
            run_badges(ctx, run.digest, stale=ctx.stale(run)),
            esc(date(run.observed_at)),
        ]
        for run in sorted(members, key=lambda r: (r.observed_at, r.digest))
    ]
    body.append('<section aria-labelledby="runs"><h2 id="runs">Every run in this group</h2>')
    body.append(
        table(
            f"Runs of {title}",
            ["run", "implementation", "status", "latency", "evidence", "observed"],
            all_rows,
            numeric=(3,),
        )
    )
    body.append("</section>")
    docs = [("leaderboard.json", "this group in `kictl leaderboard DEF --workload W --json`")] if group else []
    if entry is not None:
        files[_beside(path, "history.json")] = documents.dumps(entry)
        docs.append(("history.json", "this group in `kictl history DEF --json`"))
    crumbs = [(definition_path(ctx, definition), definition.name)]
    files[path] = _html(ctx, path, title, "\n".join(body), crumbs=crumbs, documents=docs)
    return files


# --------------------------------------------------------------------------- definition


def _record_spec(ctx: SiteContext, digest: str) -> dict[str, Any]:
    try:
        spec = ctx.index.load_record(digest).raw.get("spec", {})
    except KictlError:
        return {}
    return spec if isinstance(spec, dict) else {}


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
                f"{estimate.bytes:,}",
                "–" if estimate.flops is None else f"{estimate.flops:,}",
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


def render_definition(ctx: SiteContext, digest: str) -> Files:
    from kictl.site import plots

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
        f"<p>{esc(spec.get('description') or definition.title or '')}</p>",
        deflist(
            [
                ("family", esc(definition.family)),
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
                "–"
                if summary.geomean_speedup is None
                else f"{summary.geomean_speedup:.2f}× ({summary.speedup_workloads})",
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
    from kictl.site.energy import definition_energy  # energy (issue 31): the energy board beside the latency boards

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
            ["workload", "axes", "digest"],
            [[esc(w.name), esc(_axes_text(w.axes)), code(short(w.digest))] for w in board.workloads],
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


# --------------------------------------------------------------------------- run


def _manifest(ctx: SiteContext, report: trust.VerifyReport) -> tuple[dict[str, Any], list[list[str]]]:
    """The canonical manifest ``{digest: record}`` of a run and every record it names, with each digest recomputed."""
    manifest: dict[str, Any] = {}
    rows: list[list[str]] = []
    for digest, kind in report.records:
        entry = ctx.manifest_entries.get(digest) if digest != report.digest else None
        if entry is None:
            relative = ctx.registry.relative(ctx.registry.record_path(kind, digest))
            try:
                raw = canon.parse_json((ctx.registry.root / relative).read_bytes(), source=relative)
                entry = (raw, canon.record_digest(raw))
            except (KictlError, OSError, TypeError, KeyError) as exc:
                entry = str(exc)
            if digest != report.digest:
                ctx.manifest_entries[digest] = entry  # a record that many runs name: read once per build
        if isinstance(entry, str):
            rows.append([esc(kind), code(digest), badge("unreadable", "bad") + " " + esc(entry)])
            continue
        raw, recomputed = entry
        manifest[digest] = raw
        verdict = (
            badge("recomputes", "ok") if recomputed == digest else badge(f"recomputes to {short(recomputed)}", "bad")
        )
        rows.append([esc(kind), code(digest), verdict])
    return manifest, rows


def _json_dl(value: Any) -> str:
    """A small JSON object as nested definition lists (for protocol, environment, integrity)."""
    if isinstance(value, dict):
        return deflist((str(key), _json_dl(item)) for key, item in value.items())
    if isinstance(value, list):
        return esc(
            ", ".join(json.dumps(item, ensure_ascii=False) if not isinstance(item, str) else item for item in value)
        )
    return esc(value if isinstance(value, str) else json.dumps(value))


def _tensor_rows(ctx: SiteContext, run: RunFacts, workload_spec: dict[str, Any]) -> list[list[str]]:
    workload = ctx.workloads.get(run.workload)
    definition = ctx.definitions.get(workload.definition) if workload else None
    if workload is None or definition is None:
        return []
    try:
        spec = ctx.index.load_record(definition.digest).model.spec
        axes = full_axes(ctx.index, definition, workload)
    except KictlError:
        return []
    if not isinstance(spec, DefinitionSpec):
        return []
    rows = []
    inputs = workload_spec.get("inputs") or {}
    for group in ("inputs", "outputs"):
        for name, tensor in getattr(spec, group).items():
            shape = families.tensor_shape(spec, name, axes)
            source = inputs.get(name, {})
            how = source.get("type", "–") if isinstance(source, dict) else "–"
            if how == "blob":
                how = f"blob {short(str(source.get('digest', '')))}"
            rows.append(
                [code(name), esc(group[:-1]), esc(tensor.dtype), esc(list(shape) if shape else "scalar"), esc(how)]
            )
    return rows


def render_run(ctx: SiteContext, run: RunFacts, verify_report: Callable[[str], trust.VerifyReport]) -> Files:
    report = verify_report(run.digest)
    path = run_path(run.digest)
    files: Files = {}
    raw_spec = _record_spec_from_file(ctx, run.digest)
    spec = raw_spec.get("spec", {}) if isinstance(raw_spec, dict) else {}
    workload = ctx.workloads.get(run.workload)
    definition = ctx.definitions.get(workload.definition) if workload else None
    title = f"{run.implementation_name or short(run.implementation)} on {definition.name if definition else '?'}"
    title += f" / {run.workload_name or '?'}, {run.gpu or 'unknown GPU'}"
    body: list[str] = []
    if not report.ok:
        body.append(
            '<div class="alert bad" role="alert"><h2>This record fails verification</h2>'
            "<p>It is shown as found, but it is <strong>not</strong> a plain record: <code>kictl verify</code> reports "
            f"{len(report.failures)} failure(s):</p><ul>"
            + "".join(f"<li>{esc(failure)}</li>" for failure in report.failures)
            + "</ul></div>"
        )
    if not report.trust.submitted:
        body.append(
            '<div class="alert warn" role="note"><h2>Unsigned</h2>'
            "<p>No valid submission signature vouches for this run: "
            "nobody the trust root knows has said they ran it.</p></div>"
        )
    if report.trust.retracted:
        body.append(
            '<div class="alert bad" role="note"><h2>Retracted</h2><p>A valid retraction names this run.</p></div>'
        )
    timing = spec.get("timing") or {}
    statistic = run.statistic or timing.get("primaryStatistic") or "?"
    primary = f"{latency(run.latency_ns)} {statistic}" if run.latency_ns is not None else "no latency"
    body.append(
        f'<p class="primary"><span class="value" data-latency-ns="{run.latency_ns}">{esc(primary)}</span>'
        f" · status {code(run.status)} · {run_badges(ctx, run.digest, stale=ctx.stale(run))}</p>"
    )
    key = group_of_run(run)
    group = ctx.ranked_group(key) if key else None
    row = next((r for r in group.rows if r.run.digest == run.digest), None) if group else None
    if key is None:
        body.append("<p>In no comparison group: its workload, protocol or environment is not in the registry.</p>")
    elif group is not None and row is not None:
        speedup = ""
        if row.speedup_over_reference:
            speedup = f"; {ratio(row.speedup_over_reference)} speed-up over the reference"
        body.append(
            f'<p class="rank-line">Rank <strong>{row.rank}</strong> of {len(group.rows)} in its '
            f"{link(path, group_path(key), 'comparison group')} "
            f"({esc(ratio(row.times_vs_first))} vs #1{esc(speedup)}).</p>"
        )
    else:
        body.append(
            f"<p>Not ranked in its {link(path, group_path(key), 'comparison group')}: "
            "not passed, below the evidence level, or not its implementation's best run.</p>"
        )
    identity = [("digest", code(run.digest)), ("name", esc(run.name))]
    if definition:
        identity.append(("definition", link(path, definition_path(ctx, definition), definition.name)))
    identity.append(
        (
            "implementation",
            link(path, implementation_path(run.implementation), run.implementation_name or run.implementation),
        )
    )
    impl = ctx.index.implementation(run.implementation)
    if impl:
        identity.append(("project · revision", esc(f"{impl.project or '–'} · {impl.revision or '–'}")))
    identity.append(("observed", esc(run.observed_at)))
    if key:
        identity.append(("comparison key", code(key.digest)))
    body.append(deflist(identity))
    workload_spec = _record_spec(ctx, run.workload)
    body.append('<section aria-labelledby="workload"><h2 id="workload">Workload</h2>')
    if workload:
        body.append(f"<p>{esc(workload.name)}: {esc(_axes_text(workload.axes))}</p>")
    tensor_rows = _tensor_rows(ctx, run, workload_spec)
    if tensor_rows:
        body.append(table("Tensors", ["tensor", "role", "dtype", "shape", "input source"], tensor_rows))
    if spec.get("synthesizedInputs"):
        body.append(f"<p>Synthesised from the axes: {esc(', '.join(spec['synthesizedInputs']))}.</p>")
    body.append("</section>")
    body.append('<section aria-labelledby="timing"><h2 id="timing">Timing</h2>')
    stats = timing.get("latencyNs") or {}
    body.append(
        table(
            "Latency statistics",
            ["statistic", "latency"],
            [[esc(name), esc(latency(value))] for name, value in stats.items() if isinstance(value, (int, float))],
            numeric=(1,),
        )
    )
    samples = timing.get("samples")
    count = len(samples) if isinstance(samples, list) else samples
    body.append(f"<p>{esc(count)} sample(s); primary statistic {esc(statistic)}.</p></section>")
    correctness = spec.get("correctness") or {}
    body.append('<section aria-labelledby="correctness"><h2 id="correctness">Correctness</h2>')
    body.append(_json_dl(correctness) if correctness else "<p>No correctness result recorded.</p>")
    if spec.get("integrity"):
        body.append(
            table(
                "Integrity checks",
                ["check", "result", "detail"],
                [
                    [esc(name), esc(item.get("result", "")), esc(item.get("detail", ""))]
                    for name, item in sorted(spec["integrity"].items())
                    if isinstance(item, dict)
                ],
            )
        )
    body.append("</section>")
    for anchor, heading, digest in (
        ("protocol", "Protocol", run.protocol),
        ("environment", "Environment", run.environment),
    ):
        body.append(f'<section aria-labelledby="{anchor}"><h2 id="{anchor}">{heading}</h2>')
        body.append(f"<p>{code(digest)}</p>")
        body.append(_json_dl(_record_spec(ctx, digest)))
        body.append("</section>")
    if spec.get("sourceNative"):
        body.append('<section aria-labelledby="native"><h2 id="native">As the source reported it</h2>')
        body.append(_json_dl(spec["sourceNative"]) + "</section>")
    # attestations, as kictl verify judged them
    body.append('<section aria-labelledby="attestations"><h2 id="attestations">Attestations</h2>')
    if report.attestations:
        rows = []
        for result in report.attestations:
            signers = ", ".join(f"{s.owner} ({s.keyid[:8]})" for s in result.signers) or "–"
            state = badge("valid", "ok") if result.valid else badge("INVALID", "bad")
            says = result.failure or (
                json.dumps(result.attestation.predicate_json, sort_keys=True) if result.attestation else ""
            )
            rows.append(
                [
                    esc(result.predicate_type or "?"),
                    state,
                    esc(signers),
                    esc(
                        result.signed_at.strftime("%Y-%m-%d %H:%M UTC")
                        + ("" if result.committed else " (not committed)")
                    ),
                    esc(result.counts_for or "–"),
                    esc(says),
                ]
            )
        body.append(table("Attestations", ["type", "state", "signed by", "signed", "counts for", "says"], rows))
    else:
        body.append("<p>None.</p>")
    trust_line = report.trust
    body.append(
        f"<p>Evidence {esc(with_advisories(trust_line.level, ctx.marks.of(run.digest)))} · "
        f"{trust_line.community_reruns} community rerun(s) · "
        f"{trust_line.reviews} review(s) · trust root version {esc(report.root_version or '–')}.</p></section>"
    )
    manifest, manifest_rows = _manifest(ctx, report)
    body.append('<section aria-labelledby="manifest-h"><h2 id="manifest-h">Canonical manifest</h2>')
    body.append(
        "<p>The records this run is made of, as <code>{digest: record}</code> (the form <code>kictl add</code> reads). "
        "Each digest is sha256 of the JCS bytes of <code>{apiVersion, kind, spec}</code>; recomputed at build time:</p>"
    )
    body.append(table("Digests recomputed", ["kind", "digest", "check"], manifest_rows, row_header=None))
    manifest_bytes = documents.dumps(manifest)
    files[_beside(path, "manifest.json")] = manifest_bytes
    body.append(
        '<details><summary>Manifest JSON</summary><pre id="manifest"><code>'
        + esc(manifest_bytes.decode("utf-8"))
        + "</code></pre></details></section>"
    )
    cite = citation(ctx.index, run.digest, policy=ctx.policy, accessed=ctx.moment)
    if cite.committed:
        # a static page cannot know when it is read: it gives the day the record entered the registry
        cite = dataclasses.replace(cite, accessed=cite.committed[:10])
    added = f"added in commit {cite.commit[:12]}, {date(cite.committed)}" if cite.commit else "not yet committed"
    text = (
        f'"{cite.title}". KernelIndex {cite.kind} {cite.digest}. {cite.permalink} ({added}; accessed {cite.accessed}).'
    ) + (f" Measured by a harness under advisory {', '.join(cite.advisories)}." if cite.advisories else "")
    body.append('<section aria-labelledby="cite"><h2 id="cite">Cite</h2>')
    body.append(
        deflist(
            [
                ("permalink", f'<a href="{esc(cite.permalink)}">{esc(cite.permalink)}</a>'),
                ("digest", code(cite.digest)),
                ("added", esc(added)),
            ]
        )
    )
    body.append(f'<p id="citation" class="citation">{esc(text)}</p>')
    body.append(f"<details><summary>BibTeX</summary><pre><code>{esc(bibtex(cite))}</code></pre></details></section>")
    files[_beside(path, "show.json")] = documents.dumps(
        documents.show(
            report,
            raw_spec,
            ctx.registry.relative(ctx.registry.record_path("BenchmarkRun", run.digest)),
            ctx.marks.run_json(run.digest),
        )
    )
    files[_beside(path, "verify.json")] = documents.dumps(documents.verify(report, ctx.marks.run_json(run.digest)))
    files[_beside(path, "cite.json")] = documents.dumps(documents.cite(cite))
    docs = [
        ("show.json", f"`kictl show {short(run.digest)} --json`"),
        ("verify.json", f"`kictl verify {short(run.digest)} --json`"),
        ("cite.json", f"`kictl cite {short(run.digest)} --format json`"),
        ("manifest.json", "the canonical manifest"),
    ]
    crumbs = []
    if definition:
        crumbs.append((definition_path(ctx, definition), definition.name))
    if key:
        crumbs.append((group_path(key), f"{run.workload_name} on {run.gpu}"))
    files[path] = _html(ctx, path, title, "\n".join(body), crumbs=crumbs, documents=docs)
    return files


def _record_spec_from_file(ctx: SiteContext, digest: str) -> dict[str, Any]:
    """The record's JSON as its file holds it (a tampered file included), ``{}`` when unreadable."""
    path = ctx.index.path_of(digest)
    if path is None:
        return {}
    try:
        value = canon.parse_json((ctx.registry.root / path).read_bytes(), source=path)
    except (KictlError, OSError):
        return {}
    return value if isinstance(value, dict) else {}


def group_of_run(run: RunFacts) -> GroupKey | None:
    from kictl.rank import group_of

    return group_of(run)


# --------------------------------------------------------------------------- implementation


def render_implementation(ctx: SiteContext, impl: ImplementationFacts) -> Files:
    from kictl import trust

    path = implementation_path(impl.digest)
    report = trust.check_record(ctx.registry, impl.digest)
    raw = _record_spec_from_file(ctx, impl.digest)
    spec = raw.get("spec", {}) if isinstance(raw, dict) else {}
    body: list[str] = []
    if not report.ok:
        body.append(
            '<div class="alert bad" role="alert"><h2>This record fails verification</h2><ul>'
            + "".join(f"<li>{esc(failure)}</li>" for failure in report.failures)
            + "</ul></div>"
        )
    definition = ctx.definitions.get(impl.definition) if impl.definition else None
    items = [
        ("digest", code(impl.digest)),
        ("definition", link(path, definition_path(ctx, definition), definition.name) if definition else "–"),
        ("project", esc(impl.project or "–")),
        ("runtime", esc(impl.runtime)),
        ("entry point", code(spec.get("entryPoint", "–"))),
        ("revision", esc(impl.revision or "–")),
        ("license", esc(spec.get("license") or "–")),
        ("availability", esc(impl.availability or "–")),
        ("dependencies", _json_dl(spec.get("dependencies") or {}) if spec.get("dependencies") else "–"),
        (
            "evidence",
            f"{esc(report.trust.level)}"
            + ("" if report.trust.submitted or report.trust.level == "unsigned" else " · " + badge("unsigned", "warn")),
        ),
    ]
    body.append(deflist(items))
    runs = sorted(
        (r for r in ctx.index.runs_of_implementation(impl.digest) if r.digest not in ctx.reruns),
        key=lambda r: (r.workload_name or "", r.gpu or "", r.digest),
    )
    rows = []
    for run in runs:
        key = group_of_run(run)
        group = ctx.ranked_group(key) if key else None
        row = next((r for r in group.rows if r.run.digest == run.digest), None) if group else None
        rows.append(
            [
                link(path, run_path(run.digest), short(run.digest)),
                link(path, group_path(key), run.workload_name or "?") if key else esc(run.workload_name or "?"),
                esc(run.gpu or "?"),
                esc(run.status),
                esc(latency(run.latency_ns)),
                f"{row.rank} of {len(group.rows)}" if row and group else "–",
                esc(ratio(row.times_vs_first)) if row else "–",
                run_badges(ctx, run.digest, stale=ctx.stale(run)),
            ]
        )
    body.append('<section aria-labelledby="runs"><h2 id="runs">Runs</h2>')
    body.append(
        table(
            f"Runs of {impl.name}",
            ["run", "workload", "GPU", "status", "latency", "rank", "× vs #1", "evidence"],
            rows,
            numeric=(4, 5, 6),
        )
    )
    body.append("</section>")
    sources = spec.get("sources") or []
    body.append('<section aria-labelledby="sources"><h2 id="sources">Sources</h2>')
    for source in sources:
        if not isinstance(source, dict):
            continue
        body.append(
            f"<details><summary>{code(source.get('path'))} · "
            f"sha256 {code(str(source.get('sha256', ''))[:16])}…</summary>"
            f"<pre><code>{esc(source.get('content', ''))}</code></pre></details>"
        )
    body.append("</section>")
    files: Files = {
        _beside(path, "show.json"): documents.dumps(
            documents.show(report, raw, ctx.registry.relative(ctx.registry.record_path("Implementation", impl.digest)))
        )
    }
    crumbs = [(definition_path(ctx, definition), definition.name)] if definition else []
    files[path] = _html(
        ctx,
        path,
        impl.name,
        "\n".join(body),
        crumbs=crumbs,
        documents=[("show.json", f"`kictl show {short(impl.digest)} --json`")],
    )
    return files


# --------------------------------------------------------------------------- GPU


def render_gpu(ctx: SiteContext, product: str) -> Files:
    path = gpu_path(product)
    part = find_gpu(product)
    body: list[str] = []
    if part is not None:
        peaks = ", ".join(f"{dtype} {value / 1e12:,.0f} TFLOP/s" for dtype, value in sorted(part.peak_flops.items()))
        body.append(
            deflist(
                [
                    ("vendor", esc(part.vendor)),
                    ("architecture", esc(part.architecture)),
                    ("memory bandwidth", esc(f"{part.memory_bandwidth / 1e12:g} TB/s")),
                    ("dense peaks", esc(peaks)),
                    ("source", esc(part.source)),
                ]
            )
        )
    else:
        body.append("<p>Not in the datasheet table: no floor is estimated on this GPU.</p>")
    measured: list[tuple[DefinitionFacts, Any]] = []
    waiting: list[DefinitionFacts] = []
    boards_json = []
    for digest, definition in sorted(ctx.definitions.items(), key=lambda item: (item[1].name, item[0])):
        runs = ctx.runs_by_definition.get(digest, [])
        if any(run.gpu == product for run in runs):
            board = ctx.definition_board(digest, product)
            boards_json.append(documents.leaderboard(board))
            measured.append((definition, board))
        else:
            waiting.append(definition)
    for definition, board in measured:
        body.append(f"<h2>{link(path, definition_path(ctx, definition), definition.name)}</h2>")
        for section in board.boards:
            rows = [
                [
                    link(path, group_path(record.group.key), record.group.workload_name),
                    f'<a href="{esc(_rel_run(path, record.leader.run.digest))}">'
                    f"{esc(latency(record.leader.latency_ns))}</a>",
                    _impl_link(path, record.leader.run.implementation, record.leader.implementation_label),
                    run_badges(ctx, record.leader.run.digest, stale=record.leader.stale),
                ]
                for record in section.records
            ]
            body.append(
                table(
                    f"Records of {definition.name} on {product} ({section.comparability}, {section.statistic})",
                    ["workload", "record", "implementation", "evidence"],
                    rows,
                    numeric=(1,),
                )
            )
    if not measured:
        body.append("<p>No measurement on this GPU yet.</p>")
    if waiting:
        body.append(
            "<h2>Challenges</h2><p>Definitions without a run on this GPU:</p><ul class=inline>"
            + "".join(f"<li>{link(path, definition_path(ctx, d), d.name)}</li>" for d in waiting)
            + "</ul>"
        )
    files: Files = {_beside(path, "leaderboard.json"): documents.dumps(boards_json)}
    docs = [("leaderboard.json", f"`kictl leaderboard DEF --gpu '{product}' --json` for each definition measured here")]
    files[path] = _html(ctx, path, product, "\n".join(body), documents=docs)
    return files


# --------------------------------------------------------------------------- index


EVIDENCE_LEGEND = (
    ("unsigned", "level-unsigned", "no valid submission signature: nobody the trust root knows vouches for the run"),
    ("reported", "level-reported", "a submitter key signed it; nobody has rerun it yet"),
    ("verified", "level-verified", "a verifier-role key attests a controlled rerun that agreed within tolerance"),
    ("disputed", "level-disputed", "a verifier's rerun disagreed or failed"),
    (
        "fails verification",
        "bad",
        "kictl verify finds a failure: the file was changed after it was named, "
        "a reference is broken, or a signature is bad",
    ),
    ("retracted", "bad", "a valid retraction names the run"),
    ("stale", "warn", "observed longer ago than the policy's staleness window"),
)


def _best_results(path: str, board: DefinitionBoard) -> str:
    """Per GPU board: the implementation with most records (wins), its share and geometric-mean speed-up."""
    parts = []
    for section in board.boards:
        if not section.implementations:
            continue
        best = section.implementations[0]  # sorted by wins, then speed-up (kictl.rank)
        speedup = "" if best.geomean_speedup is None else f", {best.geomean_speedup:.2f}× the baseline"
        parts.append(
            f"<b>{esc(section.gpu)}</b>: {_impl_link(path, best.digest, best.name)} "
            f"({best.wins} of {len(section.records)} records{esc(speedup)})"
        )
    return "<br>".join(parts) or "no passed run yet"


def render_index(ctx: SiteContext) -> Files:
    path = "index.html"
    counts = ctx.index.counts()
    body = [
        "<p>GPU-kernel benchmark results as signed, content-addressed records: what was measured, on which "
        "machine, by which protocol, and how sure we are. Runs are ranked only against truly comparable runs "
        "(same workload, GPU, protocol family and statistic).</p>",
    ]
    rows_json = []
    by_family: dict[str, list[list[str]]] = {}
    leaders: list[tuple[RankedRow, DefinitionFacts, RankedGroup]] = []
    for digest, definition in sorted(ctx.definitions.items(), key=lambda item: (item[1].family, item[1].name, item[0])):
        runs = ctx.runs_by_definition.get(digest, [])
        stored = len(ctx.index.runs_of_definition(digest))  # as `kictl definitions list` counts: verifiers' reruns too
        board = ctx.definition_board(digest)
        workloads = len(board.workloads)
        gpus = sorted({run.gpu for run in runs if run.gpu and run.status == "passed"})
        records = sum(len(section.records) for section in board.boards)
        by_family.setdefault(definition.family, []).append(
            [
                link(path, definition_path(ctx, definition), definition.name),
                _best_results(path, board),
                str(workloads),
                str(stored),
                str(records),
                esc(", ".join(gpus) or "–"),
            ]
        )
        rows_json.append(
            {
                "name": definition.name,
                "family": definition.family,
                "digest": digest,
                "workloads": workloads,
                "runs": stored,
            }
        )
        for section in board.boards:
            leaders.extend((record.leader, definition, record.group) for record in section.records)
    body.append('<section aria-labelledby="definitions"><h2 id="definitions">Definitions by family</h2>')
    for family, rows in sorted(by_family.items()):
        body.append(f"<h3>{esc(family)}</h3>")
        body.append(
            table(
                f"Definitions of {family}, with the implementation that holds most records on each GPU",
                ["definition", "best results", "workloads", "runs", "records", "GPUs measured"],
                rows,
                numeric=(2, 3, 4),
            )
        )
    body.append("</section>")
    leaders.sort(key=lambda item: (item[0].run.observed_at, item[0].run.digest), reverse=True)
    latest_rows = [
        [
            link(path, run_path(leader.run.digest), date(leader.run.observed_at)),
            link(path, definition_path(ctx, definition), definition.name),
            link(path, group_path(group.key), f"{group.workload_name} on {group.key.gpu}"),
            _impl_link(path, leader.run.implementation, leader.implementation_label),
            esc(latency(leader.latency_ns)),
            run_badges(ctx, leader.run.digest, stale=leader.stale),
        ]
        for leader, definition, group in leaders[:20]
    ]
    body.append('<section aria-labelledby="latest"><h2 id="latest">Latest records</h2>')
    body.append(
        table(
            "The 20 most recently observed current records (#1 of their group)",
            ["observed", "definition", "workload and GPU", "implementation", "latency", "evidence"],
            latest_rows,
            numeric=(4,),
        )
        if latest_rows
        else "<p>No record yet.</p>"
    )
    body.append("</section>")
    body.append('<section aria-labelledby="gpus"><h2 id="gpus">GPUs</h2><ul class=inline>')
    body.extend(f"<li>{link(path, gpu_path(product), product)}</li>" for product in gpu_products(ctx))
    body.append("</ul></section>")
    body.append(
        '<section aria-labelledby="legend"><h2 id="legend">Evidence legend</h2>'
        "<p>Evidence is computed from signed attestations, never declared. Rankings show runs of level "
        f"{esc(DEFAULT_EVIDENCE)} or better; an unsigned run ranks below a signed one it ties with.</p><dl>"
    )
    body.extend(f"<dt>{badge(label, kind)}</dt><dd>{esc(text)}</dd>" for label, kind, text in EVIDENCE_LEGEND)
    body.append("</dl></section>")
    body.append('<section aria-labelledby="counts"><h2 id="counts">Records in the registry</h2>')
    body.append(
        table(
            "Records in the registry",
            ["kind", "records"],
            [[esc(kind), str(count)] for kind, count in sorted(counts.items())],
            numeric=(1,),
        )
    )
    body.append("</section>")
    files: Files = {"index.json": documents.dumps(rows_json)}
    files[path] = _html(
        ctx, path, "KernelIndex", "\n".join(body), documents=[("index.json", "`kictl definitions list --json`")]
    )
    return files
