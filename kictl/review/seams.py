"""The modules behind the review's seams: signatures through ``kictl.trust``, evidence at head,
leaderboards through ``kictl.rank``.

``default_checks()`` wires them; tests pass other ``Checks`` to isolate a step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING

from kictl import layout, rank, trust
from kictl.errors import CheckFailed, KictlError, RecordError
from kictl.index.query import QueryIndex
from kictl.layout import (
    ATTESTATIONS_DIR,
    ROOT_FILE,
)
from kictl.policy import Policy
from kictl.records import (
    StoredRecord,
)
from kictl.store.git import GitHistory
from kictl.store.registry import Registry

if TYPE_CHECKING:
    from kictl.rank import RankedRow
    from kictl.rank.diffs import GroupChange
    from kictl.trust import TrustRoot
from kictl.review.model import (
    AttestationVerdict,
    Checks,
    GroupDiff,
    LeaderboardDiff,
    Move,
    StaleGroup,
    Standing,
    VerifyAttestation,
)
from kictl.review.revision import claimed_predicate_type, read_paths
from kictl.standing import judged_standing


@lru_cache(maxsize=4)
def _trust_root(data: bytes) -> TrustRoot:
    """The base's trust root, parsed once per review (not once per envelope); raises ``RecordError``."""

    return trust.load_root(data, source=f"the base's {ROOT_FILE}")


def verify_with_trust(
    envelope: bytes, subject: StoredRecord, root: bytes, signed_at: datetime, *, owners: frozenset[str] = frozenset()
) -> AttestationVerdict:
    """The ``verify_attestation`` seam filled with ``trust.verify_attestation`` (docs/trust.md).

    ``owners``: the record's original submitter (``trust.record_owners``), whom a retraction may come from
    (``trust.may_retract``); without them only a maintainer's retraction verifies.  Never raises: a rejected
    envelope, or a base trust root that does not parse, is a verdict with its ``problem``.
    """

    try:
        verified = trust.verify_attestation(
            envelope, subject=subject, root=_trust_root(root), signed_at=signed_at, submitters=owners
        )
    except trust.AttestationRejected as exc:  # signatures verified; something else is wrong
        roles = {role for signer in exc.signers for role in signer.roles}
        ordered = tuple(role for role in trust.ROLES if role in roles)
        return AttestationVerdict(exc.predicate_type, ordered, problem=exc.message)
    except (CheckFailed, RecordError) as exc:
        return AttestationVerdict(None, problem=exc.message)
    rerun_run = getattr(verified.predicate, "run_digest", None) if verified.predicate_type == "rerun" else None
    return AttestationVerdict(verified.predicate_type, verified.roles, rerun_run=rerun_run)


class _HeadAttestations:
    """The head's attestation files by record digest, and their signing times as the base's main line gives them
    (docs/trust.md: an envelope on it counts from the commit that merged it, one the pull request adds from the
    base tip's commit time), each read from git once."""

    def __init__(self, git: GitHistory, head: str, base: str) -> None:
        self.git = git
        self.head = head
        self.base = base
        self._folders: dict[str, list[str]] | None = None
        self._times: tuple[dict[str, datetime], datetime] | None = None

    def folders(self) -> dict[str, list[str]]:
        """Record digest -> the head's attestation paths about it."""
        if self._folders is None:
            self._folders = {}
            for path in self.git.list_files(self.head, ATTESTATIONS_DIR):
                named = layout.parse_attestation_path(path)
                if named is not None:
                    self._folders.setdefault(named[0], []).append(path)
        return self._folders

    def times(self) -> tuple[dict[str, datetime], datetime]:
        """Path -> signing time for the envelopes on the base's main line, and the bound for every other one."""
        if self._times is None:
            now = datetime.now(UTC).replace(microsecond=0)
            merged = self.git.merged_times(ATTESTATIONS_DIR, self.base)
            times = {path: min(datetime.fromtimestamp(stamp, UTC), now) for path, stamp in merged.items()}
            self._times = (times, min(datetime.fromtimestamp(self.git.committer_time(self.base), UTC), now))
        return self._times


