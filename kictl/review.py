"""Review of a registry pull request: what changed, which lints fail it, which hints advise (DESIGN §8).

``review(registry, base, head)`` compares the head revision with the merge
base of ``base`` and ``head`` and judges the files that changed, never the
whole registry, as the conda-forge staged-recipes linter and MLPerf's
submission checker do: *lints* fail the review (exit 1), *hints* advise the
maintainer.  Everything is read from git objects (``GitHistory.read_files``,
one pass per folder), never from the working tree (the leaderboards come
from the query index's snapshots of the two revisions; the index itself is
the cache under ``.kictl/``), and nothing from the pull request is executed:
a definition's reference is parsed (``ast``), not run.

Lints (issue 7):

* ``path-not-allowed``: a file outside ``registry/`` and ``definitions/``, or
  inside them but outside the layout of DESIGN §4.  A pull request touching
  neither folder is a code-only PR: the review says so and passes.
* ``published-changed``: a published record, blob, attestation or trust-root
  version edited or deleted (the registry is append-only, DESIGN §4).
* ``bad-name-or-form``: a file name that is not its digest, a record in the
  wrong kind folder, bytes not in normal form (``validate.check_*_file``).
* ``schema``: a record, policy or definition folder that does not parse or validate.
* ``dangling-reference``: a reference to a record (or blob) that neither the
  base nor the head has; an attestation about no record.
* ``definition-in-place`` / ``definition-not-compiled``: a definition folder
  that compiles to a record this PR does not add (a changed definition is a new
  record with a new digest; the old one stays).
* ``below-floor``: a passed run faster than its physical floor (DESIGN §6),
  from ``kictl.families``.
* ``unsigned-run``, ``bad-attestation``, ``trust-root-threshold``: signatures
  and the trust root (DESIGN §5), through the trust seam below.

Hints: ``new-first``, ``rank-change``, ``rerun-suggested`` and ``stale-group``
through the leaderboard seam; ``source-native-no-rerun``,
``definition-new-version`` and ``policy-changed`` directly.

Seams.  Signature verification belongs to ``kictl.trust`` and ranking to
``kictl.rank``; review calls them through ``Checks``, three optional
functions.  A check whose function is absent (or fails) is reported under
"not checked" with the reason, never silently passed.  ``default_checks``
fills them: ``verify_with_trust`` (``trust.verify_attestation`` against the
base's trust root), ``verify_root_update_with_trust`` and
``leaderboards_with_rank`` (``rank.diff_states`` and ``rank.stale_groups``
over snapshots of the query index of both revisions, with evidence levels
from ``HeadEvidence``: the head's rerun attestations judged by the base's root).

Rendering.  ``render_text`` (100 columns), ``render_markdown`` (a PR comment:
a summary line, lints first, one table per comparison group, at most
``MARKDOWN_LIMIT`` characters with the overflow summarised) and
``ReviewReport.to_json``.
"""

from __future__ import annotations

import base64
import binascii
import posixpath
import re
import tempfile
import textwrap
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from kictl import canon, definitions, families, layout, render
from kictl.errors import CheckFailed, KictlError, RecordError
from kictl.families.gpus import find_gpu
from kictl.layout import (
    ATTESTATIONS_DIR,
    BLOBS_DIR,
    DEFINITIONS_DIR,
    POLICY_FILE,
    RECORDS_DIR,
    ROOT_FILE,
)
from kictl.policy import Policy
from kictl.records import (
    KINDS,
    BenchmarkRun,
    Definition,
    ExecutionEnvironment,
    StoredRecord,
    Workload,
    record_from_bytes,
)
from kictl.render import latency
from kictl.store import Change, GitHistory, Registry
from kictl.validate import Problem, check_blob_file, check_envelope_file, check_record_file, check_references

if TYPE_CHECKING:
    from kictl.rank import GroupChange, RankedRow
    from kictl.trust import TrustRoot

#: A PR comment holds at most 65,536 characters; the review keeps a margin.
MARKDOWN_LIMIT = 60_000
#: A new #1 more than this much faster than a verified previous #1 deserves a rerun (issue 7).
RERUN_MARGIN = 0.20
#: ``https://kernelindex.dev/attestation/<type>/v1`` (DESIGN §5).
PREDICATE_PREFIX = "https://kernelindex.dev/attestation/"
PREDICATE_SUFFIX = "/v1"

#: Lint codes and what each means; every one fails the review.
LINTS: dict[str, str] = {
    "path-not-allowed": "a file outside registry/ and definitions/, or outside their layout",
    "published-changed": "a published record, blob, attestation or trust-root version edited or deleted",
    "bad-name-or-form": "a file name that is not its digest, or bytes not in normal form",
    "schema": "a record, policy or definition folder that does not validate",
    "dangling-reference": "a reference to a record or blob that neither base nor head has",
    "definition-in-place": "a definition changed in place: its new record is not added",
    "definition-not-compiled": "a new definition folder whose records are not added",
    "below-floor": "a run faster than its physical floor",
    "unsigned-run": "a new run without a valid submission attestation by a submitter key",
    "bad-attestation": "an attestation that does not verify (signature, key validity at the time, role)",
    "trust-root-threshold": "a trust-root change without the previous version's maintainer threshold, "
    "or whose versions are not kept in order",
}
#: Hint codes; they advise and never fail the review.
HINTS: dict[str, str] = {
    "new-first": "a new #1 in a comparison group",
    "rank-change": "ranks change in a comparison group, its #1 stays",
    "rerun-suggested": "a new #1 more than 20% ahead of a verified record",
    "stale-group": "a comparison group whose #1 is stale, which the submitter could refresh",
    "source-native-no-rerun": "a run imported from another harness with no rerun attestation",
    "definition-new-version": "a definition gets a new record; older runs stay with the old one",
    "policy-changed": "the registry policy changes",
}

