"""Judging one record: its attestations, its evidence level (unsigned, reported, verified, disputed) and
``kictl verify``'s report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kictl import canon
from kictl.errors import CheckFailed, KictlError, NotFoundError
from kictl.layout import ATTESTATIONS_DIR
from kictl.lookup import Named
from kictl.records import StoredRecord, format_timestamp
from kictl.store.files import is_temporary_name
from kictl.store.git import merged_times
from kictl.store.registry import Registry
from kictl.trust._common import Level
from kictl.trust.anchor import check_rollback
from kictl.trust.attestations import (
    AttestationRejected,
    Signer,
    VerifiedAttestation,
    _check_key_time,
    _check_role,
    _signer_of,
    _verify_core,
)
from kictl.trust.dsse import Envelope
from kictl.trust.models import RerunPredicate
from kictl.trust.readers import reader_policy
from kictl.trust.root import RootChain, TrustRoot, _now, _read, load_root, root_chain
from kictl.validate import check_envelope_file, check_record_file


@dataclass(frozen=True, slots=True)
class AttestationResult:
    """One envelope about a record and what verification made of it."""

    path: str  # relative to the registry root
    signed_at: datetime
    committed: bool
    attestation: VerifiedAttestation | None
    failure: str | None = None
    counts_for: str | None = None  # evidence, community, review, submission, retraction
    predicate_type: str | None = None  # known once the signatures verified
    signers: tuple[Signer, ...] = ()  # whose signatures verified, even when rejected

    @property
    def valid(self) -> bool:
        return self.attestation is not None and self.failure is None

    def to_json(self) -> dict[str, Any]:
        att = self.attestation
        return {
            "path": self.path,
            "valid": self.valid,
            "type": self.predicate_type,
            "signers": [signer.to_json() for signer in self.signers],
            "signedAt": format_timestamp(self.signed_at),
            "committed": self.committed,
            "countsFor": self.counts_for,
            "predicate": att.predicate_json if att else None,
            "failure": self.failure,
        }


@dataclass(frozen=True, slots=True)
class RecordTrust:
    """The standing of one record: its evidence level, retraction, and the counts shown beside it."""

    level: Level = "unsigned"
    retracted: bool = False
    submitted: bool = False  # a valid submission signature exists
    community_reruns: int = 0
    reviews: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "retracted": self.retracted,
            "submitted": self.submitted,
            "communityReruns": self.community_reruns,
            "reviews": self.reviews,
        }


def rerun_agrees(predicate: RerunPredicate, tolerance: float) -> bool:
    """The reader's rule for a verifier's ``rerun`` (docs/rerun.md "Verdicts"): it agrees unless it failed or
    its rerun was slower than the claim by more than ``tolerance``.  One-sided: a faster rerun never disputes.
    The ratio decides, not the verdict word (an older kictl signed "disagrees" for a faster rerun).
    """
    if predicate.verdict == "failed" or predicate.ratio is None:
        return False
    return predicate.ratio - 1.0 <= tolerance


def evidence_level(*, submitted: bool, agree: int, disagree: int) -> Level:
    """docs/trust.md "Evidence": a verifier's rerun decides (any disagreement disputes); else a valid
    submission signature makes ``reported``; else ``unsigned``.
    """
    if disagree:
        return "disputed"
    if agree:
        return "verified"
    return "reported" if submitted else "unsigned"


def record_owners(attestations: Iterable[tuple[datetime, VerifiedAttestation]]) -> set[str]:
    """The record's original submitter: the submitter keys of its earliest valid ``submission`` (docs/trust.md
    "Who may retract").

    Only all of them together (``attestations.may_retract``), or a maintainer, may retract it.  A submitter
    who signs a submission of someone else's record later does not become an owner; keys that co-signed the
    earliest submission (one envelope, or envelopes of one commit) are owners together.
    """
    earliest: datetime | None = None
    owners: set[str] = set()
    for signed_at, att in attestations:
        if att.predicate_type != "submission" or not att.has_role("submitter"):
            continue
        keys = {signer.keyid for signer in att.signers if "submitter" in signer.roles}
        if earliest is None or signed_at < earliest:
            earliest, owners = signed_at, set(keys)
        elif signed_at == earliest:
            owners |= keys
    return owners


def submission_owners(
    subject: Named, root: TrustRoot, envelopes: Sequence[tuple[str, bytes, datetime, bool]]
) -> set[str]:
    """``record_owners`` of the envelopes ``(path, bytes, signed_at, committed)`` about ``subject`` that verify as
    submissions: what ``judge_attestations`` uses, for a caller that judges one retraction (``kictl review``).
    Never raises."""
    verified = []
    for _, data, signed_at, _ in envelopes:
        try:
            attestation = _verify_core(data, subject, root, signed_at)
            _check_role(attestation, ())
        except CheckFailed:
            continue
        verified.append((signed_at, attestation))
    return record_owners(verified)


def judge_attestations(
    subject: Named,
    root: TrustRoot,
    envelopes: Sequence[tuple[str, bytes, datetime, bool]],
    *,
    rerun_tolerance: float,
) -> tuple[list[AttestationResult], RecordTrust]:
    """Verify every envelope ``(path, bytes, signed_at, committed)`` about ``subject``; compute its standing.

    Never raises for a bad envelope: its result carries the failure.  Submissions
    are verified first, so that a retraction by the record's own submitter counts.
    """
    cores: list[tuple[str, datetime, bool, VerifiedAttestation | None, str | None]] = []
    rejected: dict[str, AttestationRejected] = {}
    for path, data, signed_at, committed in envelopes:
        try:
            cores.append((path, signed_at, committed, _verify_core(data, subject, root, signed_at), None))
        except AttestationRejected as exc:
            rejected[path] = exc
            cores.append((path, signed_at, committed, None, exc.message))
        except CheckFailed as exc:
            cores.append((path, signed_at, committed, None, exc.message))
    submitters = record_owners(
        (signed_at, att) for _, signed_at, _, att, failure in cores if att is not None and failure is None
    )
    results: list[AttestationResult] = []
    agree = disagree = community = reviews = 0
    counted: set[tuple[str, bytes]] = set()
    retracted = submitted = False
    for path, signed_at, committed, att, failure in cores:
        counts_for = None
        if att is not None and failure is None:
            try:
                _check_role(att, submitters)
            except CheckFailed as exc:
                failure = exc.message
        duplicate = False
        if att is not None and failure is None:
            # docs/trust.md: an attestation counts once per (signer, payload), however many files carry it
            pairs = {(signer.keyid, att.payload) for signer in att.signers}
            duplicate = pairs <= counted
            counted.update(pairs)
        if att is not None and failure is None and not duplicate:
            kind = att.predicate_type
            if kind == "rerun" and att.has_role("verifier"):
                assert isinstance(att.predicate, RerunPredicate)
                counts_for = "evidence"
                if rerun_agrees(att.predicate, rerun_tolerance):
                    agree += 1
                else:
                    disagree += 1
            elif kind == "rerun":
                counts_for = "community"
                community += 1
            elif kind == "review":
                counts_for = "review"
                reviews += 1
            elif kind == "retraction":
                counts_for = "retraction"
                retracted = True
            else:
                counts_for = "submission"
                submitted = True
        results.append(
            AttestationResult(
                path=path, signed_at=signed_at, committed=committed, attestation=att,
                failure=failure, counts_for=counts_for,
                predicate_type=att.predicate_type if att else getattr(rejected.get(path), "predicate_type", None),
                signers=att.signers if att else getattr(rejected.get(path), "signers", ()),
            )
        )  # fmt: skip
    level = evidence_level(submitted=submitted, agree=agree, disagree=disagree)
    trust = RecordTrust(
        level=level, retracted=retracted, submitted=submitted, community_reruns=community, reviews=reviews
    )
    return results, trust


def signing_times(registry: Registry, rev: str = "HEAD", *, now: datetime | None = None) -> dict[str, datetime]:
    """Path (relative) → signing time of every committed envelope (docs/trust.md "Signing time").

    The committer time of the commit on ``rev``'s first-parent line (the
    registry's main line) that brought the envelope in: for a merged pull
    request, the merge commit, not the branch's commits, whose dates their
    author chose.  Never later than ``now``: a commit dated in the future
    counts as signed now.
    """

    if not registry.is_git_repository():
        return {}
    cap = now if now is not None else _now()
    return {
        path: min(datetime.fromtimestamp(stamp, UTC), cap)
        for path, stamp in merged_times(registry.root, ATTESTATIONS_DIR, rev).items()
    }


def envelope_signers(root: TrustRoot, envelope: Envelope) -> tuple[Signer, ...]:
    """The distinct keys of ``root`` whose signatures on ``envelope`` verify (DSSE protocol: PAE), each once.

    For a signed document that is not an attestation (a harness advisory) and is judged by the same keys.
    Raises ``CheckFailed`` for a signature that verifies under no key of the root.
    """
    signers = (_signer_of(root, envelope, index) for index in range(len(envelope.signatures)))
    return tuple({signer.keyid: signer for signer in signers}.values())


def check_signer_time(root: TrustRoot, signer: Signer, signed_at: datetime) -> None:
    """docs/trust.md "Signing time": ``signer``'s key was valid (not before, not expired, not revoked) at
    ``signed_at``; raises ``CheckFailed`` saying which."""
    _check_key_time(root, signer, signed_at)


def envelope_files(registry: Registry, digest: str) -> list[Path]:
    """The envelope files about ``digest``; kictl's own temporary files (a killed ``sign``) are never read."""

    folder = registry.attestation_folder(digest)
    if not folder.is_dir():
        return []
    return sorted(path for path in folder.iterdir() if path.is_file() and not is_temporary_name(path.name))


