"""What the attestations of a registry's working tree say about many records at once (docs/trust.md "Evidence").

``kictl.trust.judge_attestations`` judges the envelopes about one record; this
module finds the envelopes, reads the trust root, the signing times and the
signed policy's rerun tolerance once, and asks it for each record.  It holds
the one rule for "which runs are verifier reruns" (``named_reruns``: a valid
verifier ``rerun`` attestation names its own BenchmarkRun in ``runDigest``),
which leaderboards, the site, the export, advisories (a rerun clears a mark)
and review all use.

A record is judged only when its file's content hashes to its name
(``intact_subject``); a tampered record stays ``unsigned`` for every reader.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from kictl import canon
from kictl.errors import KictlError
from kictl.lookup import Named
from kictl.records import KINDS
from kictl.store.files import is_temporary_name
from kictl.store.registry import Registry
from kictl.trust import (
    AttestationResult,
    RecordTrust,
    TrustRoot,
    envelope_files,
    judge_attestations,
    read_envelopes,
    registry_root,
    signing_times,
)
from kictl.trust.readers import reader_policy


def verifier_rerun_run(predicate_type: str | None, roles: Collection[str], run_digest: object) -> str | None:
    """The run a *valid* attestation names as a verifier's rerun of its record, else ``None``: the one rule
    (docs/rerun.md), for readers (``rerun_run``) and for review, which verifies envelope by envelope.

    A ``rerun`` signed by a key with the ``verifier`` role names its own BenchmarkRun in ``runDigest``;
    community reruns (other roles) never do.
    """
    if predicate_type != "rerun" or "verifier" not in roles:
        return None
    return run_digest if isinstance(run_digest, str) else None


def rerun_run(result: AttestationResult) -> str | None:
    """``verifier_rerun_run`` of an attestation ``judge_attestations`` judged (``None`` unless it is valid)."""
    attestation = result.attestation
    if not result.valid or attestation is None:
        return None
    return verifier_rerun_run(
        attestation.predicate_type, attestation.roles, getattr(attestation.predicate, "run_digest", None)
    )


def named_reruns(results: Iterable[AttestationResult]) -> list[str]:
    """``rerun_run`` of each result that names one, in the results' order, each once."""
    return list(dict.fromkeys(run for run in map(rerun_run, results) if run is not None))


def judged_standing(
    subject: Named, root: TrustRoot, envelopes: Sequence[tuple[str, bytes, datetime, bool]], *, rerun_tolerance: float
) -> tuple[RecordTrust, list[str]]:
    """``(standing, the runs its verifiers' reruns name)`` of a record from envelopes a caller read itself
    ``(path, bytes, signed_at, committed)``: ``kictl review`` judges a pull request's head, read from git
    objects, by the base's trust root and policy.  Never raises for a bad envelope."""
    results, summary = judge_attestations(subject, root, envelopes, rerun_tolerance=rerun_tolerance)
    return summary, named_reruns(results)


@dataclass(frozen=True, slots=True)
class Subject:
    """What verifying an attestation needs of the record it is about (``kictl.lookup.Named``)."""

    digest: str
    kind: str
    name: str


def intact_subject(registry: Registry, digest: str) -> Subject | None:
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
    return Subject(digest, kind, name)


def attested_digests(registry: Registry, wanted: set[str] | None = None) -> dict[str, list[Path]]:
    """One pass over ``registry/attestations/``: record digest → its envelope files (``wanted`` only, if given).

    kictl's own temporary files (a killed ``sign``) are never read.  Never raises for a missing folder.
    """
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
                if entry.is_file() and not is_temporary_name(entry.name)
            )
            if files:
                found[digest] = files
    return found


def all_record_digests(registry: Registry) -> list[str]:
    """The digest in the name of every record file of the registry, of every kind."""
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


def claims_rerun(path: Path) -> bool:
    """Whether an envelope's (unverified) statement claims the ``rerun`` predicate type; never raises."""
    try:
        payload = base64.b64decode(json.loads(path.read_bytes())["payload"])
    except (OSError, ValueError, KeyError, TypeError):
        return True  # let verification say what it is
    return b"/attestation/rerun/" in payload