_DEFINITION_FILES = (definitions.DEFINITION_FILE, definitions.REFERENCE_FILE, definitions.WORKLOADS_FILE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


# --------------------------------------------------------------------------- results


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

    @property
    def valid(self) -> bool:
        return self.problem is None


@dataclass(frozen=True, slots=True)
class Standing:
    """An implementation's row in a comparison group's leaderboard."""

    implementation: str
    run: str
    rank: int
    latency_ns: int
    evidence: str  # reported | verified | disputed
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
    """One comparison group before and after the PR (DESIGN §6)."""

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
#: ``(registry, base commit, head commit, policy, new run digests) -> LeaderboardDiff``:
#: ``rank.diff_revisions`` over the query index, its ``GroupChange``s as ``GroupDiff``s.
Leaderboards = Callable[[Registry, str, str, Policy, Sequence[str]], LeaderboardDiff]


@dataclass(frozen=True, slots=True)
class Checks:
    """The review's seams to ``kictl.trust`` and ``kictl.rank``; ``None`` means "not checked"."""

    verify_attestation: VerifyAttestation | None = None
    verify_root_update: VerifyRootUpdate | None = None
    leaderboards: Leaderboards | None = None


# --------------------------------------------------------------------------- the modules behind the seams


@lru_cache(maxsize=4)
def _trust_root(data: bytes) -> TrustRoot:
    """The base's trust root, parsed once per review (not once per envelope); raises ``RecordError``."""
    from kictl import trust

    return trust.load_root(data, source=f"the base's {ROOT_FILE}")


def verify_with_trust(envelope: bytes, subject: StoredRecord, root: bytes, signed_at: datetime) -> AttestationVerdict:
    """The ``verify_attestation`` seam filled with ``trust.verify_attestation`` (DESIGN §5).

    Never raises: a rejected envelope, or a base trust root that does not
    parse, is a verdict with its ``problem``.
    """
    from kictl import trust

    try:
        verified = trust.verify_attestation(envelope, subject=subject, root=_trust_root(root), signed_at=signed_at)
    except trust.AttestationRejected as exc:  # signatures verified; something else is wrong
        roles = {role for signer in exc.signers for role in signer.roles}
        ordered = tuple(role for role in trust.ROLES if role in roles)
        return AttestationVerdict(exc.predicate_type, ordered, problem=exc.message)
    except (CheckFailed, RecordError) as exc:
        return AttestationVerdict(None, problem=exc.message)
    return AttestationVerdict(verified.predicate_type, verified.roles)


def verify_root_update_with_trust(previous: bytes, new: bytes) -> None:
    """The ``verify_root_update`` seam: ``trust.verify_root_update`` (TUF §5.3.4-5); raises ``CheckFailed``."""
    from kictl import trust

    trust.verify_root_update(previous, new)


class HeadEvidence:
    """Evidence levels of runs (DESIGN §5) as the head's attestations make them, judged by the base's root.

    ``trust.evidence_levels`` reads the working tree and verifies its trust
    root; a review reads git objects and judges with the base's root, so this
    source reads the head's envelopes from git and hands them to
    ``trust.judge_attestations``.  Only a verifier's ``rerun`` moves a level,
    so only envelopes that claim to be reruns are verified.  Signing time: the
    author time of the commit that added the envelope (the head's time when no
    commit did).  Levels are cached; a record that cannot be read stays ``reported``.
    """

    def __init__(
        self,
        registry: Registry,
        head: str,
        root: bytes | None,
        policy: Policy,
        load: Callable[[str], StoredRecord],
    ) -> None:
        self.git = registry.git
        self.head = head
        self.root_bytes = root
        self.policy = policy
        self.load = load
        self.levels: dict[str, str] = {}
        self._folders: dict[str, list[str]] | None = None
        self._times: dict[str, datetime] | None = None

    def __call__(self, digests: Sequence[str]) -> dict[str, str]:
        missing = [digest for digest in dict.fromkeys(digests) if digest not in self.levels]
        if missing:
            self._judge(missing)
        return {digest: self.levels[digest] for digest in digests}

    def _envelopes(self) -> dict[str, list[str]]:
        if self._folders is None:
            self._folders = {}
            for path in self.git.list_files(self.head, ATTESTATIONS_DIR):
                named = layout.parse_attestation_path(path)
                if named is not None:
                    self._folders.setdefault(named[0], []).append(path)
        return self._folders

    def _signing_times(self) -> dict[str, datetime]:
        if self._times is None:
            added = self.git.first_added(ATTESTATIONS_DIR, self.head)
            self._times = {path: datetime.fromtimestamp(info.timestamp, UTC) for path, info in added.items()}
        return self._times

    def _judge(self, digests: Sequence[str]) -> None:
        from kictl import trust

        self.levels.update(dict.fromkeys(digests, "reported"))
        try:
            root = _trust_root(self.root_bytes) if self.root_bytes is not None else None
        except RecordError:
            root = None
        if root is None or root.empty:
            return
        folders = self._envelopes()
        data = read_paths(self.git, self.head, [path for digest in digests for path in folders.get(digest, ())])
        for digest in digests:
            reruns = [
                (path, data[path])
                for path in folders.get(digest, ())
                if path in data and claimed_predicate_type(data[path]) == "rerun"
            ]
            if not reruns:
                continue
            try:
                subject = self.load(digest)
            except KictlError:
                continue
            times = self._signing_times()
            head_time = datetime.fromtimestamp(self.git.commit_info(self.head).timestamp, UTC)
            envelopes = [(path, body, times.get(path, head_time), path in times) for path, body in reruns]
            _, standing = trust.judge_attestations(
                subject, root, envelopes, rerun_tolerance=self.policy.rerun_tolerance
            )
            self.levels[digest] = standing.level


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
    registry: Registry, base: str, head: str, policy: Policy, new_runs: Sequence[str]
) -> LeaderboardDiff:
    """The ``leaderboards`` seam filled with ``kictl.rank`` over snapshots of the query index (DESIGN §6).

    ``rank.diff_states`` of the two revisions (staleness at each commit's
    time) gives each changed group; a group that only grew stale is left out
    (the PR did not touch it).  ``rank.stale_groups`` gives the groups of the
    new runs' definitions and GPUs whose #1 is stale at the head's time.
    Evidence: ``HeadEvidence``.  Raises ``RegistryError`` when the index
    cannot be built, ``NotFoundError`` for an unknown revision.
    """
    from kictl import rank
    from kictl.index import QueryIndex

    root = read_paths(registry.git, base, [ROOT_FILE]).get(ROOT_FILE)
    with QueryIndex.open(registry) as query:
        before = query.snapshot(base)
        after = query.snapshot(head)
        try:
            evidence = HeadEvidence(registry, head, root, policy, after.load_record)
            after_time = rank.commit_time(registry, head)
            diff = rank.diff_states(
                before,
                after,
                policy=policy,
                before_time=rank.commit_time(registry, base),
                after_time=after_time,
                evidence_of=evidence,
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


def default_checks() -> Checks:
    """The seams filled: ``kictl.trust`` for signatures and root rotation, ``kictl.rank`` for leaderboards."""
    return Checks(
        verify_attestation=verify_with_trust,
        verify_root_update=verify_root_update_with_trust,
        leaderboards=leaderboards_with_rank,
    )


_NO_TRUST = "no signature verifier was given to the review"
_NO_RANK = "no ranking was given to the review"


# --------------------------------------------------------------------------- the report


@dataclass
class ReviewReport:
    """Everything ``review`` found, in the order it is shown."""

    base_ref: str
    head_ref: str
    base: str  # the base revision's commit
    merge_base: str
    head: str
    changes: list[Change] = field(default_factory=list)
    code_only: bool = False
    lints: list[Finding] = field(default_factory=list)
    hints: list[Finding] = field(default_factory=list)
    added_records: dict[str, int] = field(default_factory=dict)
    added_blobs: int = 0
    added_attestations: int = 0
    leaderboards: list[GroupDiff] | None = None
    not_checked: list[NotChecked] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.lints

    @property
    def verdict(self) -> str:
        return "pass" if self.ok else "fail"

    def findings_line(self) -> str:
        """What was found, without the verdict."""
        if self.code_only:
            return "a code-only PR (it touches neither registry/ nor definitions/); nothing to review"
        if not self.changes:
            return "no changes between the merge base and the head"
        return (
            f"{_count(len(self.lints), 'lint')}, {_count(len(self.hints), 'hint')} "
            f"in {_count(len(self.changes), 'changed file')}"
        )

    def summary(self) -> str:
        """The one-line verdict: ``pass: ...`` or ``fail: ...``."""
        return f"{self.verdict}: {self.findings_line()}"

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "summary": self.summary(),
            "base": {"ref": self.base_ref, "commit": self.base, "mergeBase": self.merge_base},
            "head": {"ref": self.head_ref, "commit": self.head},
            "codeOnly": self.code_only,
            "changes": [{"status": change.status, "path": change.path} for change in self.changes],
            "added": {
                "records": dict(self.added_records),
                "blobs": self.added_blobs,
                "attestations": self.added_attestations,
            },
            "lints": [finding.to_json() for finding in self.lints],
            "hints": [finding.to_json() for finding in self.hints],
            "leaderboards": None if self.leaderboards is None else [group.to_json() for group in self.leaderboards],
            "notChecked": [item.to_json() for item in self.not_checked],
        }


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