def read_envelopes(
    registry: Registry, paths: Sequence[Path], times: Mapping[str, datetime], now: datetime
) -> list[tuple[str, bytes, datetime, bool]]:
    """``(path, bytes, signed_at, committed)`` of each envelope file, as ``judge_attestations`` takes them:
    signed at its ``signing_times`` entry, else (uncommitted) ``now``.  Raises ``RegistryError`` for a file
    that cannot be read."""
    out = []
    for path in paths:
        relative = registry.relative(path)
        committed = relative in times
        out.append((relative, _read(path, registry), times.get(relative, now), committed))
    return out


@dataclass
class VerifyReport:
    """What ``kictl verify DIGEST`` found."""

    digest: str
    kind: str | None
    name: str | None
    records: list[tuple[str, str]] = field(default_factory=list)  # (digest, kind) checked, transitively
    blobs: list[str] = field(default_factory=list)
    root_version: int | None = None
    anchor: str | None = None  # which anchor the trust-root chain was verified from
    attestations: list[AttestationResult] = field(default_factory=list)
    trust: RecordTrust = field(default_factory=RecordTrust)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def level(self) -> str:
        return self.trust.level

    def to_json(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "kind": self.kind,
            "name": self.name,
            "ok": self.ok,
            **self.trust.to_json(),
            "trustRootVersion": self.root_version,
            "anchor": self.anchor,
            "records": [{"digest": d, "kind": k} for d, k in self.records],
            "blobs": self.blobs,
            "attestations": [result.to_json() for result in self.attestations],
            "failures": self.failures,
            "notes": self.notes,
        }