class TrustVerifier:
    """``verify_with_trust`` with what a retraction is judged by: the record's original submitter at the head.

    The one rule (docs/trust.md "Who may retract", ``trust.may_retract``) needs the record's earliest valid
    submission, so a retraction's verdict reads every envelope about its record at the head and judges
    them as readers will once it is merged: by the base's root, an envelope on the base's main line at the
    commit that merged it, one the pull request adds at the base tip's time (the review's signing bound).
    """

    def __init__(self, registry: Registry, base: str, head: str) -> None:
        self.git = registry.git
        self.base = base
        self.head = head
        self._attestations = _HeadAttestations(registry.git, head, base)

    def __call__(self, envelope: bytes, subject: StoredRecord, root: bytes, signed_at: datetime) -> AttestationVerdict:
        if claimed_predicate_type(envelope) != "retraction":
            return verify_with_trust(envelope, subject, root, signed_at)
        return verify_with_trust(envelope, subject, root, signed_at, owners=self.owners(subject, root))

    def owners(self, subject: StoredRecord, root: bytes) -> frozenset[str]:
        try:
            parsed = _trust_root(root)
            times, bound = self._attestations.times()
            paths = self._attestations.folders().get(subject.digest, [])
            data = read_paths(self.git, self.head, paths)
        except KictlError:
            return frozenset()
        envelopes = [
            (path, body, times.get(path, bound), path in times)
            for path, body in data.items()
            if body is not None and claimed_predicate_type(body) == "submission"
        ]
        return frozenset(trust.submission_owners(subject, parsed, envelopes))


def verify_root_update_with_trust(previous: bytes, new: bytes) -> None:
    """The ``verify_root_update`` seam: ``trust.verify_root_update`` (TUF §5.3.4-5); raises ``CheckFailed``."""

    trust.verify_root_update(previous, new)


class HeadEvidence:
    """Evidence levels of runs (docs/trust.md) as the head's attestations make them, judged by the base's root.

    ``standing.evidence_levels`` reads the working tree and verifies its trust
    root; a review reads git objects and judges with the base's root, so this
    source reads the head's envelopes from git and hands them to
    ``standing.judged_standing``.  A valid ``submission`` makes a run
    ``reported`` and a verifier's ``rerun`` moves it further, and a valid
    ``retraction`` leaves it out, so only envelopes that claim one of those
    three types are verified.  Signing time
    (docs/trust.md): an envelope already on the base's main line counts from
    the commit that merged it there; one the PR adds, from the base tip's
    commit time (never the PR's own dates).  Levels are cached; a record that cannot be read stays ``unsigned``.
    """

    def __init__(
        self,
        registry: Registry,
        head: str,
        root: bytes | None,
        policy: Policy,
        load: Callable[[str], StoredRecord],
        base: str | None = None,
        preload: Callable[[Sequence[str]], None] | None = None,
    ) -> None:
        self.git = registry.git
        self.head = head
        self.base = base if base is not None else head
        self.root_bytes = root
        self.policy = policy
        self.load = load
        self.preload = preload  # reads many records in one pass before ``load`` asks for each
        self.levels: dict[str, str] = {}
        #: runs a leaderboard leaves out: those valid verifier ``rerun`` attestations judged so far name as their
        #: own (``runDigest``), and those validly retracted (as ``standing.ranking_trust`` for every reader)
        self.rerun_runs: set[str] = set()
        self._attestations = _HeadAttestations(registry.git, head, self.base)
        self._bound = datetime.now(UTC)

    def __call__(self, digests: Sequence[str]) -> dict[str, str]:
        missing = [digest for digest in dict.fromkeys(digests) if digest not in self.levels]
        if missing:
            self._judge(missing)
        return {digest: self.levels[digest] for digest in digests}

    def _envelopes(self) -> dict[str, list[str]]:
        return self._attestations.folders()

    def _signing_times(self) -> dict[str, datetime]:
        times, self._bound = self._attestations.times()
        return times

    def _judge(self, digests: Sequence[str]) -> None:
        self.levels.update(dict.fromkeys(digests, "unsigned"))
        try:
            root = _trust_root(self.root_bytes) if self.root_bytes is not None else None
        except RecordError:
            root = None
        if root is None or root.empty:
            return
        folders = self._envelopes()
        data = read_paths(self.git, self.head, [path for digest in digests for path in folders.get(digest, ())])
        if self.preload is not None:
            self.preload([digest for digest in digests if folders.get(digest)])
        for digest in digests:
            reruns = [
                (path, data[path])
                for path in folders.get(digest, ())
                if path in data and claimed_predicate_type(data[path]) in ("submission", "rerun", "retraction")
            ]
            if not reruns:
                continue
            try:
                subject = self.load(digest)
            except KictlError:
                continue
            times = self._signing_times()
            envelopes = [(path, body, times.get(path, self._bound), path in times) for path, body in reruns]
            judged, reruns_named = judged_standing(
                subject, root, envelopes, rerun_tolerance=self.policy.rerun_tolerance
            )
            self.levels[digest] = judged.level
            if judged.retracted:  # left out as every reader leaves it out (standing.ranking_trust, trust.may_retract)
                self.rerun_runs.add(digest)
            self.rerun_runs.update(reruns_named)  # a verifier's own rerun: evidence, never a contender