# --------------------------------------------------------------------------- reading a revision


def read_paths(history: GitHistory, rev: str, paths: Iterable[str]) -> dict[str, bytes]:
    """The bytes of the files among ``paths`` at ``rev`` (one ``git cat-file --batch``); absent ones left out.

    Paths with control characters are never asked for: one request is one line.
    """
    wanted = sorted({path for path in paths if path and not _CONTROL.search(path)})
    found = history.read_paths(rev, wanted)
    return {path: data for path, data in found.items() if data is not None}


def record_path_digest(path: str) -> tuple[str, str] | None:
    """``(kind, digest)`` named by a path on the ``registry/records/<kind>/<xx>/<hex>.json`` layout."""
    return layout.parse_record_path(path)


def claimed_predicate_type(envelope: bytes) -> str | None:
    """The predicate type a DSSE envelope *claims*, its signatures unverified (``rerun``, ``submission``, ...).

    Reads ``payload`` (standard base64) as an in-toto Statement and its
    ``predicateType``; ``None`` for anything else.  Used only where the trust
    seam is absent, and reported as unverified.
    """
    try:
        value = canon.parse_json(envelope)
        payload = base64.b64decode(value["payload"], validate=True)
        uri = canon.parse_json(payload)["predicateType"]
    except (RecordError, KeyError, TypeError, ValueError, binascii.Error):
        return None
    if isinstance(uri, str) and uri.startswith(PREDICATE_PREFIX) and uri.endswith(PREDICATE_SUFFIX):
        return uri[len(PREDICATE_PREFIX) : -len(PREDICATE_SUFFIX)] or None
    return None


def _policy_from_bytes(data: bytes, source: str) -> Policy:
    """``registry/policy.json`` from its bytes; raises ``RecordError``."""
    canon.parse_json(data, source=source)
    try:
        return Policy.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise RecordError(f"{source}: {canon.format_path(tuple(first['loc']))}: {first['msg']}") from exc


# --------------------------------------------------------------------------- the review


_area = layout.area


_READ = frozenset({"record", "blob", "attestation", "root", "trust", "policy"})
_PUBLISHED = {"record": "record", "blob": "blob", "attestation": "attestation", "trust": "trust-root version"}


def _definition_folder(path: str) -> str | None:
    """``definitions/<family>/<name>`` for a file of a definition folder, else ``None``."""
    parts = path.split("/")
    if len(parts) == 4 and parts[0] == DEFINITIONS_DIR and parts[3] in _DEFINITION_FILES:
        return "/".join(parts[:3])
    return None


