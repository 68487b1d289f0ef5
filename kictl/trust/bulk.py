"""Many records at once: resolving a reference to a record file, and trust summaries and evidence
levels for many digests.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kictl import canon
from kictl.errors import KictlError, NotFoundError
from kictl.lookup import hex_prefix
from kictl.records import KINDS
from kictl.store import Registry, is_temporary_name
from kictl.trust.evidence import AttestationResult, RecordTrust, _read_envelopes, _signing_times, judge_attestations
from kictl.trust.readers import reader_policy
from kictl.trust.root import _now, registry_root


def resolve_digest(registry: Registry, reference: str) -> str:
    """``_resolve_digest``; a record not found here but on a ``submit/...`` branch says so (exit 3)."""
    try:
        return _resolve_digest(registry, reference)
    except NotFoundError as exc:
        branch = _submit_branch_of(registry, reference)
        if branch is None:
            raise
        raise NotFoundError(
            f"{reference} is not in this checkout; `kictl submit` put it on branch {branch}: git switch {branch}"
        ) from exc


def _submit_branch_of(registry: Registry, reference: str) -> str | None:
    """The first ``submit/...`` branch that adds a record named or digested ``reference``; never raises."""
    import json

    if not registry.is_git_repository():
        return None
    try:
        history = registry.git
        refs = history._run("for-each-ref", "--format=%(refname:short)", "refs/heads/submit/").split()
        bare = hex_prefix(reference)
        for branch in refs:
            added = history._run("diff", "--name-only", "--diff-filter=A", f"HEAD...{branch}", "--", "registry/records")
            paths = [path for path in added.splitlines() if path.endswith(".json")]
            if bare is not None and any(path.rsplit("/", 1)[-1].startswith(bare) for path in paths):
                return branch
            for data in history.read_paths(branch, paths).values():
                try:
                    value = json.loads(data or b"{}")
                except ValueError:
                    continue
                if isinstance(value, dict) and (value.get("metadata") or {}).get("name") == reference:
                    return branch
    except KictlError:
        return None
    return None


def _resolve_digest(registry: Registry, reference: str) -> str:
    """The full digest of the record file a digest, unique 8+ hex prefix or name refers to.

    Unlike ``Registry.resolve`` this is the digest in the file's *name*, so a
    record whose bytes were changed can still be named and found out.  Raises
    ``NotFoundError``.
    """
    bare = hex_prefix(reference)
    if bare is not None:
        matches = registry.resolve_prefix(bare)
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise NotFoundError(f"digest prefix {reference} is ambiguous", candidates=matches[:20])
    record = registry.resolve(reference)
    if registry.has_record(record.digest):
        return record.digest
    # The bytes of the file holding this name no longer hash to its name: name the file.
    for _, path in registry.record_files([record.kind]):
        try:
            if registry.read_record(path).name == reference:
                return canon.DIGEST_PREFIX + path.stem
        except KictlError:
            continue
    return record.digest


def _attested_digests(registry: Registry, wanted: set[str] | None) -> dict[str, list[Path]]:
    """One pass over ``registry/attestations/``: record digest → its envelope files."""
    found: dict[str, list[Path]] = {}
    top = registry.attestations_dir
    if not top.is_dir():
        return found
    for shard in os.scandir(top):
        if not shard.is_dir():
            continue
        for folder in os.scandir(shard.path):
            digest = canon.DIGEST_PREFIX + folder.name
            if not folder.is_dir() or not canon.is_hex_digest(folder.name):
                continue
            if wanted is not None and digest not in wanted:
                continue
            files = sorted(
                Path(entry.path)
                for entry in os.scandir(folder.path)
                if entry.is_file() and not is_temporary_name(entry.name)  # a killed writer's: never read
            )
            if files:
                found[digest] = files
    return found


def _all_record_digests(registry: Registry) -> list[str]:
    digests: list[str] = []
    for kind in KINDS:
        kind_dir = registry.records_dir / kind
        if not kind_dir.is_dir():
            continue
        for shard in os.scandir(kind_dir):
            if shard.is_dir():
                digests.extend(
                    canon.DIGEST_PREFIX + entry.name[:-5]
                    for entry in os.scandir(shard.path)
                    if entry.name.endswith(".json")
                )
    return digests


@dataclass(frozen=True, slots=True)
class _Subject:
    """What verifying an attestation needs of the record it is about (``kictl.lookup.Named``)."""

    digest: str
    kind: str
    name: str


def _intact_subject(registry: Registry, digest: str) -> _Subject | None:
    """The record file named ``digest`` as a subject, when its content hashes to its name; else ``None``.

    Parses strictly and recomputes the digest (``canon.record_forms``), as
    ``Registry.load`` does, without validating the schema: an attestation
    names a record by digest, kind and name only.  Never raises.
    """
    kind = registry.digest_kind(digest)
    if kind is None:
        return None
    try:
        data = registry.record_path(kind, digest).read_bytes()
        raw = canon.parse_record_json(data)
        try:
            _, actual = canon.record_forms(raw)
        except KictlError:
            raw = canon.parse_json(data)  # an integer literal beyond 2^53: the JCS form of a double
            _, actual = canon.record_forms(raw)
    except (OSError, KictlError):
        return None
    name = (raw.get("metadata") or {}).get("name") if isinstance(raw.get("metadata"), dict) else None
    if actual != digest or raw.get("kind") != kind or not isinstance(name, str):
        return None
    return _Subject(digest, kind, name)


def trust_summaries(registry: Registry, digests: Iterable[str] | None = None) -> dict[str, RecordTrust]:
    """The standing of each record in ``digests`` (every record when ``None``).

    Only records with an attestation folder can be other than
    ``unsigned``: the attestations are scanned once, the git history read
    once, the trust root verified once.  Invalid envelopes are ignored here
    (``check_record`` reports them).  Raises ``CheckFailed`` when the trust
    root chain does not verify.
    """
    wanted = None if digests is None else set(digests)
    keys = wanted if wanted is not None else set(_all_record_digests(registry))
    summaries = dict.fromkeys(keys, RecordTrust())
    attested = _attested_digests(registry, wanted)
    if not attested:
        return summaries
    root = registry_root(registry)
    tolerance = reader_policy(registry).rerun_tolerance
    times = _signing_times(registry)
    now = _now()
    for digest, paths in attested.items():
        subject = _intact_subject(registry, digest)
        if subject is None:
            continue
        envelopes = _read_envelopes(registry, paths, times, now)
        _, summary = judge_attestations(subject, root, envelopes, rerun_tolerance=tolerance)
        summaries[digest] = summary
    return summaries


def _claims_rerun(path: Path) -> bool:
    """Whether an envelope's (unverified) statement claims the ``rerun`` predicate type; never raises."""
    import base64
    import json

    try:
        payload = base64.b64decode(json.loads(path.read_bytes())["payload"])
    except (OSError, ValueError, KeyError, TypeError):
        return True  # let verification say what it is
    return b"/attestation/rerun/" in payload


