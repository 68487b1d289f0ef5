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

Of an advisory's versions, readers apply the highest one that verifies (``advisory_standing``, the one
rule that review and every reader call), counting the versions a copy deleted or changed, which git
history and this machine's memory still hold (``kictl.advisories.memory``): an advisory's state is the
highest version ever seen, and a withdrawal is a version like any other.
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
from kictl.advisories import memory
from kictl.advisories.document import (
    SUFFIX,
    Advisory,
    advisory_path,
    advisory_value,
    load_advisory_bytes,
    parse_advisory,
    parse_advisory_path,
)
from kictl.advisories.memory import MEMORY_FILE, traces
from kictl.errors import CheckFailed, KictlError, NotFoundError, RecordError, UsageError
from kictl.records import format_timestamp
from kictl.store.files import Transaction, is_temporary_name
from kictl.store.git import added_on_main_line, merged_times
from kictl.store.registry import Registry
from kictl.trust import (
    Signer,
    TrustRoot,
    check_signer_time,
    envelope_signers,
    parse_envelope,
    registry_root,
    short_keyid,
    sign_envelope,
)

PAYLOAD_TYPE = "application/vnd.kernelindex.harness-advisory+json"


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
    signers = envelope_signers(root, envelope)
    if envelope.payload_type != PAYLOAD_TYPE:
        raise CheckFailed(f"wrong payloadType {envelope.payload_type!r}; advisories are {PAYLOAD_TYPE!r}")
    for signer in signers:
        check_signer_time(root, signer, signed_at)
    if not any("maintainer" in signer.roles for signer in signers):
        who = ", ".join(f"{s.owner} ({short_keyid(s.keyid)}: {', '.join(s.roles)})" for s in signers)
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


@dataclass(frozen=True, slots=True)
class MissingVersion:
    """A published version that this copy of the registry deleted or changed, and which still applies."""

    path: str
    advisory: Advisory
    how: str  # deleted, changed or remembered (``memory.Seen.how``)
    commit: str | None = None

    def warning(self) -> str:
        """The loud one-line warning every reader prints for it."""
        state = f"{self.advisory.id} version {self.advisory.version}, {self.advisory.status}"
        if self.how == "remembered":
            where = f"was seen on this machine ({MEMORY_FILE}) and is gone from this copy"
        else:
            verb = "deleted" if self.how == "deleted" else "changed"
            where = f"was added in commit {(self.commit or '?')[:12]} and {verb} since"
        return (
            f"ADVISORY DELETED: {self.path} ({state}) {where}; published files are never deleted or changed, "
            'and readers still apply it (docs/advisories.md, "Deleted advisories")'
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "id": self.advisory.id,
            "version": self.advisory.version,
            "status": self.advisory.status,
            "how": self.how,
            "commit": self.commit,
        }


@dataclass
class AdvisorySet:
    """The advisories of a registry as readers apply them: per id, the highest version that verifies."""

    current: dict[str, VerifiedAdvisory] = field(default_factory=dict)
    #: ``(path, why)`` of each version file that counts for nothing
    ignored: list[tuple[str, str]] = field(default_factory=list)
    #: published versions this copy deleted or changed (they count all the same)
    missing: list[MissingVersion] = field(default_factory=list)

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

    def failures(self) -> list[str]:
        """One line per missing version (``kictl verify`` fails with them)."""
        return [missing.warning() for missing in self.missing]


#: ``(path, bytes, signing time, committed, how)``: a version file as ``advisory_standing`` judges it; ``how``
#: is ``None`` for a file in the tree, else ``deleted``, ``changed`` or ``remembered`` (with its commit).
Candidate = tuple[str, bytes, datetime, bool, tuple[str, str | None] | None]


def advisory_standing(candidates: Sequence[Candidate], root: TrustRoot) -> AdvisorySet:
    """The one rule for an advisory's standing, for review and every reader: of each id, the highest version
    that verifies (``verify_advisory`` at its signing time), whether the tree holds it or only git history
    or this machine's memory does.  Never raises: a version that does not verify is ``ignored`` when in the
    tree and dropped otherwise.  A version missing from the tree is listed in ``missing`` unless the tree
    holds the same or a higher version of its id.
    """
    found = AdvisorySet()
    seen_missing: list[tuple[Advisory, str, str, str | None]] = []
    for relative, data, signed_at, committed, how in candidates:
        try:
            advisory, signers = verify_advisory(data, path=relative, root=root, signed_at=signed_at)
        except KictlError as exc:
            if how is None:
                found.ignored.append((relative, exc.message))
            continue
        held = found.current.get(advisory.id)
        if held is None or advisory.version > held.advisory.version:
            found.current[advisory.id] = VerifiedAdvisory(advisory, relative, signers, signed_at, committed)
        if how is not None:
            seen_missing.append((advisory, relative, how[0], how[1]))
    in_tree: dict[str, int] = {}
    unverified = {path for path, _ in found.ignored}
    for relative, _, _, _, how in candidates:
        where = parse_advisory_path(relative)
        if how is None and where is not None and relative not in unverified:
            in_tree[where[0]] = max(in_tree.get(where[0], 0), where[1])
    reported: set[str] = set()
    for advisory, relative, how_name, commit in sorted(seen_missing, key=lambda item: item[1]):
        if in_tree.get(advisory.id, 0) >= advisory.version and how_name == "remembered":
            continue  # the tree holds it (or a later version): memory adds nothing
        if relative in reported:
            continue
        reported.add(relative)
        found.missing.append(MissingVersion(relative, advisory, how_name, commit))
    return found