class _Review:
    """The state of one review while it runs; ``review`` is its entry point."""

    def __init__(self, registry: Registry, report: ReviewReport, checks: Checks) -> None:
        self.registry = registry
        self.git = registry.git
        self.report = report
        self.checks = checks
        self.head_bytes: dict[str, bytes] = {}
        self.known: dict[str, str] = {}  # digest -> kind, base and head together
        self.head_paths: dict[str, str] = {}  # digest -> path of the record at head
        self.new_records: list[tuple[str, StoredRecord]] = []
        self.new_envelopes: dict[str, list[str]] = {}  # subject digest -> envelope paths
        self.loaded: dict[str, StoredRecord | None] = {}

    # ----------------------------------------------------------------- findings

    def lint(self, code: str, message: str, path: str | None = None, group: str | None = None) -> None:
        assert code in LINTS, code
        self.report.lints.append(Finding(code, message, path, group))

    def hint(self, code: str, message: str, path: str | None = None, group: str | None = None) -> None:
        assert code in HINTS, code
        self.report.hints.append(Finding(code, message, path, group))

    def problems(self, problems: Iterable[Problem], code: str) -> None:
        for problem in problems:
            self.lint(code, problem.message, problem.path)

    # ----------------------------------------------------------------- records at head

    def record(self, digest: str) -> StoredRecord | None:
        """A record of base or head by digest (head's bytes), parsed once; ``None`` when absent or invalid."""
        if digest in self.loaded:
            return self.loaded[digest]
        path = self.head_paths.get(digest)
        found: StoredRecord | None = None
        if path is not None:
            data = self.head_bytes.get(path)
            if data is None:
                data = read_paths(self.git, self.report.head, [path]).get(path)
            if data is not None:
                try:
                    found = record_from_bytes(data, source=path)
                except RecordError:
                    found = None
        self.loaded[digest] = found
        return found

    def preload(self, digests: Iterable[str]) -> None:
        """Read the head's files of these records in one pass per folder."""
        paths = [self.head_paths[d] for d in digests if d not in self.loaded and d in self.head_paths]
        paths = [path for path in paths if path not in self.head_bytes]
        self.head_bytes.update(read_paths(self.git, self.report.head, paths))

    def read_blob(self, digest: str) -> bytes:
        path = layout.blob_path(canon.digest_hex(digest))
        data = self.head_bytes.get(path)
        if data is None:
            data = self.git.read_file(self.report.head, path)
        if data is None:
            raise LookupError(f"no blob {digest}")
        return data

    # ----------------------------------------------------------------- the steps

    def run(self, policy: Policy | None) -> None:
        report = self.report
        areas = {change.path: _area(change.path) for change in report.changes}
        if report.changes and all(area == "outside" for area in areas.values()):
            report.code_only = True
            return
        if not report.changes:
            return
        wanted = [change.path for change in report.changes if change.status != "D" and areas[change.path] in _READ]
        self.head_bytes = read_paths(self.git, report.head, wanted)
        base_records = self.git.list_files(report.merge_base, RECORDS_DIR)
        head_records = self.git.list_files(report.head, RECORDS_DIR)
        for path in base_records:
            named = record_path_digest(path)
            if named is not None:
                self.known[named[1]] = named[0]
        for path in head_records:
            named = record_path_digest(path)
            if named is not None:
                self.known[named[1]] = named[0]
                self.head_paths[named[1]] = path
        blobs = {
            posixpath.basename(p)
            for rev in (report.merge_base, report.head)
            for p in self.git.list_files(rev, BLOBS_DIR)
        }
        if policy is None:
            policy = self._base_policy()

        folders: set[str] = set()
        root_change: Change | None = None
        trust_versions: list[str] = []  # added files under registry/trust/
        for change in report.changes:
            area = areas[change.path]
            if _CONTROL.search(change.path):
                self.lint("path-not-allowed", "a file name with control characters", change.path)
            elif area == "outside":
                self.lint(
                    "path-not-allowed",
                    "outside registry/ and definitions/: a registry PR changes data only "
                    "(send code in a PR of its own)",
                    change.path,
                )
            elif area == "registry-other":
                self.lint(
                    "path-not-allowed",
                    "not a registry path (records/, blobs/, attestations/, trust/, policy.json)",
                    change.path,
                )
            elif area == "definition":
                folder = _definition_folder(change.path)
                if folder is None:
                    self.lint(
                        "path-not-allowed",
                        f"not a definition file ({DEFINITIONS_DIR}/<family>/<name>/{{{','.join(_DEFINITION_FILES)}}})",
                        change.path,
                    )
                else:
                    folders.add(folder)
            elif change.status != "D" and area in _READ and change.path not in self.head_bytes:
                self.lint("path-not-allowed", "not a regular file (a submodule?)", change.path)
            elif area in _PUBLISHED and change.status != "A":
                verb = "deletes" if change.status == "D" else "edits"
                self.lint(
                    "published-changed",
                    f"{verb} a published {_PUBLISHED[area]}: published files are never modified "
                    "(a correction is a new record with a retraction or supersedes attestation)",
                    change.path,
                )
            elif area == "record":
                self._added_record(change.path)
            elif area == "blob":
                self._added_blob(change.path)
            elif area == "attestation":
                self._added_envelope(change.path)
            elif area == "root":
                root_change = change
            elif area == "trust":
                trust_versions.append(change.path)
            elif area == "policy":
                self._policy_change(change)
        self._trust_changes(root_change, trust_versions)

        new = [record for _, record in self.new_records]
        for record in new:
            self.known[record.digest] = record.kind
        source_of = {record.digest: path for path, record in self.new_records}
        self.problems(check_references(new, self.known, source_of), "dangling-reference")
        for path, record in self.new_records:
            for input_name, digest in record.blob_references():
                if canon.digest_hex(digest) not in blobs:
                    self.lint(
                        "dangling-reference",
                        f"$.spec.inputs.{input_name}.digest: no blob {digest} in base or head",
                        path,
                    )
        for subject, paths in sorted(self.new_envelopes.items()):
            if subject not in self.known:
                for path in paths:
                    self.lint("dangling-reference", f"attests {subject}, which neither base nor head has", path)
        for folder in sorted(folders):
            self._definition_folder(folder)

        runs = [(path, record) for path, record in self.new_records if isinstance(record.model, BenchmarkRun)]
        self._floors(runs)
        verdicts = self._signatures(runs)
        self._source_native(runs, verdicts)
        self._leaderboards(policy, [record.digest for _, record in runs])

    def _base_policy(self) -> Policy:
        data = read_paths(self.git, self.report.merge_base, [POLICY_FILE]).get(POLICY_FILE)
        if data is None:
            return Policy()
        try:
            return _policy_from_bytes(data, POLICY_FILE)
        except RecordError:
            return Policy()

    # ----------------------------------------------------------------- files

    def _added_record(self, path: str) -> None:
        record, problems = check_record_file(path, self.head_bytes[path])
        for problem in problems:
            layout = problem.message.startswith("not a record path")
            code = "schema" if record is None and not layout else "bad-name-or-form"
            self.lint(code, problem.message, problem.path)
        if record is not None:
            self.new_records.append((path, record))
            self.loaded[record.digest] = record
            self.head_paths.setdefault(record.digest, path)
            counts = self.report.added_records
            counts[record.kind] = counts.get(record.kind, 0) + 1

    def _added_blob(self, path: str) -> None:
        self.report.added_blobs += 1
        self.problems(check_blob_file(path, self.head_bytes[path]), "bad-name-or-form")

    def _added_envelope(self, path: str) -> None:
        self.report.added_attestations += 1
        problems = check_envelope_file(path, self.head_bytes[path])
        self.problems(problems, "bad-name-or-form")
        parts = path.split("/")
        if len(parts) == 5 and canon.is_hex_digest(parts[3]):
            self.new_envelopes.setdefault(canon.DIGEST_PREFIX + parts[3], []).append(path)

    def _trust_changes(self, root: Change | None, added: Sequence[str]) -> None:
        """DESIGN §5: each new trust-root version follows the one before with the maintainer thresholds.

        The base's ``root.json`` is the previous version; the added
        ``registry/trust/<N>.root.json`` files, in order, must each pass
        ``verify_root_update`` (TUF §5.3.4-5), and the head's ``root.json``
        must be the newest of them byte for byte (``trust.root_chain`` keeps
        every version).  A version file equal to the base's root is the keyless
        root of ``kictl init`` kept as version 1.
        """
        if root is not None and root.status == "D":
            self.lint("published-changed", "deletes the trust root", root.path)
            return
        versions: dict[int, str] = {}
        for path in added:
            number = layout.parse_root_version_path(path)
            if number is None:
                self.lint("path-not-allowed", f"not a trust-root version ({layout.ROOT_VERSION_PATTERN})", path)
            else:
                versions[number] = path
        if root is None and not versions:
            return
        previous = read_paths(self.git, self.report.merge_base, [ROOT_FILE]).get(ROOT_FILE)
        if previous is None:
            return  # a registry's first trust root has no previous version to be signed by
        verify = self.checks.verify_root_update
        if verify is None:
            self.report.not_checked.append(NotChecked("trust root", f"{_NO_TRUST}: the maintainer threshold"))
            return
        newest = self.head_bytes.get(ROOT_FILE, previous) if root is not None else previous
        current = previous
        for number in sorted(versions):
            path = versions[number]
            data = self.head_bytes.get(path)
            if data is None or data == current:
                continue
            try:
                verify(current, data)
            except CheckFailed as exc:
                self.lint("trust-root-threshold", exc.message, path)
                return
            current = data
        if not versions:
            try:
                verify(previous, newest)
            except CheckFailed as exc:
                self.lint("trust-root-threshold", exc.message, ROOT_FILE)
                return
            self.lint(
                "trust-root-threshold",
                f"changes the trust root without keeping the new version as {layout.ROOT_VERSION_PATTERN} "
                "(`kictl trust` writes both)",
                ROOT_FILE,
            )
        elif newest != current:
            self.lint(
                "trust-root-threshold",
                f"{ROOT_FILE} is not byte for byte {posixpath.basename(versions[max(versions)])}, "
                "the newest trust-root version this PR adds",
                ROOT_FILE,
            )

    def _policy_change(self, change: Change) -> None:
        if change.status == "D":
            self.lint("published-changed", "deletes the registry policy", change.path)
            return
        try:
            _policy_from_bytes(self.head_bytes[change.path], change.path)
        except RecordError as exc:
            self.lint("schema", exc.message.removeprefix(f"{change.path}: "), change.path)
            return
        self.hint(
            "policy-changed",
            "changes the registry policy (staleness window, tolerances, baselines): a maintainer's decision; "
            "this review applies the base's policy",
            change.path,
        )

    # ----------------------------------------------------------------- definitions

    def _compile(self, rev: str, folder: str) -> definitions.Compiled | None:
        """Compile ``folder`` as it is at ``rev`` in a scratch copy; ``None`` when it has no definition.json.

        Raises ``RecordError`` when it does not compile.
        """
        files = list(self.git.read_files(rev, folder))
        names = {posixpath.basename(path) for path, _ in files}
        if definitions.DEFINITION_FILE not in names:
            if files:
                raise RecordError(f"{folder}: no {definitions.DEFINITION_FILE}")
            return None
        with tempfile.TemporaryDirectory(prefix="kictl-review-") as scratch:
            root = Path(scratch)
            for path, data in files:
                if posixpath.dirname(path) != folder:
                    continue
                target = root / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            return definitions.compile_folder(root / folder, root)

    def _definition_folder(self, folder: str) -> None:
        try:
            compiled = self._compile(self.report.head, folder)
        except KictlError as exc:
            self.lint("schema", exc.message.removeprefix(f"{folder}: "), folder)
            return
        if compiled is None:
            return  # the folder is gone; its records stay published
        try:
            before = self._compile(self.report.merge_base, folder)
        except KictlError:
            before = None
        old = before.definition.digest if before else None
        head_has = set(self.head_paths)
        new = compiled.definition.digest
        missing = [record for record in compiled.workloads if record.digest not in head_has]
        parts = []
        if new not in head_has:
            parts.append(f"Definition {compiled.definition.name} to {new}")
        if missing:
            labels = ", ".join(record.name for record in missing[:5]) + (", ..." if len(missing) > 5 else "")
            parts.append(f"{_count(len(missing), 'Workload')} ({labels}) to records")
        if parts:
            what = " and ".join(parts)
            if before is None:
                self.lint(
                    "definition-not-compiled",
                    f"compiles {what} this PR does not add (run `kictl definitions compile` and commit them)",
                    folder,
                )
            else:
                kept = f"; the old Definition {old} stays published" if new != old else ""
                self.lint(
                    "definition-in-place",
                    f"changed in place: it compiles {what} this PR does not add; a changed definition is a new "
                    f"record (run `kictl definitions compile` and commit them){kept}",
                    folder,
                )
        if old is not None and old != new and new in head_has:
            self.hint(
                "definition-new-version",
                f"{compiled.definition.name} gets a new Definition {new} (was {old}); runs of the old one stay "
                "attached to it and are not compared with the new one",
                folder,
            )

    # ----------------------------------------------------------------- runs

    def _run_context(self, run: BenchmarkRun) -> tuple[StoredRecord, StoredRecord, StoredRecord] | None:
        """The workload, definition and environment of a run, when head has all three."""
        spec = run.spec
        workload = self.record(spec.workload_digest)
        environment = self.record(spec.environment_digest)
        if workload is None or environment is None or not isinstance(workload.model, Workload):
            return None
        definition = self.record(spec.definition_digest or workload.model.spec.definition_digest)
        if definition is None or not isinstance(definition.model, Definition):
            return None
        if not isinstance(environment.model, ExecutionEnvironment):
            return None
        return workload, definition, environment

    def _floors(self, runs: Sequence[tuple[str, StoredRecord]]) -> None:
        """DESIGN §6: a run faster than its floor is impossible and is rejected in review."""
        passed = [
            (path, record.model)
            for path, record in runs
            if isinstance(record.model, BenchmarkRun)
            and record.model.spec.status == "passed"
            and record.model.spec.timing is not None
        ]
        needed = {digest for _, run in passed for digest in (run.spec.workload_digest, run.spec.environment_digest)}
        self.preload(needed)
        self.preload(
            {
                record.model.spec.definition_digest
                for digest in needed
                if (record := self.record(digest)) is not None and isinstance(record.model, Workload)
            }
        )
        floors: dict[tuple[str, str], families.Floor | None] = {}
        unknown_gpus: Counter[str] = Counter()
        for path, run in passed:
            context = self._run_context(run)
            if context is None:
                continue
            workload, definition, environment = context
            assert isinstance(environment.model, ExecutionEnvironment)
            assert isinstance(workload.model, Workload)
            assert isinstance(definition.model, Definition)
            product = environment.model.spec.hardware.product
            gpu = find_gpu(product)
            if gpu is None:
                unknown_gpus[product] += 1
                continue
            key = (workload.digest, gpu.product)
            if key not in floors:
                try:
                    work = families.work(definition.model.spec, workload.model.spec, self.read_blob)
                    floors[key] = families.floor(work, gpu)
                except (RecordError, LookupError, KeyError, ValueError):
                    floors[key] = None
            floor = floors[key]
            timing = run.spec.timing
            assert timing is not None
            primary = timing.primary_ns()
            if floor is not None and primary < floor.floor_ns:
                self.lint(
                    "below-floor",
                    f"{timing.primary_statistic} {latency(primary)} is below the physical floor "
                    f"{latency(floor.floor_ns)} of workload {workload.name} on {gpu.product} "
                    f"({floor.method}); no run can be faster than its floor",
                    path,
                )
        if unknown_gpus:
            names = ", ".join(sorted(unknown_gpus))
            self.report.not_checked.append(
                NotChecked("floors", f"{sum(unknown_gpus.values())} run(s) on GPUs without datasheet figures: {names}")
            )

    def _signing_times(self) -> dict[str, datetime]:
        added = self.git.first_added(ATTESTATIONS_DIR, self.report.head)
        return {path: datetime.fromtimestamp(info.timestamp, UTC) for path, info in added.items()}

    def _signatures(self, runs: Sequence[tuple[str, StoredRecord]]) -> dict[str, list[AttestationVerdict]] | None:
        """Verify every new envelope through the trust seam; lint runs without a valid submission."""
        verify = self.checks.verify_attestation
        if verify is None:
            if runs or self.new_envelopes:
                self.report.not_checked.append(
                    NotChecked("signatures", f"{_NO_TRUST}: submission signatures and key validity were not verified")
                )
            return None
        root = read_paths(self.git, self.report.merge_base, [ROOT_FILE]).get(ROOT_FILE)
        verdicts: dict[str, list[AttestationVerdict]] = {}
        if root is None:
            for path, _ in runs:
                self.lint("unsigned-run", "the base has no trust root, so no signature can be valid", path)
            return verdicts
        times = self._signing_times() if self.new_envelopes else {}
        head_time = datetime.fromtimestamp(self.git.commit_info(self.report.head).timestamp, UTC)
        for subject_digest, paths in sorted(self.new_envelopes.items()):
            subject = self.record(subject_digest)
            if subject is None:
                continue  # linted as dangling
            for path in paths:
                verdict = verify(self.head_bytes[path], subject, root, times.get(path, head_time))
                verdicts.setdefault(subject_digest, []).append(verdict)
                if verdict.problem is not None:
                    self.lint("bad-attestation", verdict.problem, path)
        for path, record in runs:
            judged = verdicts.get(record.digest, [])
            signed = any(
                verdict.valid and verdict.predicate_type == "submission" and "submitter" in verdict.roles
                for verdict in judged
            )
            if not signed and not any(not verdict.valid for verdict in judged):  # else bad-attestation says why
                self.lint(
                    "unsigned-run",
                    "no valid submission attestation by a submitter key of the trust root "
                    "(sign it with `kictl sign` and add the envelope)",
                    path,
                )
        return verdicts

    def _source_native(
        self, runs: Sequence[tuple[str, StoredRecord]], verdicts: Mapping[str, list[AttestationVerdict]] | None
    ) -> None:
        for path, record in runs:
            assert isinstance(record.model, BenchmarkRun)
            native = record.model.spec.source_native
            if native is None:
                continue
            if verdicts is not None:
                rerun = any(
                    verdict.valid and verdict.predicate_type == "rerun" and "verifier" in verdict.roles
                    for verdict in verdicts.get(record.digest, [])
                )
                qualifier = "no verified rerun attestation by a verifier"
            else:
                claimed = [
                    claimed_predicate_type(self.head_bytes[envelope])
                    for envelope in self.new_envelopes.get(record.digest, [])
                ]
                rerun = "rerun" in claimed
                qualifier = "no rerun attestation (signatures not verified)"
            if not rerun:
                source = native.source + (f" {native.benchmark}" if native.benchmark else "")
                self.hint(
                    "source-native-no-rerun",
                    f"imported from {source} with {qualifier}: its numbers are the source's own; "
                    "a verifier's rerun (`kictl verify --rerun`) would make it verified",
                    path,
                )

    # ----------------------------------------------------------------- leaderboards

    def _leaderboards(self, policy: Policy, new_runs: Sequence[str]) -> None:
        seam = self.checks.leaderboards
        if seam is None:
            if new_runs:
                self.report.not_checked.append(
                    NotChecked("leaderboards", f"{_NO_RANK}: rank changes, new #1 records and stale groups")
                )
            return
        if not new_runs:  # no run added: no group changes (published runs never go; linted if they do)
            self.report.leaderboards = []
            return
        try:
            diff = seam(self.registry, self.report.merge_base, self.report.head, policy, new_runs)
        except KictlError as exc:  # e.g. the query index cannot be written or read
            self.report.not_checked.append(NotChecked("leaderboards", f"ranking failed: {exc.message}"))
            return
        self.report.leaderboards = list(diff.groups)
        for group in diff.groups:
            after = group.after_leader
            if group.new_first and after is not None:
                before = group.before_leader
                if before is None:
                    message = f"{after.implementation} is the first #1 of {group.label}: {latency(after.latency_ns)}"
                else:
                    margin = group.margin or 0.0
                    message = (
                        f"{after.implementation} is the new #1 of {group.label}: {latency(after.latency_ns)}, "
                        f"{margin:.2f}x faster than {before.implementation} ({latency(before.latency_ns)})"
                    )
                self.hint("new-first", message, group=group.key)
                ahead = group.margin
                if before is not None and before.evidence == "verified" and ahead and ahead > 1 + RERUN_MARGIN:
                    self.hint(
                        "rerun-suggested",
                        f"{after.implementation} is {100 * (ahead - 1):.0f}% ahead of the verified record of "
                        f"{before.implementation} in {group.label}: ask a verifier for a rerun before trusting it",
                        group=group.key,
                    )
            elif group.moves:
                self.hint(
                    "rank-change",
                    f"{_count(len(group.moves), 'rank change')} in {group.label}; "
                    f"#1 stays {after.implementation if after else 'empty'}",
                    group=group.key,
                )
        for stale in diff.stale:
            label = " · ".join([stale.definition or "?", stale.workload, stale.gpu])
            observed = f" observed {render.date(stale.leader.observed_at)}" if stale.leader.observed_at else ""
            self.hint(
                "stale-group",
                f"the #1 of {label} ({stale.leader.implementation}{observed}) is stale; "
                "a run of this workload on this GPU would refresh it",
                group=stale.key,
            )


