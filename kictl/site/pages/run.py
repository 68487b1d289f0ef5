"""The page of one BenchmarkRun: its figures, evidence, tensors and the records it names."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kictl import canon, families
from kictl.bench.worker.timing import summarize
from kictl.errors import KictlError
from kictl.rank import GroupKey, bibtex, citation, full_axes, group_of
from kictl.records import DefinitionSpec
from kictl.render import with_advisories
from kictl.site import documents
from kictl.site.html import (
    badge,
    code,
    date,
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
    _axes_text,
    _beside,
    _html,
    definition_path,
    group_path,
    implementation_path,
    run_badges,
    run_path,
)
from kictl.site.pages.definition import _record_spec
from kictl.standing import VerifyReport

if TYPE_CHECKING:
    from kictl.index.facts import RunFacts
    from kictl.site.context import SiteContext

# --------------------------------------------------------------------------- run


def _manifest(ctx: SiteContext, report: VerifyReport) -> tuple[dict[str, Any], list[list[str]]]:
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


def render_run(ctx: SiteContext, run: RunFacts, verify_report: Callable[[str], VerifyReport]) -> Files:
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
    stats: dict[str, Any] = timing.get("latencyNs") or {}
    samples = timing.get("samples")
    if isinstance(samples, list) and samples and all(isinstance(value, int) for value in samples):
        stats = dict(summarize(samples))  # derived from the kept samples, as every reader does (kictl.derived)
    body.append(
        table(
            "Latency statistics",
            ["statistic", "latency"],
            [[esc(name), esc(latency(value))] for name, value in stats.items() if isinstance(value, (int, float))],
            numeric=(1,),
        )
    )
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
    # this page's report and the build's advisory marks: the same judgements, made once (kictl.rank.citation)
    cite = citation(
        ctx.index, run.digest, policy=ctx.policy, accessed=ctx.moment, report=report, marks=ctx.marks.of(run.digest)
    )
    if cite.committed:
        # a static page cannot know when it is read: it gives the day the record entered the registry
        cite = dataclasses.replace(cite, accessed=cite.committed[:10])
    added = f"added in commit {cite.commit[:12]}, {date(cite.committed)}" if cite.commit else "not yet committed"
    text = (
        f'"{cite.title}". KernelIndex {cite.kind} {cite.digest}. {cite.where} ({added}; accessed {cite.accessed}).'
    ) + (f" Measured by a harness under advisory {', '.join(cite.advisories)}." if cite.advisories else "")
    body.append('<section aria-labelledby="cite"><h2 id="cite">Cite</h2>')
    body.append(
        deflist(
            [
                ("permalink", f'<a href="{esc(cite.permalink)}">{esc(cite.permalink)}</a>')
                if cite.permalink
                else ("registry", esc(cite.where)),
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
    return group_of(run)