def _standing(row: RankedRow) -> Standing:
    return Standing(
        implementation=row.implementation_label,
        run=row.run.digest,
        rank=row.rank,
        latency_ns=row.latency_ns,
        evidence=row.evidence,
        stale=row.stale,
        observed_at=row.run.observed_at,
    )


def _group_diff(change: GroupChange) -> GroupDiff:
    moves = sorted(
        change.rank_changes,
        key=lambda c: (c.after_rank is None, c.after_rank or 0, c.before_rank or 0, c.name),
    )
    return GroupDiff(
        key=change.key.digest,
        definition=change.definition,
        workload=change.workload_name,
        gpu=change.key.gpu,
        comparability=change.key.comparability,
        statistic=change.key.statistic,
        before_leader=_standing(change.before_leader) if change.before_leader else None,
        after_leader=_standing(change.after_leader) if change.after_leader else None,
        moves=tuple(Move(c.name, c.before_rank, c.after_rank, c.before_ns, c.after_ns) for c in moves),
    )


def leaderboards_with_rank(
    registry: Registry, base: str, head: str, policy: Policy, new_runs: Sequence[str], tip: str | None = None
) -> LeaderboardDiff:
    """The ``leaderboards`` seam filled with ``kictl.rank`` over snapshots of the query index (docs/leaderboards.md).

    ``rank.diff_states`` of the two revisions (staleness at each commit's
    time) gives each changed group; a group that only grew stale is left out
    (the PR did not touch it).  ``rank.stale_groups`` gives the groups of the
    new runs' definitions and GPUs whose #1 is stale at the head's time.
    Evidence: ``HeadEvidence``.  Raises ``RegistryError`` when the index
    cannot be built, ``NotFoundError`` for an unknown revision.
    """

    trust_rev = tip if tip is not None else base
    root = read_paths(registry.git, trust_rev, [ROOT_FILE]).get(ROOT_FILE)
    with QueryIndex.open(registry) as query:
        before = query.snapshot(base)
        after = query.snapshot(head)
        try:
            evidence = HeadEvidence(registry, head, root, policy, after.load_record, trust_rev, after.load_records)
            after_time = rank.commit_time(registry, head)
            diff = rank.diff_states(
                before,
                after,
                policy=policy,
                before_time=rank.commit_time(registry, base),
                after_time=after_time,
                evidence_of=evidence,
                reruns_of=lambda: evidence.rerun_runs,
            )
            stale = []
            for group in rank.stale_groups(after, new_runs, policy=policy, now=after_time, evidence_of=evidence):
                leader = group.leader
                assert leader is not None
                facts = after.definition(leader.run.definition) if leader.run.definition else None
                stale.append(
                    StaleGroup(
                        key=group.comparison_key,
                        definition=facts.name if facts else None,
                        workload=group.workload_name,
                        gpu=group.key.gpu,
                        leader=_standing(leader),
                    )
                )
        finally:
            before.close()
            after.close()
    groups = tuple(_group_diff(change) for change in diff.groups if change.new_first or change.rank_changes)
    return LeaderboardDiff(groups=groups, stale=tuple(stale))


def default_checks(registry: Registry | None = None, base: str | None = None, head: str | None = None) -> Checks:
    """The seams filled: ``kictl.trust`` for signatures and root rotation, ``kictl.rank`` for leaderboards.

    With the review's ``registry``, ``base`` tip and ``head``, a retraction is judged by the record's
    original submitter there (``TrustVerifier``); without, only a maintainer's retraction verifies.
    """
    verify: VerifyAttestation = verify_with_trust
    if registry is not None and base is not None and head is not None:
        verify = TrustVerifier(registry, base, head)
    return Checks(
        verify_attestation=verify,
        verify_root_update=verify_root_update_with_trust,
        leaderboards=leaderboards_with_rank,
    )


_NO_TRUST = "no signature verifier was given to the review"
_NO_RANK = "no ranking was given to the review"