def _version_files(registry: Registry) -> list[tuple[str, Path]]:
    top = registry.root / layout.ADVISORIES_DIR
    if not top.is_dir():
        return []
    found: list[tuple[str, Path]] = []
    for folder in sorted(os.scandir(top), key=lambda entry: entry.name):
        if not folder.is_dir(follow_symlinks=False):
            continue
        for entry in sorted(os.scandir(folder.path), key=lambda e: e.name):
            if is_temporary_name(entry.name):
                continue  # a killed writer's temporary file: never read
            found.append((f"{layout.ADVISORIES_DIR}/{folder.name}/{entry.name}", Path(entry.path)))
    return found


def has_advisories(registry: Registry) -> bool:
    """Whether the registry has, had or is remembered to have had advisory files (``memory.traces``: a cheap
    test readers make before verifying anything)."""

    return traces(registry.root)


def signing_times(registry: Registry, rev: str = "HEAD") -> dict[str, datetime]:
    """Path → the time the registry accepted each committed advisory file (the main-line commit), capped at now."""

    if not registry.is_git_repository():
        return {}
    cap = datetime.now(UTC)
    return {
        path: min(datetime.fromtimestamp(stamp, UTC), cap)
        for path, stamp in merged_times(registry.root, layout.ADVISORIES_DIR, rev).items()
    }


def load_advisories(registry: Registry, root: TrustRoot | None = None) -> AdvisorySet:
    """The registry's advisories as every reader applies them (``advisory_standing``): the version files
    under ``registry/advisories/``, and the published versions this copy deleted or changed, from git
    history and this machine's memory (``kictl.advisories.memory``).  Remembers the highest version of
    each id and queues one warning per missing version for the command line.

    Raises ``CheckFailed`` when there are advisory files (or there were) and the trust-root chain does not
    verify (nothing could be told apart then), ``RegistryError`` when git or a file cannot be read.
    """

    files = _version_files(registry)
    now = datetime.now(UTC)
    added = added_on_main_line(registry.root, layout.ADVISORIES_DIR) if registry.is_git_repository() else {}
    times = {path: min(datetime.fromtimestamp(stamp, UTC), now) for path, (_, stamp) in added.items()}
    candidates: list[Candidate] = []
    present: dict[str, bytes | None] = {}
    unusable: list[tuple[str, str]] = []
    for relative, path in files:
        present[relative] = None
        if parse_advisory_path(relative) is None or not path.is_file() or path.is_symlink():
            unusable.append((relative, "not an advisory version file"))
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            unusable.append((relative, f"cannot read: {exc.strerror}"))
            continue
        present[relative] = data
        candidates.append((relative, data, times.get(relative, now), relative in times, None))
    history = memory.from_history(registry.root, present, added, now=now) if added else []
    remembered = memory.recall(registry.root, {sha for sha, _ in added.values()})
    if not files and not history and not remembered:
        return AdvisorySet()
    if root is None:
        root = registry_root(registry)
    for seen in [*history, *remembered]:
        candidates.append((seen.path, seen.data, seen.signed_at, seen.commit is not None, (seen.how, seen.commit)))
    found = advisory_standing(candidates, root)
    found.ignored = sorted([*found.ignored, *unusable])
    by_path = {relative: data for relative, data, *_ in candidates}
    git = registry.is_git_repository()
    memory.remember(  # what was published: committed (on HEAD's main line), or any file of a registry without git
        registry.root,
        [
            (advisory_id, held.advisory.version, held.path, by_path[held.path], held.signed_at, added[held.path][0])
            if held.path in added
            else (advisory_id, held.advisory.version, held.path, by_path[held.path], held.signed_at, None)
            for advisory_id, held in found.current.items()
            if held.path in added or not git
        ],
    )
    for missing in found.missing:
        memory.warn(missing.warning())
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
    verify_advisory(data, path=relative, root=root, signed_at=datetime.now(UTC))
    with registry.writing(), Transaction() as transaction:  # one file, linked whole into place
        transaction.write(target, data)
    return target


def withdrawn(current: Advisory, reason: str) -> Advisory:
    """The next version of ``current``, withdrawn, with the reason; raises ``UsageError`` or ``RecordError``."""

    if not current.open:
        raise UsageError(f"{current.id} is withdrawn already (version {current.version})")
    value = advisory_value(current)
    value.update(version=current.version + 1, status="withdrawn", withdrawnReason=reason)
    return parse_advisory(value, source="withdrawal")


def deletion_failures(registry: Registry) -> list[str]:
    """A failure per published advisory version this copy deleted or changed (docs/advisories.md, "Deleted
    advisories"): the registry is append-only, so ``kictl verify`` of any record fails while one is missing."""
    if not has_advisories(registry):
        return []
    try:
        return load_advisories(registry).failures()
    except KictlError as exc:
        return [f"advisories: {exc.message}"]
