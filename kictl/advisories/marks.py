"""Which runs an advisory marks, which controlled reruns clear a mark, and what the policy does with the rest.

A BenchmarkRun is *marked* by an open advisory when its protocol matches the
advisory's ``affects`` (``document.protocol_matches``) and, for an advisory of
``impact: failures`` (a false positive: only failing verdicts may be wrong),
when the run did not pass.  A mark is *cleared* for that run when a
``verifier``-role ``rerun`` attestation about it verifies and names a rerun
BenchmarkRun in the registry whose own protocol the advisory does not match:
an unaffected harness measured it again.  Community reruns never clear.

The registry's policy (``advisedRuns``) then decides what a leaderboard does
with a marked run: ``rank`` (it ranks, labelled), ``apart`` (it ranks below
every unmarked run of its group, labelled; the default) or ``drop`` (it is
left out until a rerun clears it).  ``verify``, ``show``, ``cite``, the site
and ``--json`` show the marks whatever the policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kictl.advisories.document import Advisory, protocol_matches
from kictl.advisories.published import AdvisorySet, has_advisories, load_advisories
from kictl.errors import CheckFailed, KictlError
from kictl.store import Registry

#: ``policy.advisedRuns``: what a leaderboard does with a run under an open advisory.
ADVISED_RUNS = ("rank", "apart", "drop")


@dataclass(frozen=True, slots=True)
class RunRef:
    """What matching needs of a run: its digest, its protocol's digest and its status."""

    digest: str
    protocol: str
    status: str


@dataclass
class Marks:
    """Per run digest, the open advisories that mark it (ids, sorted) and the ones a rerun cleared."""

    marked: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: run → ``(advisory id, the rerun run that cleared it)``
    cleared: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    advisories: dict[str, Advisory] = field(default_factory=dict)

    def of(self, digest: str) -> tuple[str, ...]:
        return self.marked.get(digest, ())

    def __bool__(self) -> bool:
        return bool(self.marked or self.cleared)

    def run_json(self, digest: str) -> dict[str, Any]:
        """The ``advisories`` member readers add to a run's ``--json`` document."""
        return {
            "marked": [
                {"id": advisory_id, "version": self.advisories[advisory_id].version,
                 "summary": self.advisories[advisory_id].summary, "impact": self.advisories[advisory_id].impact}
                for advisory_id in self.of(digest)
            ],
            "cleared": [{"id": advisory_id, "byRerun": rerun} for advisory_id, rerun in self.cleared.get(digest, ())],
        }  # fmt: skip


def label(level: str, ids: Iterable[str]) -> str:
    """``verified · harness advisory KI-2026-0001``: the evidence level with the marks, as readers print it."""
    from kictl.render import with_advisories

    return with_advisories(level, tuple(ids))


class _Protocols:
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


def marks_run(advisory: Advisory, spec: Mapping[str, Any] | None, status: str) -> bool:
    """Whether ``advisory`` marks a run of protocol ``spec`` and ``status``: the one rule for readers and review.

    Its protocol matches ``affects``, and for ``impact: failures`` (a false positive) the run did not pass.
    A protocol that cannot be read (``None``) matches nothing.
    """
    if spec is None or not protocol_matches(advisory.affects, spec):
        return False
    return advisory.impact == "results" or status != "passed"


class _Reruns:
    """The rerun BenchmarkRuns that valid verifier ``rerun`` attestations about a run name.

    The trust root, the signing times (one ``git log``) and the tolerance are read once, on first use.
    """

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.context: tuple[Any, Mapping[str, Any], float, Any] | None = None

    def of(self, digest: str) -> list[str]:
        from kictl.trust.bulk import _intact_subject
        from kictl.trust.evidence import _envelope_files, _read_envelopes, _signing_times, judge_attestations
        from kictl.trust.root import _now, registry_root

        paths = _envelope_files(self.registry, digest)
        subject = _intact_subject(self.registry, digest) if paths else None
        if subject is None:
            return []
        if self.context is None:
            from kictl.trust.readers import reader_policy  # the signed policy, as every reader reads it

            registry = self.registry
            self.context = (
                registry_root(registry),
                _signing_times(registry),
                reader_policy(registry).rerun_tolerance,
                _now(),
            )
        root, times, tolerance, now = self.context
        envelopes = _read_envelopes(self.registry, paths, times, now)
        results, _ = judge_attestations(subject, root, envelopes, rerun_tolerance=tolerance)
        found = []
        for result in results:
            attestation = result.attestation
            if result.counts_for == "evidence" and attestation is not None:
                run = getattr(attestation.predicate, "run_digest", None)
                if isinstance(run, str):
                    found.append(run)
        return found


def run_marks(registry: Registry, runs: Iterable[RunRef], *, advisories: AdvisorySet | None = None) -> Marks:
    """The marks of ``runs`` under the registry's open advisories (this module's docstring).

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
    protocols = _Protocols(registry)
    verifier_reruns = _Reruns(registry)
    for run in runs:
        spec = protocols.spec(run.protocol)
        hits = [advisory for advisory in open_ if marks_run(advisory, spec, run.status)]
        if not hits:
            continue
        cleared: list[tuple[str, str]] = []
        reruns = verifier_reruns.of(run.digest)
        for advisory in list(hits):
            for rerun in reruns:
                rerun_spec = protocols.run_protocol(rerun)
                if rerun_spec is not None and not protocol_matches(advisory.affects, rerun_spec):
                    cleared.append((advisory.id, rerun))
                    hits.remove(advisory)
                    break
        if hits:
            marks.marked[run.digest] = tuple(sorted(advisory.id for advisory in hits))
        if cleared:
            marks.cleared[run.digest] = tuple(sorted(cleared))
    return marks


def record_marks(registry: Registry, digest: str) -> Marks:
    """``run_marks`` of one record (nothing for a record that is no BenchmarkRun or cannot be read)."""
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
        return Marks()  # the trust root does not verify: verify and show report that failure themselves


def affected_runs(registry: Registry, advisory_id: str) -> tuple[Advisory, Marks]:
    """Every BenchmarkRun of the registry an advisory marks now (``kictl advisory show``, ``rerun --advisory``).

    Raises ``NotFoundError`` for an advisory that is not published (or does
    not verify), ``CheckFailed`` when the trust root does not verify.
    """
    found = load_advisories(registry)
    advisory = found.get(advisory_id).advisory
    only = AdvisorySet(current={advisory_id: found.current[advisory_id]})
    from kictl.trust.bulk import verifier_rerun_runs

    own_reruns = verifier_rerun_runs(registry)  # a verifier's own rerun is evidence, never a result to rerun
    runs = []
    for _, path in registry.record_files(["BenchmarkRun"]):
        try:
            record = registry.read_record(path)
        except KictlError:
            continue  # validate and verify say what is wrong with it
        if record.digest != f"sha256:{path.stem}" or record.digest in own_reruns:
            continue  # a file whose bytes are not its name is left out, as every reader does
        spec = record.raw["spec"]
        runs.append(RunRef(record.digest, str(spec.get("protocolDigest")), str(spec.get("status"))))
    return advisory, run_marks(registry, runs, advisories=only)
