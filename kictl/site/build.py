"""``kictl site build``: gather what each page shows from the core, decide what to render, write the files.

The numbers on every page come from the functions the CLI calls:
``rank.definition_leaderboard`` and ``rank.workload_leaderboard`` (ranks,
× vs #1, evidence, floors), ``rank.floors``, ``rank.history``,
``rank.citation``, ``standing.verify_report`` (what ``kictl verify`` reports) and
``standing.standings`` (the evidence levels ``kictl leaderboard`` ranks
with).  The JSON beside a page is the CLI's ``--json`` document for the same
question, built by the CLI's own JSON shapes (``kictl.site.documents``).

Determinism.  The build's "now" (staleness, a citation's access date) is the
time of the registry's HEAD commit, or ``SOURCE_DATE_EPOCH`` when set, else
the newest ``observedAt``; nothing reads the clock, dictionaries are walked in
sorted order and the SVG plots carry no date, so building twice gives
byte-identical files.

Incremental builds.  Each page has a fingerprint: a sha256 over the facts it
shows, read from the query index (run digests, latencies, statuses,
evidence, staleness, the state of the files it verifies, the commits that
added them).  ``build-inputs.json`` beside the pages keeps every page's
fingerprint and the files it wrote, and each run's verification state with the
fingerprint of the files that decide it.  With ``incremental=True`` a page is
rendered again only when its fingerprint changed or one of its files is
missing; a run is verified again only when one of its files (the record, the
records it names, its attestations, the trust root) changed.  Files that a
previous build wrote and this one does not are removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kictl import __version__, standing
from kictl.errors import CheckFailed, RegistryError
from kictl.index.facts import RunFacts
from kictl.index.query import QueryIndex
from kictl.layout import ATTESTATIONS_DIR, RECORDS_DIR
from kictl.rank import GroupKey, group_of, group_runs
from kictl.records import parse_timestamp
from kictl.site import pages
from kictl.site.context import RunState, SiteContext
from kictl.site.output import STATE_FILE, SiteFolder, site_parts
from kictl.site.plots import require_matplotlib
from kictl.store.git import held_still
from kictl.store.registry import Registry
from kictl.trust.readers import reader_policy

#: Bump when a page's layout changes, so that an incremental build renders every page again.
SITE_FORMAT = 4


@dataclass
class BuildReport:
    """What a build did."""

    mode: str  # "full" or "incremental"
    pages: int = 0
    rendered: int = 0
    files_written: int = 0
    files_removed: int = 0
    verified: int = 0  # runs whose verification ran (the rest came from the previous build)
    seconds: float = 0.0
    as_of: str = ""
    commit: str | None = None


def fingerprint(*parts: Any) -> str:
    """sha256 over the JSON of ``parts`` (keys sorted): the identity of a page's inputs."""
    text = json.dumps([SITE_FORMAT, __version__, *parts], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class _MemoGit:
    """The registry's ``GitHistory`` with its answers kept for the duration of one build.

    ``rank.citation`` asks git when each record file was added, one file at a
    time; ``trust.check_record`` asks for the attestations' signing times once
    per record.  The answers do not change during a build, so each question is
    put to git once: ``first_added`` of one record file is answered from one
    ``first_added`` over all of ``registry/records`` (the same log, the same
    oldest commit per file).
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._added: dict[tuple[str, str], Any] = {}
        self._commits: dict[tuple[str, tuple[str, ...]], Any] = {}

    def first_added(self, prefix: str, rev: str = "HEAD") -> Any:
        if prefix.startswith(RECORDS_DIR + "/") and prefix.endswith(".json"):
            everything = self.first_added(RECORDS_DIR, rev)
            return {prefix: everything[prefix]} if prefix in everything else {}
        key = (prefix, rev)
        if key not in self._added:
            self._added[key] = self._inner.first_added(prefix, rev)
        return self._added[key]

    def commits(self, rev: str = "HEAD", paths: Sequence[str] = ()) -> Any:
        key = (rev, tuple(paths))
        if key not in self._commits:
            self._commits[key] = self._inner.commits(rev, paths)
        return self._commits[key]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextlib.contextmanager
def _memo_git(registry: Registry) -> Iterator[None]:
    """``registry.git`` answers from a ``_MemoGit`` for the duration of the block, then as before."""
    if not registry.is_git_repository():
        yield
        return
    inner = registry.git
    registry.__dict__["git"] = _MemoGit(inner)  # Registry.git is a cached_property: the instance dict holds it
    try:
        yield
    finally:
        registry.__dict__["git"] = inner


def build_moment(registry: Registry, index: QueryIndex, runs: Iterable[RunFacts]) -> datetime:
    """The build's "now": ``SOURCE_DATE_EPOCH``, else the HEAD commit's time, else the newest ``observedAt``."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        try:
            return datetime.fromtimestamp(int(epoch), UTC)
        except ValueError as exc:
            raise RegistryError(f"SOURCE_DATE_EPOCH={epoch!r} is not a number of seconds") from exc
    if index.commit is not None:
        return datetime.fromtimestamp(registry.git.commit_info(index.commit).timestamp, UTC)
    newest = max((run.observed_at for run in runs), default=None)
    return parse_timestamp(newest) if newest else datetime(1970, 1, 1, tzinfo=UTC)


# --------------------------------------------------------------------------- pages


@dataclass
class Page:
    """One page to (maybe) render: its site path, the fingerprint of its inputs, how to make its files."""

    path: str
    fingerprint: str
    render: Callable[[], dict[str, bytes]]


class _Stats:
    """``(size, mtime_ns)`` of files, each asked once per build."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._cache: dict[str, list[int] | None] = {}

    def of(self, relative: str | None) -> list[int] | None:
        if relative is None:
            return None
        if relative not in self._cache:
            try:
                stat = os.stat(self._root / relative)
                self._cache[relative] = [stat.st_size, stat.st_mtime_ns]
            except OSError:
                self._cache[relative] = None
        return self._cache[relative]

    def folder(self, relative: str) -> list[tuple[str, list[int] | None]]:
        try:
            names = sorted(os.listdir(self._root / relative))
        except OSError:
            return []
        return [(name, self.of(f"{relative}/{name}")) for name in names]


def _load_state(manifest: bytes | None) -> dict[str, Any]:
    """The previous build's manifest, when the output folder proved it is kictl's (``SiteFolder.trusted``)."""
    if manifest is None:
        return {}
    try:
        state = json.loads(manifest)
    except ValueError:
        return {}
    return state if isinstance(state, dict) else {}


def _old_files(state: Mapping[str, Any]) -> list[str]:
    """Every file the previous build's manifest lists; raises ``RegistryError`` for one that is not a path
    inside the output folder (a manifest kictl wrote never lists one: it is checked before anything is written)."""
    names: list[str] = []
    pages_ = state.get("pages")
    for entry in pages_.values() if isinstance(pages_, dict) else ():
        files = entry.get("files") if isinstance(entry, dict) else None
        for name in files if isinstance(files, list) else ():
            if not isinstance(name, str):
                raise RegistryError(f"{STATE_FILE} lists {name!r}, not a file name; remove the folder and build again")
            try:
                site_parts(name)
            except RegistryError as exc:
                raise RegistryError(
                    f"{STATE_FILE} lists {name!r}, a path outside the output folder: nothing was written or removed"
                ) from exc
            names.append(name)
    return names


def _previous_states(state: Mapping[str, Any]) -> dict[str, RunState]:
    found = {}
    for digest, value in (state.get("runs") or {}).items():
        with contextlib.suppress(TypeError, KeyError):
            found[digest] = RunState(**value)
    return found


def build_site(
    registry: Registry,
    out: Path,
    *,
    base_url: str | None = None,
    incremental: bool = False,
    force: bool = False,
    progress: Callable[[str], None] | None = None,
) -> BuildReport:
    """Build the site of ``registry`` into ``out``; returns what was done.

    ``out`` must be missing, empty or a folder this machine built before
    (``kictl.site.output``); ``force`` builds into any other folder, removing
    nothing of it.  Raises ``UsageError`` (exit 2) for another folder, a file or
    a link, ``EnvError`` (exit 5) without matplotlib, ``RegistryError`` (exit 4)
    when ``out`` cannot be written or holds a link where a page goes, and
    whatever the core raises for a registry it cannot read (a trust root that
    does not verify: ``CheckFailed``).
    """

    require_matplotlib()
    started = time.perf_counter()
    say = progress or (lambda _line: None)
    report = BuildReport(mode="incremental" if incremental else "full")
    with SiteFolder.open(out, force=force) as folder:
        _build_into(folder, registry, report, base_url=base_url, incremental=incremental, say=say)
    report.seconds = time.perf_counter() - started
    return report


def _build_into(
    folder: SiteFolder,
    registry: Registry,
    report: BuildReport,
    *,
    base_url: str | None,
    incremental: bool,
    say: Callable[[str], None],
) -> None:
    old_all = _load_state(folder.manifest)  # the previous build's, when the folder proved it is kictl's
    old_files = _old_files(old_all)  # checked before anything is written
    previous = old_all if incremental and old_all.get("format") == SITE_FORMAT else {}
    with held_still(registry.root), QueryIndex.open(registry) as index, _memo_git(index.registry):
        target = index.registry
        every = standing.standings(target, index.all_runs())  # each run's standing, from one pass (kictl.standing)
        reruns = every.reruns
        runs = sorted((run for run in index.all_runs() if run.digest not in reruns), key=lambda run: run.digest)
        moment = build_moment(target, index, runs)
        summaries = every.summaries(run.digest for run in runs)
        ctx = SiteContext(
            registry=target,
            index=index,
            policy=reader_policy(target),
            moment=moment,
            base_url=base_url.rstrip("/") + "/" if base_url else None,
            evidence={digest: summary.level for digest, summary in summaries.items()},
            summaries=summaries,
            reruns=reruns,
            marks=every.marks,
            held_out=every.held_out(run.digest for run in runs),  # issue 32
        )
        report.as_of = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
        report.commit = index.commit
        for definition in index.definitions():
            ctx.definitions[definition.digest] = definition
            for workload in index.workloads(definition.digest):
                ctx.workloads[workload.digest] = workload
        groups, loose = group_runs(runs)
        ctx.groups = {key: sorted(members, key=lambda run: run.digest) for key, members in groups.items()}
        ctx.loose = loose
        for run in runs:
            definition_digest = run.definition or (
                ctx.workloads[run.workload].definition if run.workload in ctx.workloads else None
            )
            if definition_digest is not None:
                ctx.runs_by_definition.setdefault(definition_digest, []).append(run)
        say(f"{len(runs)} runs, {len(ctx.definitions)} definitions, {len(ctx.groups)} comparison groups")

        stats = _Stats(target.root)
        trust_files = stats.folder(target.relative(target.trust_dir))
        policy_stat = stats.of(target.relative(target.policy_path))
        attested = target.git.first_added(ATTESTATIONS_DIR) if target.is_git_repository() else {}

        def verify_fingerprint(digest: str, references: Iterable[str | None]) -> str:
            hex_digest = digest.removeprefix("sha256:")
            folder = f"{ATTESTATIONS_DIR}/{hex_digest[:2]}/{hex_digest}"
            envelopes = stats.folder(folder)
            return fingerprint(
                "verify",
                digest,
                stats.of(index.path_of(digest)),
                [stats.of(index.path_of(ref)) if ref else None for ref in references],
                envelopes,
                [getattr(attested.get(f"{folder}/{name}"), "sha", None) for name, _ in envelopes],
                trust_files,
                policy_stat,
            )

        cached = _previous_states(previous)
        reports: dict[str, standing.VerifyReport] = {}

        def state_of(run: RunFacts) -> RunState:
            if run.digest in ctx.states:
                return ctx.states[run.digest]
            refs = (run.definition, run.workload, run.implementation, run.protocol, run.environment)
            print_ = verify_fingerprint(run.digest, refs)
            state = cached.get(run.digest)
            if state is None or state.fingerprint != print_:
                checked = standing.verify_report(target, run.digest)
                report.verified += 1
                reports[run.digest] = checked
                state = RunState(
                    fingerprint=print_,
                    ok=checked.ok,
                    submitted=checked.trust.submitted,
                    level=checked.trust.level,
                    retracted=checked.trust.retracted,
                    failures=len(checked.failures),
                )
            ctx.states[run.digest] = state
            return state

        def verify_report(digest: str) -> standing.VerifyReport:
            return reports.pop(digest, None) or standing.verify_report(target, digest)

        for run in runs:
            state_of(run)
        say(f"verified {report.verified} run(s), {len(runs) - report.verified} unchanged since the last build")

        group_prints: dict[GroupKey, str] = {}
        for key, members in sorted(ctx.groups.items()):
            group_prints[key] = fingerprint(
                "group",
                key.digest,
                ctx.policy.model_dump(mode="json"),
                [
                    (
                        r.digest,
                        r.implementation,
                        r.latency_ns,
                        r.status,
                        r.observed_at,
                        ctx.evidence.get(r.digest),
                        ctx.marks.run_json(r.digest),
                    )
                    for r in members
                ],
                [ctx.stale(r) for r in members],
            )
        added = target.git.first_added(RECORDS_DIR) if target.is_git_repository() else {}

        def added_commit(digest: str) -> str | None:
            info = added.get(index.path_of(digest) or "")
            return info.sha if info is not None else None

        def run_line(run: RunFacts) -> list[Any]:
            state = ctx.states[run.digest]
            return [
                run.digest,
                state.fingerprint,
                state.ok,
                state.submitted,
                state.retracted,
                added_commit(run.digest),
                ctx.marks.run_json(run.digest),
            ]

        site_pages: list[Page] = []
        for key, members in sorted(ctx.groups.items()):
            site_pages.append(
                Page(
                    pages.group_path(key),
                    fingerprint("group-page", group_prints[key], [run_line(r) for r in members], ctx.base_url),
                    _bind(pages.render_group, ctx, key),
                )
            )
        definition_prints: dict[str, str] = {}
        gpu_products = index.gpu_products()
        for digest, definition in sorted(ctx.definitions.items()):
            members = ctx.runs_by_definition.get(digest, [])
            keys = _keys(members)
            definition_prints[digest] = fingerprint(
                "definition-page",
                digest,
                [group_prints[key] for key in keys],
                [run_line(r) for r in members],
                [(r.gpu, r.status, r.latency_ns) for r in members],
                sorted(w.digest for w in ctx.workloads.values() if w.definition == digest),
                [(i.digest, added_commit(i.digest)) for i in index.implementations(digest)],
                gpu_products,
                ctx.measured_gpus(),  # its Per GPU list: the products any definition has a passed run on
                ctx.base_url,
            )
            site_pages.append(
                Page(
                    pages.definition_path(ctx, definition),
                    definition_prints[digest],
                    _bind(pages.render_definition, ctx, digest),
                )
            )
        for run in runs:
            run_key = group_of(run)
            site_pages.append(
                Page(
                    pages.run_path(run.digest),
                    fingerprint(
                        "run-page",
                        run_line(run),
                        group_prints.get(run_key) if run_key else None,
                        ctx.stale(run),
                        ctx.policy.permalink_base,
                        ctx.base_url,
                    ),
                    _bind(pages.render_run, ctx, run, verify_report),
                )
            )
        implementations = {
            impl.digest: impl for definition in ctx.definitions for impl in index.implementations(definition)
        }
        for run in runs:
            if run.implementation not in implementations:
                facts = index.implementation(run.implementation)
                if facts is not None:
                    implementations[facts.digest] = facts
        for digest, impl in sorted(implementations.items()):
            mine = sorted(
                (r for r in index.runs_of_implementation(digest) if r.digest not in reruns), key=lambda r: r.digest
            )
            keys = _keys(mine)
            site_pages.append(
                Page(
                    pages.implementation_path(digest),
                    fingerprint(
                        "implementation-page",
                        digest,
                        verify_fingerprint(digest, (impl.definition,)),
                        [group_prints[key] for key in keys],
                        [run_line(r) for r in mine],
                        ctx.base_url,
                    ),
                    _bind(pages.render_implementation, ctx, impl),
                )
            )
        for product in pages.gpu_products(ctx):
            site_pages.append(
                Page(
                    pages.gpu_path(product),
                    fingerprint(
                        "gpu-page",
                        product,
                        [definition_prints[d] for d in sorted(definition_prints)],
                        ctx.base_url,
                    ),
                    _bind(pages.render_gpu, ctx, product),
                )
            )
        site_pages.append(
            Page(
                "index.html",
                fingerprint("index-page", definition_prints, index.counts(), report.as_of, report.commit, ctx.base_url),
                _bind(pages.render_index, ctx),
            )
        )
        site_pages.append(
            Page("style.css", fingerprint("style", pages.stylesheet()), lambda: {"style.css": pages.stylesheet()})
        )

        check_paths(site_pages)
        old_pages: dict[str, Any] = previous.get("pages") or {}
        new_pages: dict[str, Any] = {}
        owners: dict[str, str] = {}  # file (folded) -> the page that writes it
        report.pages = len(site_pages)
        say(f"rendering {len(site_pages)} pages")
        for number, page in enumerate(site_pages, start=1):
            before = old_pages.get(page.path)
            if (
                before is not None
                and before.get("fingerprint") == page.fingerprint
                and all(folder.is_file(name) for name in before.get("files", ()))
            ):
                claim_files(owners, page.path, before.get("files", ()))
                new_pages[page.path] = before
                continue
            files = page.render()
            report.rendered += 1
            claim_files(owners, page.path, files)
            for name, data in sorted(files.items()):
                if folder.write(name, data):
                    report.files_written += 1
            new_pages[page.path] = {"fingerprint": page.fingerprint, "files": sorted(files)}
            if number % max(1, min(2000, len(site_pages) // 10)) == 0:  # about ten steps (kictl/progress.py)
                say(f"{number}/{len(site_pages)} pages")
        kept = {name for entry in new_pages.values() for name in entry["files"]}
        for name in sorted(set(old_files) - kept - {STATE_FILE}):
            if folder.remove(name):
                report.files_removed += 1
        state = {
            "format": SITE_FORMAT,
            "kictl": __version__,
            "pages": dict(sorted(new_pages.items())),
            "runs": {digest: ctx.states[digest].to_json() for digest in sorted(ctx.states)},
        }
        folder.finish((json.dumps(state, indent=1, sort_keys=True) + "\n").encode("utf-8"))


def _path_key(path: str) -> str:
    """Paths that one web server or file system may serve as one: case and Unicode case folded."""
    return path.casefold()


def check_paths(site_pages: Sequence[Page]) -> None:
    """Two pages never share a path (issue 29: a definition named ``RMSNORM_H4096`` took over
    ``d/rmsnorm_h4096/``, two environments shared one GPU page).  Raises ``CheckFailed`` naming both.
    """
    seen: dict[str, Page] = {}
    clashes: list[str] = []
    for page in site_pages:
        first = seen.setdefault(_path_key(page.path), page)
        if first is not page:
            clashes.append(f"{page.path}: written for two pages ({first.path} and {page.path})")
    if clashes:
        raise CheckFailed(
            f"{len(clashes)} site path(s) would be written twice: the later page would silently replace the "
            "earlier; rename one of the records (`kictl review` lints such names as name-taken)",
            details=clashes,
        )


def claim_files(owners: dict[str, str], path: str, names: Iterable[str]) -> None:
    """Record that page ``path`` writes ``names``; raises ``CheckFailed`` when another page of this build does."""
    for name in sorted(names):
        other = owners.setdefault(_path_key(name), path)
        if other != path:
            raise CheckFailed(
                f"site file {name} would be written by two pages ({other} and {path}); rename one of the records"
            )


def _keys(runs: Iterable[RunFacts]) -> list[GroupKey]:
    """The comparison groups of ``runs``, sorted."""
    return sorted({found for run in runs if (found := group_of(run)) is not None})


def _bind(function: Callable[..., dict[str, bytes]], *args: Any) -> Callable[[], dict[str, bytes]]:
    return lambda: function(*args)