def review(
    registry: Registry,
    base: str,
    head: str = "HEAD",
    *,
    checks: Checks | None = None,
    policy: Policy | None = None,
) -> ReviewReport:
    """Review the changes from the merge base of ``base`` and ``head`` to ``head`` (DESIGN §8).

    ``policy`` defaults to the base's ``registry/policy.json``; ``checks`` to
    ``default_checks()``.  Raises ``NotFoundError`` (exit 3) for an unknown
    revision and ``RegistryError`` (exit 4) when the registry is no git
    repository or git fails; bad content becomes lints, never an error.
    """
    history = registry.git
    head_sha = history.rev_parse(head)
    base_sha = history.rev_parse(base)
    merge_base = history.merge_base(base_sha, head_sha)
    report = ReviewReport(
        base_ref=base,
        head_ref=head,
        base=base_sha,
        merge_base=merge_base,
        head=head_sha,
        changes=history.changed_files(merge_base, head_sha),
    )
    _Review(registry, report, checks if checks is not None else default_checks()).run(policy)
    report.lints.sort(key=lambda finding: (finding.path or "", finding.code, finding.message))
    return report


# --------------------------------------------------------------------------- rendering


def _added_line(report: ReviewReport) -> str:
    parts = [
        _count(count, kind) for kind, count in sorted(report.added_records.items(), key=lambda i: KINDS.index(i[0]))
    ]
    if report.added_blobs:
        parts.append(_count(report.added_blobs, "blob"))
    if report.added_attestations:
        parts.append(_count(report.added_attestations, "attestation"))
    return ", ".join(parts) if parts else "none"


