"""What a review produces and what it is given: findings, the results behind its seams, the ``Checks``
it runs with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kictl.policy import Policy
from kictl.records import (
    StoredRecord,
)
from kictl.standing import verifier_rerun_run
from kictl.store.registry import Registry


@dataclass(frozen=True, slots=True)
class Finding:
    """One lint or hint: its code, the file (or comparison group) it is about, and what it says."""

    code: str
    message: str
    path: str | None = None
    group: str | None = None

    @property
    def where(self) -> str:
        return self.path or (f"group {self.group}" if self.group else "")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message, "path": self.path}
        if self.group is not None:
            out["group"] = self.group
        return out


@dataclass(frozen=True, slots=True)
class NotChecked:
    """A check the review could not run, and why."""

    check: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"check": self.check, "reason": self.reason}


# --------------------------------------------------------------------------- seams


@dataclass(frozen=True, slots=True)
class AttestationVerdict:
    """What the trust module says of one envelope.

    ``predicate_type`` is the short type (``submission``, ``rerun``, ``review``,
    ``retraction``) and ``roles`` those of the signing key(s) in the trust root;
    ``problem`` says why the envelope was rejected (``None`` when it verified).
    """

    predicate_type: str | None
    roles: tuple[str, ...] = ()
    problem: str | None = None
    rerun_run: str | None = None  # a rerun's own BenchmarkRun (its predicate's runDigest)

    @property
    def valid(self) -> bool:
        return self.problem is None

    @property
    def verifier_rerun(self) -> str | None:
        """The run this envelope names as a verifier's rerun of its record (``kictl.standing``'s one rule), or
        ``None`` (not valid, not a verifier's ``rerun``)."""
        return verifier_rerun_run(self.predicate_type, self.roles, self.rerun_run) if self.valid else None


@dataclass(frozen=True, slots=True)
class Standing:
    """An implementation's row in a comparison group's leaderboard."""

    implementation: str
    run: str
    rank: int
    latency_ns: int
    evidence: str  # unsigned | reported | verified | disputed
    stale: bool = False
    observed_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "implementation": self.implementation,
            "run": self.run,
            "rank": self.rank,
            "latencyNs": self.latency_ns,
            "evidence": self.evidence,
            "stale": self.stale,
            "observedAt": self.observed_at,
        }


@dataclass(frozen=True, slots=True)
class Move:
    """An implementation whose rank or latency differs between base and head (``None``: absent there)."""

    implementation: str
    before_rank: int | None
    after_rank: int | None
    before_ns: int | None
    after_ns: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "implementation": self.implementation,
            "beforeRank": self.before_rank,
            "afterRank": self.after_rank,
            "beforeNs": self.before_ns,
            "afterNs": self.after_ns,
        }


@dataclass(frozen=True, slots=True)
class GroupDiff:
    """One comparison group before and after the PR (docs/leaderboards.md)."""

    key: str  # the comparison key, sha256:...
    definition: str | None
    workload: str
    gpu: str
    comparability: str
    statistic: str
    before_leader: Standing | None
    after_leader: Standing | None
    moves: tuple[Move, ...] = ()

    @property
    def label(self) -> str:
        return " · ".join([self.definition or "?", self.workload, self.gpu, self.comparability, self.statistic])

    @property
    def new_first(self) -> bool:
        before = self.before_leader.run if self.before_leader else None
        return self.after_leader is not None and self.after_leader.run != before

    @property
    def margin(self) -> float | None:
        """How many times faster the new #1 is than the previous one."""
        if not self.new_first or self.before_leader is None or self.after_leader is None:
            return None
        if self.after_leader.latency_ns <= 0:
            return None
        return self.before_leader.latency_ns / self.after_leader.latency_ns

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "definition": self.definition,
            "workload": self.workload,
            "gpu": self.gpu,
            "comparability": self.comparability,
            "statistic": self.statistic,
            "before": self.before_leader.to_json() if self.before_leader else None,
            "after": self.after_leader.to_json() if self.after_leader else None,
            "newFirst": self.new_first,
            "margin": self.margin,
            "moves": [move.to_json() for move in self.moves],
        }


@dataclass(frozen=True, slots=True)
class StaleGroup:
    """A comparison group the PR could refresh: same definition and GPU as its runs, its #1 stale."""

    key: str
    definition: str | None
    workload: str
    gpu: str
    leader: Standing

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "definition": self.definition,
            "workload": self.workload,
            "gpu": self.gpu,
            "leader": self.leader.to_json(),
        }


@dataclass(frozen=True, slots=True)
class LeaderboardDiff:
    """What the leaderboard seam returns: the groups the PR changes, and stale groups it could refresh."""

    groups: tuple[GroupDiff, ...] = ()
    stale: tuple[StaleGroup, ...] = ()


#: ``(envelope bytes, subject record, trust root bytes of the base, signing time) -> verdict``.
#: Wiring: ``trust.verify_attestation(envelope, subject=..., root=trust.load_root(root), signed_at=...)``,
#: a ``CheckFailed`` becoming ``AttestationVerdict(None, problem=exc.message)``.
VerifyAttestation = Callable[[bytes, StoredRecord, bytes, datetime], AttestationVerdict]
#: ``(previous root bytes, new root bytes) -> None``, raising ``CheckFailed``: ``trust.verify_root_update``.
VerifyRootUpdate = Callable[[bytes, bytes], None]
#: ``(registry, merge base, head commit, policy, new run digests, base tip) -> LeaderboardDiff``:
#: ``rank.diff_revisions`` over the query index, its ``GroupChange``s as ``GroupDiff``s; evidence
#: judged by the base tip's trust root.
Leaderboards = Callable[[Registry, str, str, Policy, Sequence[str], str], LeaderboardDiff]


@dataclass(frozen=True, slots=True)
class Checks:
    """The review's seams to ``kictl.trust`` and ``kictl.rank``; ``None`` means "not checked"."""

    verify_attestation: VerifyAttestation | None = None
    verify_root_update: VerifyRootUpdate | None = None
    leaderboards: Leaderboards | None = None
