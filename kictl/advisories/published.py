"""Advisories in a registry: signing one, verifying one against the trust root, and the set readers apply.

A published advisory version is a DSSE envelope (DSSE envelope.md) at
``registry/advisories/<ID>/<version>.dsse.json``: its payload is the JCS bytes
of the advisory document, its payloadType
``application/vnd.kernelindex.harness-advisory+json`` (so that it can never be
replayed as an attestation or a trust-root signature, nor the reverse), and
every signature is Ed25519 over PAE(type, payload) by a key of the trust root.
It counts when at least one signer holds the ``maintainer`` role and every
signer's key was valid when the registry accepted the file (docs/trust.md
"Signing time": the main-line commit that added it, else now).  An unsigned
version, or one signed only by submitter or verifier keys, counts for nothing
and is a review lint.

Of an advisory's versions, readers apply the highest one that verifies.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kictl import canon, layout
from kictl.advisories.document import Advisory, advisory_value, is_advisory_id, load_advisory_bytes
from kictl.errors import CheckFailed, KictlError, NotFoundError, RecordError, UsageError
from kictl.records import format_timestamp
from kictl.store import Registry, Transaction
from kictl.trust._common import _short
from kictl.trust.attestations import Signer, _check_key_time, _signer_of
from kictl.trust.dsse import parse_envelope, sign_envelope
from kictl.trust.root import TrustRoot, _now, registry_root

PAYLOAD_TYPE = "application/vnd.kernelindex.harness-advisory+json"
SUFFIX = ".dsse.json"


def advisory_path(advisory_id: str, version: int) -> str:
    """``registry/advisories/<ID>/<version>.dsse.json`` (relative to the registry root)."""
    return f"{layout.ADVISORIES_DIR}/{advisory_id}/{version}{SUFFIX}"


def parse_advisory_path(path: str) -> tuple[str, int] | None:
    """``(ID, version)`` of an advisory version's path, else ``None``."""
    parts = path.split("/")
    if len(parts) != 4 or "/".join(parts[:2]) != layout.ADVISORIES_DIR or not is_advisory_id(parts[2]):
        return None
    number = parts[3].removesuffix(SUFFIX)
    if number == parts[3] or not (number.isascii() and number.isdigit()) or number[0] == "0" or len(number) > 5:
        return None
    return parts[2], int(number)


def signed_envelope(advisory: Advisory, keys: Sequence[Ed25519PrivateKey]) -> dict[str, Any]:
    """A DSSE envelope of ``advisory`` signed by ``keys`` (nothing written)."""
    return sign_envelope(PAYLOAD_TYPE, canon.canonical_bytes(advisory_value(advisory)), keys)


@dataclass(frozen=True, slots=True)
class VerifiedAdvisory:
    """One advisory version whose signatures verified, and who made them."""

    advisory: Advisory
    path: str
    signers: tuple[Signer, ...]
    signed_at: datetime
    committed: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "signers": [signer.to_json() for signer in self.signers],
            "signedAt": format_timestamp(self.signed_at),
            "committed": self.committed,
        }


def verify_advisory(
    data: bytes, *, path: str, root: TrustRoot, signed_at: datetime
) -> tuple[Advisory, tuple[Signer, ...]]:
    """Verify one advisory version file as of ``signed_at``; return the document and its signers.

    Raises ``CheckFailed`` naming the defect: not a DSSE envelope, another
    payloadType, a signature no key of the root makes, a key not valid or
    revoked at ``signed_at``, no maintainer among the signers, a payload that
    is not a valid advisory in normal form (JCS), or an id or version other
    than its path's.
    """
    where = parse_advisory_path(path)
    if where is None:
        raise CheckFailed(f"not an advisory path ({layout.ADVISORIES_DIR}/<KI-YYYY-NNNN>/<version>{SUFFIX})")
    envelope = parse_envelope(data)
    signers = tuple(
        {s.keyid: s for s in (_signer_of(root, envelope, i) for i in range(len(envelope.signatures)))}.values()
    )
    if envelope.payload_type != PAYLOAD_TYPE:
        raise CheckFailed(f"wrong payloadType {envelope.payload_type!r}; advisories are {PAYLOAD_TYPE!r}")
    for signer in signers:
        _check_key_time(root, signer, signed_at)
    if not any("maintainer" in signer.roles for signer in signers):
        who = ", ".join(f"{s.owner} ({_short(s.keyid)}: {', '.join(s.roles)})" for s in signers)
        raise CheckFailed(f"role: an advisory needs a maintainer key; signed by {who}")
    try:
        advisory, value = load_advisory_bytes(envelope.payload, source="advisory")
    except RecordError as exc:
        raise CheckFailed(exc.message, details=exc.details) from exc
    if canon.canonical_bytes(value) != envelope.payload:
        raise CheckFailed("advisory: the payload is not in normal form (JCS, RFC 8785)")
    if (advisory.id, advisory.version) != where:
        raise CheckFailed(
            f"advisory: holds {advisory.id} version {advisory.version}, not {where[0]} version {where[1]}"
        )
    return advisory, signers


