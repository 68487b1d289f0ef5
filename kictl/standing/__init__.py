"""A run's standing in a registry, in one call: what every reader believes about it (docs/trust.md).

"What do we know about this run" is five judgements, each made by one rule
that review and every reader share (issue 41) and asked here (issue 44):

* **evidence level** (``unsigned``, ``reported``, ``verified``, ``disputed``):
  ``kictl.trust.judge_attestations`` over the run's valid envelopes, held to
  ``reported`` at best where the run keeps no samples (``cap_levels``,
  ``kictl.derived.cap_evidence``);
* **retraction**: a valid ``retraction`` by a maintainer or the run's own
  submitters (``kictl.trust.may_retract``);
* **verifier reruns**: which runs are verifiers' reruns of it, and whether it
  is one itself (``attestations.rerun_run``: a rerun is evidence, never a
  contender);
* **advisories**: the open harness advisories that mark it, and the reruns
  that cleared a mark (``advisories.run_marks`` applying
  ``kictl.advisories.marks``'s rules);
* **held-out verdict**: what verifiers' reruns found on held-out shapes
  (``heldout.held_out_verdicts``).

``standing(registry, digest)`` answers them for one run and ``standings``
for many (a leaderboard's or the site's runs, from one pass), each with its
reason.  Leaderboards, the site, the export, review,
``show``, ``verify`` and ``cite`` ask this package (or the one function here
that answers the part they need, from the same pass); nothing outside it and
``kictl.trust`` reads attestations to judge a run (tests/standing holds that).
The package only reads.

The package, by concern::

    attestations  the working tree's envelopes judged in one pass: levels, retractions, verifier reruns
    advisories    which runs the open advisories mark, which reruns cleared a mark
    heldout       held-out verdicts read back from verifiers' reruns
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from kictl.advisories.marks import Marks, RunRef
from kictl.derived import cap_evidence
from kictl.errors import KictlError
from kictl.records import StoredRecord
from kictl.standing.advisories import advisory_marks, affected_runs, record_marks, run_marks
from kictl.standing.attestations import (
    Judge,
    all_record_digests,
    evidence_levels,
    judged_standing,
    named_reruns,
    ranking_trust,
    rerun_run,
    retracted_digests,
    scan,
    trust_summaries,
    verifier_rerun_run,
    verifier_rerun_runs,
    verifier_reruns,
)
from kictl.standing.heldout import FAILS, GENERALIZES, generalizing, held_out_verdicts, with_held_out
from kictl.store.registry import Registry
from kictl.trust import RecordTrust, VerifyReport, check_record

T = TypeVar("T")


def cap_levels(runs: Sequence[Any], levels: Mapping[str, str]) -> dict[str, str]:
    """``levels`` with each run that keeps no samples held to ``reported`` at best (``kictl.derived.cap_evidence``).

    ``runs`` are ``RunFacts`` (``samples``: how many the record keeps); a level of a run not among them is kept.
    """
    capped = dict(levels)
    for run in runs:
        digest = getattr(run, "digest", None)
        if digest in capped and getattr(run, "samples", 1) == 0:
            capped[digest] = cap_evidence(capped[digest], False)
    return capped


def board_runs(registry: Registry, runs: Sequence[T]) -> tuple[list[T], dict[str, str]]:
    """What a leaderboard (and the export) ranks: ``runs`` (``RunFacts``) without verifiers' own reruns and validly
    retracted runs, and the evidence level of each run left, held to ``reported`` where it keeps no samples; from
    one pass over the attestations (``ranking_trust``).  Raises ``CheckFailed`` when the trust root does not
    verify.
    """
    levels, left_out = ranking_trust(registry, [getattr(run, "digest", "") for run in runs])
    kept = [run for run in runs if getattr(run, "digest", None) not in left_out]
    return kept, cap_levels(kept, {digest: level for digest, level in levels.items() if digest not in left_out})


def keeps_samples(spec: Mapping[str, Any]) -> bool:
    """Whether a BenchmarkRun's spec (its JSON) keeps its timing samples: the one rule behind ``cap_levels``, as
    the index counts them (``RunFacts.samples``; no timing keeps none)."""
    timing = spec.get("timing")
    return bool(isinstance(timing, dict) and timing.get("samples"))


def record_level(level: str, record: StoredRecord) -> str:
    """The evidence level readers show for ``record`` (``kictl show``): a BenchmarkRun that keeps no samples is
    held to ``reported`` at best; other kinds keep ``level``."""
    if record.kind != "BenchmarkRun":
        return level
    return cap_evidence(level, keeps_samples(record.raw["spec"]))


def verify_report(registry: Registry, digest: str) -> VerifyReport:
    """``kictl verify``'s report of one record (``trust.check_record``): every digest recomputed, every envelope
    judged.  For a reader that shows the verification itself (the site's run page, ``cite``)."""
    return check_record(registry, digest)


@dataclass(frozen=True, slots=True)
class Standing:
    """What every reader believes about one run, each judgement with its reason."""

    digest: str
    trust: RecordTrust = field(default_factory=RecordTrust)
    #: the evidence level readers show: ``trust.level`` held to ``reported`` where the run keeps no samples
    level: str = "unsigned"
    level_reason: str = ""
    retraction_reason: str = ""
    #: the runs that verifiers' valid reruns of this run name, in envelope order
    reruns: tuple[str, ...] = ()
    #: the runs this run is a verifier's rerun of (then it is evidence, never ranked)
    rerun_of: tuple[str, ...] = ()
    #: open harness advisories that mark it, and ``(advisory id, rerun)`` for each mark a rerun cleared
    advisories: tuple[str, ...] = ()
    cleared: tuple[tuple[str, str], ...] = ()
    held_out: str | None = None
    held_out_reason: str = ""

    @property
    def retracted(self) -> bool:
        return self.trust.retracted

    @property
    def ranked(self) -> bool:
        """Whether a leaderboard may rank it: neither a verifier's rerun nor retracted."""
        return not self.rerun_of and not self.retracted

    def to_json(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "level": self.level,
            "levelReason": self.level_reason,
            "retracted": self.retracted,
            "retractionReason": self.retraction_reason,
            "reruns": list(self.reruns),
            "rerunOf": list(self.rerun_of),
            "advisories": list(self.advisories),
            "cleared": [{"id": advisory, "byRerun": rerun} for advisory, rerun in self.cleared],
            "heldOut": self.held_out,
            "heldOutReason": self.held_out_reason,
        }


def _level_reason(summary: RecordTrust, level: str, reruns: int, kept_samples: bool) -> str:
    if summary.level == "disputed":
        reason = "a verifier's rerun disagrees with its claim or failed"
    elif summary.level == "verified":
        reason = f"{reruns} verifier rerun(s) agree within the policy's rerunTolerance"
    elif summary.level == "reported":
        reason = "a valid submission signature by a submitter key; no verifier rerun"
    else:
        reason = "no valid submission signature by a key of the trust root"
    if level != summary.level and not kept_samples:
        reason += "; the run keeps no samples, so it stands as reported at best"
    return reason


def _held_out_reason(verdict: str | None) -> str:
    if verdict == FAILS:
        return "a verifier's rerun found it wrong on shapes drawn after submission"
    if verdict == GENERALIZES:
        return "verifiers' reruns found it right on shapes drawn after submission, and none found it wrong"
    return "no verifier's rerun checked it on held-out shapes"


class RunLike(Protocol):
    """What ``standings`` needs of a run it is handed as facts (``kictl.index.facts.RunFacts``), not as a digest."""

    @property
    def digest(self) -> str: ...
    @property
    def protocol(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def samples(self) -> int: ...


def _facts(registry: Registry, digest: str) -> tuple[RunRef | None, bool]:
    """``(protocol and status, keeps samples)`` of a BenchmarkRun read from its file; ``(None, True)`` for a record
    that is no readable run."""
    try:
        record = registry.load(digest)
    except KictlError:
        return None, True
    if record.kind != "BenchmarkRun":
        return None, True
    spec = record.raw["spec"]
    return RunRef(digest, str(spec.get("protocolDigest")), str(spec.get("status"))), keeps_samples(spec)


@dataclass(frozen=True, slots=True)
class Standings:
    """The standing of many runs, from one pass (``standings``)."""

    runs: dict[str, Standing]
    #: the advisories' marks of these runs, with the open advisories themselves (for their summaries)
    marks: Marks
    #: every run of the registry that is a verifier's rerun of another (never ranked)
    reruns: frozenset[str]

    def __getitem__(self, digest: str) -> Standing:
        return self.runs[digest]

    def summaries(self, digests: Iterable[str]) -> dict[str, RecordTrust]:
        """``{digest: RecordTrust}`` of ``digests`` (each must be among the runs asked about)."""
        return {digest: self.runs[digest].trust for digest in digests}

    def held_out(self, digests: Iterable[str]) -> dict[str, str]:
        """``{digest: held-out verdict}`` of those of ``digests`` a verifier's rerun judged."""
        verdicts = {digest: self.runs[digest].held_out for digest in digests}
        return {digest: verdict for digest, verdict in verdicts.items() if verdict is not None}


def standings(registry: Registry, runs: Iterable[str | RunLike]) -> Standings:
    """The standing of each run (a digest, or ``RunFacts`` whose protocol, status and samples the index holds),
    from one pass over the attestations (module docstring), each judgement with its reason.

    Raises ``CheckFailed`` when the trust root chain does not verify (and
    there is an attestation or an advisory to judge).
    """
    refs: dict[str, RunRef | None] = {}
    kept_samples: dict[str, bool] = {}
    for run in runs:
        if isinstance(run, str):
            refs[run], kept_samples[run] = _facts(registry, run)
        else:
            refs[run.digest] = RunRef(run.digest, run.protocol, run.status)
            kept_samples[run.digest] = run.samples != 0
    found = scan(registry, list(refs), reruns=True)
    marks = run_marks(registry, [ref for ref in refs.values() if ref is not None])
    held_out = held_out_verdicts(registry, [digest for digest, ref in refs.items() if ref is not None])
    result: dict[str, Standing] = {}
    for digest in refs:
        summary = found.summaries.get(digest, RecordTrust())
        reruns = tuple(found.reruns.get(digest, ()))
        kept = kept_samples[digest]
        level = cap_evidence(summary.level, kept)
        verdict = held_out.get(digest)
        result[digest] = Standing(
            digest=digest,
            trust=summary,
            level=level,
            level_reason=_level_reason(summary, level, len(reruns), kept),
            retraction_reason=(
                "a valid retraction by a maintainer or the run's own submitters" if summary.retracted else ""
            ),
            reruns=reruns,
            rerun_of=tuple(sorted(found.rerun_of.get(digest, ()))),
            advisories=marks.of(digest),
            cleared=marks.cleared.get(digest, ()),
            held_out=verdict,
            held_out_reason=_held_out_reason(verdict),
        )
    return Standings(runs=result, marks=marks, reruns=frozenset(found.rerun_of))


def standing(registry: Registry, digest: str) -> Standing:
    """``standings`` of one run, read from its file.  Raises ``CheckFailed`` when the trust root chain does not
    verify."""
    return standings(registry, [digest])[digest]


__all__ = [
    "FAILS",
    "GENERALIZES",
    "Judge",
    "Marks",
    "RecordTrust",
    "RunLike",
    "RunRef",
    "Standing",
    "Standings",
    "VerifyReport",
    "advisory_marks",
    "affected_runs",
    "all_record_digests",
    "board_runs",
    "cap_levels",
    "evidence_levels",
    "generalizing",
    "held_out_verdicts",
    "judged_standing",
    "keeps_samples",
    "named_reruns",
    "ranking_trust",
    "record_level",
    "record_marks",
    "rerun_run",
    "retracted_digests",
    "run_marks",
    "standing",
    "standings",
    "trust_summaries",
    "verifier_rerun_run",
    "verifier_rerun_runs",
    "verifier_reruns",
    "verify_report",
    "with_held_out",
]