class Judge:
    """Judges the working tree's envelopes about one record at a time.

    The trust root chain, the signing times (one ``git log``), the signed
    policy's rerun tolerance and "now" are read once, on first use
    (``context``), which raises ``CheckFailed`` when the chain does not verify.
    """

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._context: tuple[TrustRoot, dict[str, datetime], float, datetime] | None = None

    def context(self) -> tuple[TrustRoot, dict[str, datetime], float, datetime]:
        if self._context is None:
            registry = self.registry
            root = registry_root(registry)
            self._context = (
                root,
                signing_times(registry),
                reader_policy(registry).rerun_tolerance,
                datetime.now(UTC),
            )
        return self._context

    def judge(self, digest: str, paths: list[Path]) -> tuple[list[AttestationResult], RecordTrust] | None:
        """``judge_attestations`` of the envelope files ``paths`` about ``digest``; ``None`` when the record is
        not intact (or absent).  Raises ``CheckFailed`` (trust root), ``RegistryError`` (unreadable file)."""
        subject = intact_subject(self.registry, digest) if paths else None
        if subject is None:
            return None
        root, times, tolerance, now = self.context()
        envelopes = read_envelopes(self.registry, paths, times, now)
        return judge_attestations(subject, root, envelopes, rerun_tolerance=tolerance)

    def reruns_of(self, digest: str) -> list[str]:
        """The runs that valid verifier reruns of ``digest`` name (``named_reruns``), in envelope order."""
        judged = self.judge(digest, envelope_files(self.registry, digest))
        return [] if judged is None else named_reruns(judged[0])


@dataclass
class Scan:
    """What one pass over the attestations found (``scan``)."""

    #: the standing of each asked-for record (``RecordTrust()`` where nothing valid is said about it)
    summaries: dict[str, RecordTrust] = field(default_factory=dict)
    #: asked-for record → the runs valid verifier reruns of it name, in envelope order
    reruns: dict[str, list[str]] = field(default_factory=dict)
    #: a verifier's rerun run → the records it is a rerun of (only when ``scan(..., reruns=True)``)
    rerun_of: dict[str, set[str]] = field(default_factory=dict)


def scan(registry: Registry, digests: Iterable[str] | None, *, reruns: bool) -> Scan:
    """Judge every envelope about ``digests`` (every record when ``None``), and with ``reruns`` every other
    envelope that claims a ``rerun``, so that ``rerun_of`` names every verifier's rerun of the registry.

    The trust root chain is verified once (when there is an envelope to judge), the git history read once.
    Invalid envelopes are ignored here (``kictl verify`` reports them).  Raises ``CheckFailed`` when the trust
    root chain does not verify.
    """
    wanted = None if digests is None else set(digests)
    keys = wanted if wanted is not None else set(all_record_digests(registry))
    found = Scan(summaries=dict.fromkeys(keys, RecordTrust()))
    attested = attested_digests(registry, None if reruns else wanted)
    if not attested:
        return found
    judge = Judge(registry)
    judge.context()
    for digest, all_paths in attested.items():
        asked = wanted is None or digest in wanted
        paths = all_paths if asked else [path for path in all_paths if claims_rerun(path)]
        judged = judge.judge(digest, paths)
        if judged is None:
            continue
        results, summary = judged
        named = named_reruns(results)
        for run in named:
            found.rerun_of.setdefault(run, set()).add(digest)
        if asked:
            found.summaries[digest] = summary
            found.reruns[digest] = named
    return found


def trust_summaries(registry: Registry, digests: Iterable[str] | None = None) -> dict[str, RecordTrust]:
    """The standing of each record in ``digests`` (every record when ``None``): level, retraction, counts.

    Raises ``CheckFailed`` when the trust root chain does not verify.
    """
    return scan(registry, digests, reruns=False).summaries


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


def verifier_reruns(registry: Registry) -> dict[str, tuple[str, ...]]:
    """Every run that a valid verifier ``rerun`` attestation names as its own, with the runs it reran.

    A verifier's rerun is evidence about another run, never a contender of its own (docs/rerun.md).
    Raises ``CheckFailed`` when the trust root chain does not verify.
    """
    found = scan(registry, (), reruns=True).rerun_of
    return {run: tuple(sorted(originals)) for run, originals in sorted(found.items())}


def verifier_rerun_runs(registry: Registry) -> set[str]:
    """The runs of ``verifier_reruns``: what every leaderboard leaves out.  Raises ``CheckFailed``."""
    return set(scan(registry, (), reruns=True).rerun_of)


def ranking_trust(registry: Registry, digests: Iterable[str]) -> tuple[dict[str, str], set[str]]:
    """``(evidence levels of digests, the runs a leaderboard leaves out)`` in one pass: the second set is every
    verifier's own rerun and every run of ``digests`` validly retracted (by its own submitters or a maintainer,
    ``trust.may_retract``).  Raises ``CheckFailed`` when the trust root chain does not verify (and there is an
    attestation to judge).
    """
    found = scan(registry, digests, reruns=True)
    levels: dict[str, str] = {digest: summary.level for digest, summary in found.summaries.items()}
    left_out = set(found.rerun_of) | {digest for digest, summary in found.summaries.items() if summary.retracted}
    return levels, left_out
