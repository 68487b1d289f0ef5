"""The front page: the definitions and their best results first, then counts and the latest records."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kictl import render
from kictl.definitions import definition_rows, placement, read_catalogue
from kictl.errors import KictlError
from kictl.rank import DEFAULT_EVIDENCE, RankedGroup, RankedRow
from kictl.records import DefinitionSpec
from kictl.site import documents
from kictl.site.html import (
    badge,
    code,
    date,
    esc,
    latency,
    link,
    table,
)
from kictl.site.pages.common import (
    Files,
    _html,
    _impl_link,
    definition_path,
    families_nav,
    family_anchor,
    gpu_path,
    gpu_products,
    group_path,
    run_badges,
    run_path,
)

if TYPE_CHECKING:
    from kictl.definitions import Placement
    from kictl.index.facts import DefinitionFacts
    from kictl.rank import DefinitionBoard
    from kictl.site.context import SiteContext

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
        speedup = "" if best.geomean_speedup is None else f", {render.ratio(best.geomean_speedup)} the baseline"
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
    body.append(families_nav(ctx, path))
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
        where = _placement(ctx, digest)
        by_family.setdefault(definition.family, []).append(
            [
                link(path, definition_path(ctx, definition), definition.name),
                _best_results(path, board),
                str(workloads),
                str(stored),
                str(records),
                esc(", ".join(gpus) or "–"),
                "–" if where is None else f'<span title="{esc(where.reason)}">{esc(where.label)}</span>',
            ]
        )
        rows_json.append(
            {
                "name": definition.name,
                "family": definition.family,
                "digest": digest,
                "workloads": workloads,
                "runs": stored,
                "runsOn": None if where is None else where.needs,
                "runsOnReason": None if where is None else where.reason,
            }
        )
        for section in board.boards:
            leaders.extend((record.leader, definition, record.group) for record in section.records)
    unrepresented = _unrepresented(ctx)
    rows_json.extend(unrepresented)
    body.append('<section aria-labelledby="definitions"><h2 id="definitions">Definitions by family</h2>')
    for family, rows in sorted(by_family.items()):
        plural = "s" if len(rows) != 1 else ""
        body.append(f'<h3 id="{family_anchor(family)}">{esc(family)} ({len(rows)} definition{plural})</h3>')
        body.append(
            table(
                f"Definitions of {family}, with the implementation that holds most records on each GPU",
                ["definition", "best results", "workloads", "runs", "records", "GPUs measured", "runs on"],
                rows,
                numeric=(2, 3, 4),
            )
        )
    if unrepresented:
        body.append("<h3>Not represented</h3><p>Definitions of the catalogue's source that kictl cannot represent "
                    "faithfully (definitions/catalogue.json):</p><ul>")  # fmt: skip
        body.extend(f"<li>{code(str(row['name']))}: {esc(str(row['reason']))}</li>" for row in unrepresented)
        body.append("</ul>")
    body.append(
        "<p>“Runs on” is where the definition's source baseline (the kernel its <code>fi_api</code> tag names) "
        "runs; every reference is plain PyTorch and runs anywhere. The rule is in docs/importing.md.</p>"
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


def _placement(ctx: SiteContext, digest: str) -> Placement | None:
    """Where the definition's source baseline runs (kictl.definitions.placement); None when unreadable."""

    try:
        spec = ctx.index.load_record(digest).model.spec
    except KictlError:
        return None
    return placement(spec) if isinstance(spec, DefinitionSpec) else None


def _unrepresented(ctx: SiteContext) -> list[dict[str, Any]]:
    """The catalogue's unrepresented definitions as `kictl definitions list --json` rows (digest null)."""
    try:
        manifest = read_catalogue(ctx.registry.root)
    except KictlError:
        return []
    return definition_rows([], {}, {}, manifest)
