"""What every page shares: site paths, badges, the ranked table and the page frame."""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING, Any

from kictl import canon, render
from kictl.families.gpus import GPUS
from kictl.rank import NO_EVIDENCE, GroupKey, RankedGroup, RankedRow
from kictl.site.html import (
    badge,
    code,
    date,
    esc,
    floor_ns,
    latency,
    link,
    page,
    ratio,
    rel,
    slug,
    table,
    times,
)

if TYPE_CHECKING:
    from kictl.index.facts import DefinitionFacts
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
    flops = "no FLOP formula" if estimate.flops is None else f"{render.count(estimate.flops)} FLOP"
    return (
        f"Floor {esc(floor_ns(estimate.floor_ns))} ({esc(estimate.method)}, an estimate, never evidence): "
        f"{render.count(estimate.bytes)} bytes, {esc(flops)}.{verdict}"
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


# --------------------------------------------------------------------------- families (issue 42)


def family_anchor(family: str) -> str:
    """The id of a family's heading on the front page."""
    return f"family-{slug(family)}"


def family_counts(ctx: SiteContext) -> dict[str, tuple[int, int]]:
    """Per family: (definitions, workloads), as the registry holds them."""
    workloads: dict[str, int] = {}
    for workload in ctx.workloads.values():
        workloads[workload.definition] = workloads.get(workload.definition, 0) + 1
    counts: dict[str, tuple[int, int]] = {}
    for digest, definition in ctx.definitions.items():
        defs, loads = counts.get(definition.family, (0, 0))
        counts[definition.family] = (defs + 1, loads + workloads.get(digest, 0))
    return dict(sorted(counts.items()))


def families_nav(ctx: SiteContext, path: str) -> str:
    """The families with their counts, each linked to its section of the front page."""
    items = [
        f'<li><a href="{esc(_rel_index(path))}#{family_anchor(family)}">{esc(family)}</a> '
        f"({defs} definition{'s' if defs != 1 else ''}, {loads} workloads)</li>"
        for family, (defs, loads) in family_counts(ctx).items()
    ]
    return (
        f'<nav aria-label="Families"><p>{len(ctx.definitions)} definitions in {len(items)} families:</p>'
        f"<ul class=inline>{''.join(items)}</ul></nav>"
    )


def _rel_index(path: str) -> str:
    return rel(path, "index.html")