def _check_records(registry: Registry, digest: str, report: VerifyReport) -> StoredRecord | None:
    """Recompute the digest of ``digest``'s file and, transitively, of every record it references."""

    subject: StoredRecord | None = None
    seen: set[str] = set()
    queue: list[tuple[str, str | None, str | None]] = [(digest, None, None)]
    while queue:
        current, referrer, member = queue.pop(0)
        if current in seen:
            continue
        seen.add(current)
        kind = registry.digest_kind(current)
        if kind is None:
            report.failures.append(f"{referrer}: $.spec.{member}: no record {current} in the registry")
            continue
        path = registry.record_path(kind, current)
        relative = registry.relative(path)
        record, problems = check_record_file(relative, _read(path, registry))
        report.records.append((current, kind))
        report.failures.extend(str(problem) for problem in problems)
        if record is None:
            continue
        if current == digest:
            subject = record
        for ref_member, ref_digest, _ in record.references():
            queue.append((ref_digest, relative, ref_member))
        for input_name, blob in record.blob_references():
            report.blobs.append(blob)
            try:
                registry.read_blob(blob)
            except KictlError as exc:
                report.failures.append(f"{relative}: $.spec.inputs.{input_name}: {exc.message}")
    return subject


def _check_rerun_record(registry: Registry, subject: StoredRecord, result: AttestationResult) -> str | None:
    """A verifier's rerun names a BenchmarkRun of the same workload and implementation, when it is here."""
    att = result.attestation
    if att is None or not isinstance(att.predicate, RerunPredicate):
        return None
    run_digest = att.predicate.run_digest
    kind = registry.digest_kind(run_digest)
    if kind is None:
        return None
    if kind != "BenchmarkRun" or subject.kind != "BenchmarkRun":
        return f"{result.path}: the rerun names {run_digest}, a {kind}, not a BenchmarkRun"
    try:
        rerun = registry.load(run_digest)
    except KictlError as exc:
        return f"{result.path}: the rerun's run {run_digest}: {exc.message}"
    for member in ("workloadDigest", "implementationDigest"):
        if rerun.raw["spec"].get(member) != subject.raw["spec"].get(member):
            return f"{result.path}: the rerun {run_digest} has another {member} than the record it reruns"
    return None


