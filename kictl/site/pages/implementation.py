"""The pages of one implementation and of one GPU."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kictl import render
from kictl.families.gpus import find_gpu
from kictl.site import documents
from kictl.site.html import (
    badge,
    code,
    deflist,
    esc,
    latency,
    link,
    ratio,
    short,
    table,
)
from kictl.site.pages.common import (
    Files,
    _beside,
    _html,
    _impl_link,
    _rel_run,
    definition_path,
    gpu_path,
    group_path,
    implementation_path,
    run_badges,
    run_path,
)
from kictl.site.pages.run import _json_dl, _record_spec_from_file, group_of_run
from kictl.standing import verify_report

if TYPE_CHECKING:
    from kictl.index.facts import DefinitionFacts, ImplementationFacts
    from kictl.site.context import SiteContext

# --------------------------------------------------------------------------- implementation


def render_implementation(ctx: SiteContext, impl: ImplementationFacts) -> Files:
    path = implementation_path(impl.digest)
    report = verify_report(ctx.registry, impl.digest)
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
        peaks = ", ".join(f"{dtype} {render.peak(value, 'FLOP/s')}" for dtype, value in sorted(part.peak_flops.items()))
        body.append(
            deflist(
                [
                    ("vendor", esc(part.vendor)),
                    ("architecture", esc(part.architecture)),
                    ("memory bandwidth", esc(render.peak(part.memory_bandwidth, "B/s"))),
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
