"""Which of a registry's runs its open harness advisories mark now (docs/advisories.md).

``kictl.advisories.marks`` holds the rules: an advisory marks a run whose
protocol it matches (``marks_run``), and a verifier's rerun measured by a
harness it does not match clears the mark (``clears``).  This module applies
them: it reads the advisories the registry holds (``load_advisories``, the
highest version ever seen), the runs' protocols, and the verifier reruns of
each marked run (``kictl.standing.attestations.Judge.reruns_of``, the one
rule for reruns).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kictl.advisories.document import Advisory
from kictl.advisories.marks import Marks, RunRef, clears, marks_run
from kictl.advisories.memory import traces
from kictl.advisories.published import AdvisorySet, has_advisories, load_advisories
from kictl.errors import CheckFailed, KictlError
from kictl.standing.attestations import Judge, verifier_rerun_runs
from kictl.store.registry import Registry


class Protocols:
    """Protocol specs by digest, read once; a protocol that cannot be read is ``None`` (it matches nothing)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.cache: dict[str, Mapping[str, Any] | None] = {}

    def spec(self, digest: str) -> Mapping[str, Any] | None:
        if digest not in self.cache:
            try:
                record = self.registry.load(digest)
                self.cache[digest] = record.raw["spec"] if record.kind == "BenchmarkProtocol" else None
            except KictlError:
                self.cache[digest] = None
        return self.cache[digest]

    def run_protocol(self, run_digest: str) -> Mapping[str, Any] | None:
        try:
            run = self.registry.load(run_digest)
        except KictlError:
            return None
        protocol = run.raw["spec"].get("protocolDigest") if run.kind == "BenchmarkRun" else None
        return self.spec(protocol) if isinstance(protocol, str) else None


def run_marks(registry: Registry, runs: Iterable[RunRef], *, advisories: AdvisorySet | None = None) -> Marks:
    """The marks of ``runs`` under the registry's open advisories (``kictl.advisories.marks``).

    Costs nothing when ``registry/advisories/`` is empty.  Raises ``CheckFailed``
    when there are advisories and the trust-root chain does not verify.
    """
    if advisories is None:
        if not has_advisories(registry):
            return Marks()
        advisories = load_advisories(registry)
    open_ = advisories.open()
    marks = Marks(advisories={advisory.id: advisory for advisory in open_})
    if not open_:
        return marks
    protocols = Protocols(registry)
    judge = Judge(registry)
    for run in runs:
        spec = protocols.spec(run.protocol)
        hits: list[Advisory] = [advisory for advisory in open_ if marks_run(advisory, spec, run.status)]
        if not hits:
            continue
        cleared: list[tuple[str, str]] = []
        reruns = judge.reruns_of(run.digest)
        for advisory in list(hits):
            for rerun in reruns:
                if clears(advisory, protocols.run_protocol(rerun)):
                    cleared.append((advisory.id, rerun))
                    hits.remove(advisory)
                    break
        if hits:
            marks.marked[run.digest] = tuple(sorted(advisory.id for advisory in hits))
        if cleared:
            marks.cleared[run.digest] = tuple(sorted(cleared))
    return marks


def advisory_marks(registry: Registry, runs: Iterable[RunRef]) -> dict[str, tuple[str, ...]]:
    """Run digest → the open advisories that mark it, for a leaderboard: nothing is loaded or verified when the
    registry has, and had, no advisory file (``kictl.advisories.memory.traces``: also what git history or this
    machine saw deleted).  Raises ``CheckFailed`` when there are advisories and the trust root does not verify.
    """
    if not traces(registry.root):
        return {}
    return run_marks(registry, runs).marked


def record_marks(registry: Registry, digest: str) -> Marks:
    """``run_marks`` of one record (nothing for a record that is no BenchmarkRun or cannot be read, and nothing
    when the trust root does not verify: ``verify`` and ``show`` report that failure themselves)."""
    if not has_advisories(registry):
        return Marks()
    try:
        record = registry.load(digest)
    except KictlError:
        return Marks()
    if record.kind != "BenchmarkRun":
        return Marks()
    spec = record.raw["spec"]
    try:
        return run_marks(registry, [RunRef(digest, str(spec.get("protocolDigest")), str(spec.get("status")))])
    except CheckFailed:
        return Marks()


def affected_runs(registry: Registry, advisory_id: str) -> tuple[Advisory, Marks]:
    """Every BenchmarkRun of the registry an advisory marks now (``kictl advisory show``, ``rerun --advisory``).

    A verifier's own rerun is evidence, never a result to rerun, and a file whose bytes are not its name is
    left out, as every reader does.  Raises ``NotFoundError`` for an advisory that is not published (or does
    not verify), ``CheckFailed`` when the trust root does not verify.
    """
    found = load_advisories(registry)
    advisory = found.get(advisory_id).advisory
    only = AdvisorySet(current={advisory_id: found.current[advisory_id]})
    own_reruns = verifier_rerun_runs(registry)
    runs = []
    for _, path in registry.record_files(["BenchmarkRun"]):
        try:
            record = registry.read_record(path)
        except KictlError:
            continue  # validate and verify say what is wrong with it
        if record.digest != f"sha256:{path.stem}" or record.digest in own_reruns:
            continue
        spec = record.raw["spec"]
        runs.append(RunRef(record.digest, str(spec.get("protocolDigest")), str(spec.get("status"))))
    return advisory, run_marks(registry, runs, advisories=only)