def _check_anchor(registry: Registry, chain: RootChain, report: VerifyReport) -> None:
    """docs/trust.md "The anchor": the chain must start at a pinned version and not roll back."""

    if chain.anchor is None:
        if chain.root.empty:
            report.anchor = "none: the trust root has no keys yet"
            return
        first, digest = "", ""
        for _, path in chain.files:
            data = _read(registry.root / path, registry)
            if not load_root(data, source=path).empty:  # a keyless root is never an anchor
                first, digest = path, canon.DIGEST_PREFIX + canon.sha256_hex(data)
                break
        raise CheckFailed(
            f"no version of the trust-root chain is a pinned anchor (the package's, `kictl trust pin`'s or "
            f"this machine's `kictl trust init`); if you trust {first}, pin it: kictl trust pin {digest}"
        )
    report.anchor = chain.anchor.describe()
    check_rollback(registry, chain.root.version)


def check_record(
    registry: Registry, digest: str, *, registry_failures: Callable[[Registry], list[str]] | None = None
) -> VerifyReport:
    """What ``kictl verify DIGEST`` does; every failure is listed in the report.

    Recomputes the digest of the record and of every record (and blob) it
    references, verifies the trust-root chain and every envelope about the
    record (signing time: ``signing_times``, the main-line commit that added the
    envelope file, or now when it is uncommitted), and computes the evidence
    level.  ``registry_failures`` adds what else makes the registry fail to
    verify once its trust root does (``kictl verify`` passes
    ``kictl.advisories.published.deletion_failures``: a deleted or changed advisory
    version; trust sits below advisories, so the check is handed in).  Raises
    ``RecordError`` for a malformed digest and ``NotFoundError`` when no record
    file has this digest as its name.
    """
    canon.digest_hex(digest)
    kind = registry.digest_kind(digest)
    if kind is None:
        raise NotFoundError(f"no record {digest} in {registry.root}")
    report = VerifyReport(digest=digest, kind=kind, name=None)
    subject = _check_records(registry, digest, report)
    if subject is not None:
        report.name = subject.name
    root: TrustRoot | None
    try:
        chain = root_chain(registry)
        root = chain.root
        report.root_version = root.version
        _check_anchor(registry, chain, report)
    except CheckFailed as exc:
        report.failures.append(f"trust root: {exc.message}")
        root = None
    if root is not None and registry_failures is not None:
        report.failures.extend(registry_failures(registry))

    now = _now()
    paths = envelope_files(registry, digest)
    for path in paths:
        relative = registry.relative(path)
        report.failures.extend(str(problem) for problem in check_envelope_file(relative, _read(path, registry)))
    if not paths:
        report.notes.append("no attestations")
        return report
    if subject is None or root is None:
        report.failures.append(
            f"{len(paths)} attestation(s) not checked: "
            + ("the record itself is invalid" if subject is None else "the trust root does not verify")
        )
        return report
    envelopes = read_envelopes(registry, paths, signing_times(registry), now)
    results, trust = judge_attestations(
        subject, root, envelopes, rerun_tolerance=reader_policy(registry).rerun_tolerance
    )
    report.attestations = results
    report.trust = trust
    for result in results:
        if result.failure is not None:
            report.failures.append(f"{result.path}: {result.failure}")
        elif result.counts_for == "evidence":
            problem = _check_rerun_record(registry, subject, result)
            if problem:
                report.failures.append(problem)
    if not trust.submitted:
        report.notes.append("no valid submission signature")
    return report