def _status_counts(changes: Sequence[Change]) -> str:
    words = {"A": "added", "M": "modified", "D": "deleted", "T": "type changed"}
    counts = Counter(change.status for change in changes)
    return ", ".join(f"{counts[s]:,} {words.get(s, s)}" for s in ("A", "M", "D", "T") if counts[s])


def _short_hex(text: str) -> str:
    """Shorten 64-digit hex runs for the terminal (digests stay whole in JSON and Markdown); no control characters."""
    return render.compact_hex(_printable(text))


def _printable(text: str) -> str:
    """``text`` with control characters (a newline, a terminal escape) shown as ``?``."""
    return _CONTROL.sub("?", text)


_NBSP = "\u00a0"
#: The space between a number and its unit, which a line break must not split ("30.0 µs").
_UNIT_SPACE = re.compile(r"(?<=\d) (?=(?:ns|µs|ms|s)\b)")


def render_text(report: ReviewReport, *, width: int = 100) -> str:
    """The report for a terminal, lines of at most ``width`` columns (digests in messages stay whole)."""
    lines = [
        f"kictl review: {report.base_ref} ({report.merge_base[:12]}) .. {report.head_ref} ({report.head[:12]})",
        report.summary(),
    ]
    if report.changes and not report.code_only:
        changes = f"changes: {_status_counts(report.changes)}; new: {_added_line(report)}"
        lines.extend(textwrap.wrap(changes, width=width, subsequent_indent="  ", break_long_words=False))
    wrap = textwrap.TextWrapper(width=width, initial_indent="    ", subsequent_indent="    ", break_long_words=False)
    for title, findings in (("lints", report.lints), ("hints", report.hints)):
        if not findings:
            continue
        lines += ["", f"{title}:"]
        for finding in findings:
            lines.append(f"  {finding.code}  {_short_hex(finding.where)}".rstrip())
            lines.extend(line.replace(_NBSP, " ") for line in wrap.wrap(_UNIT_SPACE.sub(_NBSP, finding.message)))
    if report.leaderboards:
        lines += ["", "leaderboards:"]
        for group in report.leaderboards:
            lines.extend(wrap.wrap(group.label))
            for move in group.moves:
                lines.append(
                    f"      {_rank(move.before_rank):>5} -> {_rank(move.after_rank):<5}  "
                    f"{latency(move.before_ns):>10} -> {latency(move.after_ns):<10}  {move.implementation}"
                )
    if report.not_checked:
        lines += ["", "not checked:"]
        item_wrap = textwrap.TextWrapper(
            width=width, initial_indent="  ", subsequent_indent="    ", break_long_words=False
        )
        for item in report.not_checked:
            lines.extend(item_wrap.wrap(f"{item.check}: {item.reason}"))
    return "\n".join(_printable(line) for line in lines) + "\n"