@dataclass
class AdvisorySet:
    """The advisories of a registry as readers apply them: per id, the highest version that verifies."""

    current: dict[str, VerifiedAdvisory] = field(default_factory=dict)
    #: ``(path, why)`` of each version file that counts for nothing
    ignored: list[tuple[str, str]] = field(default_factory=list)

    def open(self) -> list[Advisory]:
        return [found.advisory for _, found in sorted(self.current.items()) if found.advisory.open]

    def get(self, advisory_id: str) -> VerifiedAdvisory:
        """The current version of ``advisory_id``; raises ``NotFoundError`` (exit 3)."""
        if advisory_id not in self.current:
            known = sorted(self.current)
            ignored = [p for p, _ in self.ignored if f"/{advisory_id}/" in p]
            hint = f"; {len(ignored)} version file(s) of it do not verify (kictl advisory list)" if ignored else ""
            raise NotFoundError(f"no published advisory {advisory_id}{hint}", candidates=known[:20])
        return self.current[advisory_id]


def _version_files(registry: Registry) -> list[tuple[str, Path]]:
    top = registry.root / layout.ADVISORIES_DIR
    if not top.is_dir():
        return []
    found: list[tuple[str, Path]] = []
    for folder in sorted(os.scandir(top), key=lambda entry: entry.name):
        if not folder.is_dir(follow_symlinks=False):
            continue
        for entry in sorted(os.scandir(folder.path), key=lambda e: e.name):
            found.append((f"{layout.ADVISORIES_DIR}/{folder.name}/{entry.name}", Path(entry.path)))
    return found


def has_advisories(registry: Registry) -> bool:
    """Whether ``registry/advisories/`` holds any file (a cheap test readers make before verifying anything)."""
    return bool(_version_files(registry))


def signing_times(registry: Registry, rev: str = "HEAD") -> dict[str, datetime]:
    """Path → the time the registry accepted each committed advisory file (the main-line commit), capped at now."""
    from kictl.store.git import merged_times

    if not registry.is_git_repository():
        return {}
    cap = _now()
    return {
        path: min(datetime.fromtimestamp(stamp, UTC), cap)
        for path, stamp in merged_times(registry.root, layout.ADVISORIES_DIR, rev).items()
    }


def load_advisories(registry: Registry, root: TrustRoot | None = None) -> AdvisorySet:
    """Every advisory version under ``registry/advisories/``, verified; the highest valid version per id counts.

    Raises ``CheckFailed`` when there are advisory files and the trust-root
    chain does not verify (nothing could be told apart then), ``RegistryError``
    when git or a file cannot be read.
    """
    files = _version_files(registry)
    found = AdvisorySet()
    if not files:
        return found
    if root is None:
        root = registry_root(registry)
    times = signing_times(registry)
    now = _now()
    for relative, path in files:
        if parse_advisory_path(relative) is None or not path.is_file() or path.is_symlink():
            found.ignored.append((relative, "not an advisory version file"))
            continue
        signed_at = times.get(relative, now)
        try:
            advisory, signers = verify_advisory(path.read_bytes(), path=relative, root=root, signed_at=signed_at)
        except OSError as exc:
            found.ignored.append((relative, f"cannot read: {exc.strerror}"))
            continue
        except KictlError as exc:
            found.ignored.append((relative, exc.message))
            continue
        held = found.current.get(advisory.id)
        if held is None or advisory.version > held.advisory.version:
            found.current[advisory.id] = VerifiedAdvisory(advisory, relative, signers, signed_at, relative in times)
    return found


def publish_advisory(registry: Registry, advisory: Advisory, keys: Sequence[Ed25519PrivateKey]) -> Path:
    """Sign ``advisory`` and write it as its version file; return the path.

    Version 1 needs a new id; version N+1 needs the id's current version N to
    verify.  The signed file must verify now (a maintainer key of the root,
    valid today), and an existing file is never overwritten.  Raises
    ``UsageError`` (exit 2) for a version out of order or an existing file,
    ``CheckFailed`` when the keys cannot make it count, ``RegistryError`` on I/O.
    """
    if not keys:
        raise UsageError("an advisory is signed: give --key MAINTAINER_KEY")
    root = registry_root(registry)
    known = load_advisories(registry, root)
    held = known.current.get(advisory.id)
    expected = 1 if held is None else held.advisory.version + 1
    if advisory.version != expected:
        now = "is not published yet" if held is None else f"is at version {held.advisory.version}"
        raise UsageError(f"{advisory.id} {now}: the next version is {expected}, not {advisory.version}")
    relative = advisory_path(advisory.id, advisory.version)
    target = registry.root / relative
    if target.exists():
        raise UsageError(f"{relative} exists (published files are never overwritten)")
    envelope = signed_envelope(advisory, keys)
    data = canon.pretty_bytes(envelope)
    verify_advisory(data, path=relative, root=root, signed_at=_now())
    with Transaction() as transaction:
        transaction.write(target, data)
    return target


def withdrawn(current: Advisory, reason: str) -> Advisory:
    """The next version of ``current``, withdrawn, with the reason; raises ``UsageError`` or ``RecordError``."""
    from kictl.advisories.document import parse_advisory

    if not current.open:
        raise UsageError(f"{current.id} is withdrawn already (version {current.version})")
    value = advisory_value(current)
    value.update(version=current.version + 1, status="withdrawn", withdrawnReason=reason)
    return parse_advisory(value, source="withdrawal")