def verifier_rerun_runs(registry: Registry) -> set[str]:
    """The BenchmarkRuns that valid verifier ``rerun`` attestations name as their own rerun (``runDigest``).

    A verifier's rerun is evidence about another run, never a contender of its
    own (docs/rerun.md); leaderboards leave these out.  One pass over the
    attestations, as ``trust_summaries``.  Raises ``CheckFailed`` when the trust
    root chain does not verify.
    """
    attested = _attested_digests(registry, None)
    if not attested:
        return set()
    root = registry_root(registry)
    tolerance = reader_policy(registry).rerun_tolerance
    times = _signing_times(registry)
    now = _now()
    found: set[str] = set()
    for digest, all_paths in attested.items():
        paths = [path for path in all_paths if _claims_rerun(path)]
        if not paths:
            continue  # only a rerun names a run of its own: nothing else needs verifying here
        subject = _intact_subject(registry, digest)
        if subject is None:
            continue
        results, _ = judge_attestations(
            subject, root, _read_envelopes(registry, paths, times, now), rerun_tolerance=tolerance
        )
        found |= _reruns_named(results)
    return found


def _reruns_named(results: Iterable[AttestationResult]) -> set[str]:
    found: set[str] = set()
    for result in results:
        attestation = result.attestation
        if result.counts_for == "evidence" and attestation is not None:
            run = getattr(attestation.predicate, "run_digest", None)
            if isinstance(run, str):
                found.add(run)
    return found


def ranking_trust(registry: Registry, digests: Iterable[str]) -> tuple[dict[str, str], set[str]]:
    """``(evidence_levels(registry, digests), verifier_rerun_runs(registry) | retracted runs)`` in one pass, as a
    leaderboard needs: the second set is every run a leaderboard leaves out (a verifier's own rerun, a run
    validly retracted by its own submitter or a maintainer).

    The trust root chain is verified once and the git history read once; the
    envelopes of ``digests`` are all verified, those of other records only
    where they claim a rerun.  Raises ``CheckFailed`` when the trust root
    chain does not verify (and there is an attestation to judge).
    """
    wanted = set(digests)
    levels: dict[str, str] = {digest: RecordTrust().level for digest in wanted}
    attested = _attested_digests(registry, None)
    if not attested:
        return levels, set()
    root = registry_root(registry)
    tolerance = reader_policy(registry).rerun_tolerance
    times = _signing_times(registry)
    now = _now()
    reruns: set[str] = set()
    for digest, all_paths in attested.items():
        paths = all_paths if digest in wanted else [path for path in all_paths if _claims_rerun(path)]
        if not paths:
            continue
        subject = _intact_subject(registry, digest)
        if subject is None:
            continue
        results, summary = judge_attestations(
            subject, root, _read_envelopes(registry, paths, times, now), rerun_tolerance=tolerance
        )
        reruns |= _reruns_named(results)
        if digest in wanted:
            levels[digest] = summary.level
            if summary.retracted:
                reruns.add(digest)
    return levels, reruns


def evidence_levels(registry: Registry, digests: Iterable[str] | None = None) -> dict[str, str]:
    """``{digest: "unsigned" | "reported" | "verified" | "disputed"}`` for ``digests`` (every record when ``None``).

    Raises ``CheckFailed`` when the trust root chain does not verify.
    """
    return {digest: summary.level for digest, summary in trust_summaries(registry, digests).items()}


def retracted_digests(registry: Registry, digests: Iterable[str] | None = None) -> set[str]:
    """The records (among ``digests``, or all) with a valid retraction; a leaderboard drops these.

    Raises ``CheckFailed`` when the trust root chain does not verify.
    """
    return {digest for digest, summary in trust_summaries(registry, digests).items() if summary.retracted}