def _rank(rank: int | None) -> str:
    return "-" if rank is None else f"#{rank}"


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")


def md_text(text: str) -> str:
    """Text safe in a Markdown table cell: punctuation escaped, no line breaks, no @mentions."""
    flat = _printable(" ".join(text.split()))
    return _MD_SPECIAL.sub(r"\\\1", flat).replace("@", "&#64;")


def md_code(text: str) -> str:
    """Inline code that survives any content: a fence longer than any backtick run inside, pipes escaped."""
    flat = _printable(" ".join(text.split()))
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    padded = f" {flat} " if flat.startswith("`") or flat.endswith("`") else flat
    return f"{fence}{padded}{fence}".replace("|", "\\|")


class _Budget:
    """Lines of Markdown that stop growing before ``limit`` characters, counting what was left out."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.lines: list[str] = []
        self.size = 0

    def fits(self, line: str, reserve: int = 0) -> bool:
        return self.size + len(line) + 1 + reserve <= self.limit

    def add(self, line: str) -> None:
        self.lines.append(line)
        self.size += len(line) + 1


_RESERVE = 600  # room kept for the overflow notes and the footer


def _table(budget: _Budget, headers: Sequence[str], rows: Sequence[Sequence[str]], align: str, noun: str) -> int:
    """Add a table, as many rows as fit; returns how many rows were left out."""
    head = "| " + " | ".join(headers) + " |"
    separator = "|" + "|".join(" ---: " if a == "r" else " --- " for a in align) + "|"
    if not rows:
        return 0
    first = "| " + " | ".join(rows[0]) + " |"
    if not budget.fits(head + separator + first, reserve=_RESERVE + 2):
        budget.add(f"_{_count(len(rows), noun)} not shown: the comment is limited to {MARKDOWN_LIMIT:,} characters._")
        return len(rows)
    budget.add(head)
    budget.add(separator)
    shown = 0
    for row in rows:
        line = "| " + " | ".join(row) + " |"
        if not budget.fits(line, reserve=_RESERVE):
            break
        budget.add(line)
        shown += 1
    left = len(rows) - shown
    if left:
        budget.add("")
        budget.add(
            f"_…and {_count(left, noun)} more, not shown: the comment is limited to {MARKDOWN_LIMIT:,} "
            "characters; the JSON report has them all._"
        )
    return left


def render_markdown(report: ReviewReport, *, limit: int = MARKDOWN_LIMIT) -> str:
    """The report as a PR comment: a summary line, lints first, a table per group; at most ``limit`` characters."""
    budget = _Budget(limit)
    verdict = "passes" if report.ok else "fails"
    budget.add(f"### kictl review {verdict}: {md_text(report.findings_line())}")
    budget.add("")
    budget.add(
        f"Base {md_code(report.base_ref)} at {md_code(report.merge_base[:12])} (merge base), "
        f"head {md_code(report.head[:12])}."
    )
    if report.changes and not report.code_only:
        budget.add(f"Changes: {_status_counts(report.changes)}. New: {md_text(_added_line(report))}.")
    left: Counter[str] = Counter()
    for title, findings, noun in (
        ("Lints (each fails the review)", report.lints, "lint"),
        ("Hints", report.hints, "hint"),
    ):
        if not findings:
            continue
        budget.add("")
        budget.add(f"#### {title}")
        budget.add("")
        rows = [
            [md_code(finding.where) if finding.where else "", md_code(finding.code), md_text(finding.message)]
            for finding in findings
        ]
        left[noun] += _table(budget, ["where", noun, "message"], rows, "lll", noun)
    if report.leaderboards:
        budget.add("")
        budget.add("#### Leaderboards")
        for number, group in enumerate(report.leaderboards):
            if not budget.fits("", reserve=_RESERVE * 2):
                rest = len(report.leaderboards) - number
                left["comparison group"] += rest
                budget.add("")
                budget.add(f"_{_count(rest, 'comparison group')} more, not shown._")
                break
            budget.add("")
            budget.add(f"**{md_text(group.label)}** (group {md_code(group.key)})")
            budget.add("")
            rows = [
                [
                    md_code(move.implementation),
                    _rank(move.before_rank),
                    latency(move.before_ns),
                    _rank(move.after_rank),
                    latency(move.after_ns),
                ]
                for move in group.moves
            ]
            headers = ["implementation", "rank before", "latency before", "rank after", "latency after"]
            left["leaderboard row"] += _table(budget, headers, rows, "lrrrr", "leaderboard row")
    if report.not_checked:
        budget.add("")
        budget.add("#### Not checked")
        budget.add("")
        for item in report.not_checked:
            line = f"- {md_text(item.check)}: {md_text(item.reason)}"
            if budget.fits(line, reserve=_RESERVE // 2):
                budget.add(line)
    budget.add("")
    if any(left.values()):
        parts = [_count(count, noun) for noun, count in left.items() if count]
        budget.add(f"_Overflow: {', '.join(parts)} not shown; the review's JSON artifact holds the full report._")
    budget.add("<sub>`kictl review --format json` gives this report as JSON.</sub>")
    return "\n".join(budget.lines) + "\n"
