"""The page of one comparison group: ranked in full, with its #1 over time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kictl.rank import GroupKey
from kictl.site import documents
from kictl.site.html import (
    code,
    date,
    deflist,
    esc,
    latency,
    link,
    short,
    table,
)
from kictl.site.pages.common import (
    Files,
    _axes_text,
    _beside,
    _excluded,
    _floor_text,
    _group_title,
    _html,
    definition_path,
    gpu_path,
    group_path,
    ranked_table,
    run_badges,
    run_path,
)
from kictl.site.pages.definition import _workload_origin
from kictl.standing import with_held_out

if TYPE_CHECKING:
    from kictl.site.context import SiteContext

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
                ("inputs", _workload_origin(ctx, workload.digest)),
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
