"""The trust root: its versions, rotation after TUF §5.3.4-5, and the root of a registry
(``registry/trust/``).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from kictl import canon, layout
from kictl.errors import CheckFailed, NotFoundError, RecordError, UsageError
from kictl.layout import ROOT_FILE, TRUST_DIR
from kictl.lookup import MIN_PREFIX
from kictl.records import API_VERSION, format_timestamp
from kictl.store.files import Transaction, is_temporary_name, read_file, sweep_temporaries, write_atomic
from kictl.store.registry import Registry
from kictl.trust._common import REVOCATION_REASONS, ROLES, ROOT_PAYLOAD_TYPE, _short
from kictl.trust.anchor import find_anchor, record_local_anchor
from kictl.trust.dsse import _b64decode, pae, sign_envelope
from kictl.trust.keys import keyid_of, public_bytes
from kictl.trust.models import RootDocument, TrustedKey, _validate_json_model

if TYPE_CHECKING:
    from kictl.trust.anchor import Anchor


@dataclass(frozen=True, slots=True)
class TrustRoot:
    """A parsed trust-root version with the exact bytes its signatures cover."""

    document: RootDocument
    raw: dict[str, Any]
    data: bytes

    @property
    def version(self) -> int:
        return self.document.signed.version

    @property
    def threshold(self) -> int:
        return self.document.signed.threshold

    @property
    def keys(self) -> Mapping[str, TrustedKey]:
        return self.document.signed.keys

    @property
    def empty(self) -> bool:
        """The root ``kictl init`` writes: no keys, nothing trusted yet."""
        return not self.keys

    def signed_bytes(self) -> bytes:
        """What root signatures cover: PAE(trust-root type, JCS(signed))."""
        return pae(ROOT_PAYLOAD_TYPE, canon.canonical_bytes(self.raw["signed"]))

    def maintainers(self) -> dict[str, TrustedKey]:
        """Maintainer keys not revoked in this version: those that may sign roots."""
        return {keyid: key for keyid, key in self.keys.items() if "maintainer" in key.roles and key.revoked is None}

    def public_key(self, keyid: str) -> Ed25519PublicKey:
        return Ed25519PublicKey.from_public_bytes(bytes.fromhex(self.keys[keyid].public_key))

    def find_key(self, reference: str) -> str:
        """The keyid a full keyid or unique prefix of 8+ hex digits names; raises ``NotFoundError``."""
        ref = reference.lower()
        if len(ref) < MIN_PREFIX:
            raise NotFoundError(f"a keyid prefix needs at least {MIN_PREFIX} hex digits: {reference!r}")
        matches = sorted(keyid for keyid in self.keys if keyid.startswith(ref))
        if not matches:
            raise NotFoundError(
                f"no key {reference} in trust root version {self.version}",
                candidates=[f"{k[:16]} ({v.owner})" for k, v in sorted(self.keys.items())][:10],
            )
        if len(matches) > 1:
            raise NotFoundError(f"keyid prefix {reference} is ambiguous", candidates=matches)
        return matches[0]

    def to_json(self) -> dict[str, Any]:
        return self.raw


def initial_root_document() -> dict[str, Any]:
    """The trust root of a new registry: version 1, no keys, nothing trusted yet.

    The next version, written by ``kictl trust init``, is the trust anchor.
    """
    return {
        "signed": {
            "apiVersion": API_VERSION,
            "kind": "TrustRoot",
            "version": 1,
            "threshold": 1,
            "keys": {},
        },
        "signatures": [],
    }


def load_root(data: bytes, *, source: str = "trust root") -> TrustRoot:
    """Parse one trust-root version strictly.

    Raises ``RecordError`` for malformed JSON, unknown members, a keyid that is
    not the SHA-256 of its public key, or a threshold above the number of
    active maintainers of a root that has keys.
    """
    raw = canon.parse_json(data, source=source)
    if not isinstance(raw, dict):
        raise RecordError(f"{source}: $: a trust root is a JSON object")
    document = _validate_json_model(RootDocument, raw, source)
    assert isinstance(document, RootDocument)
    root = TrustRoot(document=document, raw=raw, data=data)
    for keyid, key in root.keys.items():
        try:
            public = Ed25519PublicKey.from_public_bytes(bytes.fromhex(key.public_key))
        except ValueError as exc:
            raise RecordError(f"{source}: $.signed.keys.{keyid}: not an Ed25519 public key") from exc
        if keyid_of(public) != keyid:
            raise RecordError(
                f"{source}: $.signed.keys.{keyid}: the keyid is not the SHA-256 of the public key ({keyid_of(public)})"
            )
    if not root.empty and root.threshold > len(root.maintainers()):
        raise RecordError(
            f"{source}: $.signed.threshold: {root.threshold} exceeds the {len(root.maintainers())} "
            "active maintainer key(s); no later version could ever be signed"
        )
    return root


def _root_signers(root: TrustRoot, signed_by: Mapping[str, TrustedKey], message: bytes) -> set[str]:
    """The distinct keys of ``signed_by`` with a valid signature on ``message`` in ``root``.

    Each key counts once however many signatures it made (a lesson of
    python-tuf GHSA-r7vq-6425-j94w); keyid hints only choose which key to try first.
    """
    accepted: set[str] = set()
    for entry in root.document.signatures:
        try:
            sig = _b64decode(entry.sig, "root signature")
        except CheckFailed:
            continue
        order = [entry.keyid] if entry.keyid in signed_by else []
        order += [keyid for keyid in signed_by if keyid != entry.keyid]
        for keyid in order:
            if keyid in accepted:
                continue
            key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(signed_by[keyid].public_key))
            try:
                key.verify(sig, message)
            except InvalidSignature:
                continue
            accepted.add(keyid)
            break
    return accepted


def _owners(keys: Iterable[str], root: TrustRoot) -> str:
    names = [f"{root.keys[k].owner} ({_short(k)})" for k in sorted(keys) if k in root.keys]
    return ", ".join(names) or "none"


def verify_anchor(root: TrustRoot) -> None:
    """A trust anchor (the first version with keys) is signed by a threshold of its own maintainers.

    Raises ``CheckFailed``.
    """
    if root.empty:
        return
    signers = _root_signers(root, root.maintainers(), root.signed_bytes())
    if len(signers) < root.threshold:
        raise CheckFailed(
            f"trust root version {root.version} has {len(signers)} valid signature(s) of its own "
            f"maintainers, needs {root.threshold} (signed by: {_owners(signers, root)})"
        )


def _load_for_check(data: bytes, label: str) -> TrustRoot:
    try:
        return load_root(data, source=label)
    except RecordError as exc:
        raise CheckFailed(exc.message, details=exc.details) from exc


def verify_root_update(previous: bytes, new: bytes) -> None:
    """Check that ``new`` may follow ``previous`` (TUF specification §5.3.4, §5.3.5).

    ``new`` must be version ``previous + 1`` and be signed by a threshold of
    ``previous``'s active maintainers (unless ``previous`` has no keys: then
    ``new`` is the trust anchor) and by a threshold of its own maintainers.
    Raises ``CheckFailed`` naming what is missing.
    """
    old = _load_for_check(previous, "previous trust root")
    root = _load_for_check(new, "new trust root")
    if root.version != old.version + 1:
        raise CheckFailed(
            f"trust root version {root.version} cannot follow version {old.version} (expected {old.version + 1})"
        )
    if root.empty:
        raise CheckFailed(f"trust root version {root.version} has no keys; a root never returns to empty")
    message = root.signed_bytes()
    if not old.empty:
        by_old = _root_signers(root, old.maintainers(), message)
        if len(by_old) < old.threshold:
            raise CheckFailed(
                f"trust root version {root.version} is signed by {len(by_old)} maintainer(s) of version "
                f"{old.version}, needs {old.threshold} (signed by: {_owners(by_old, old)})"
            )
    by_new = _root_signers(root, root.maintainers(), message)
    if len(by_new) < root.threshold:
        raise CheckFailed(
            f"trust root version {root.version} is signed by {len(by_new)} of its own maintainer(s), "
            f"needs {root.threshold} (signed by: {_owners(by_new, root)})"
        )


def verify_root_chain(versions: Sequence[bytes]) -> TrustRoot:
    """Verify consecutive trust-root versions, oldest first, and return the newest.

    The first is the anchor: it has no keys or is signed by a threshold of its
    own maintainers; each next one must pass ``verify_root_update``.  Raises
    ``CheckFailed`` for the first link that fails.
    """
    if not versions:
        raise CheckFailed("no trust root versions to verify")
    current = _load_for_check(versions[0], "first trust root")
    verify_anchor(current)
    for data in versions[1:]:
        verify_root_update(current.data, data)
        current = load_root(data)
    return current


# --------------------------------------------------------------------------- the root in a registry


def root_version_path(registry: Registry, version: int) -> Path:
    return registry.root / layout.root_version_path(version)


def _read(path: Path, registry: Registry) -> bytes:
    return read_file(path, registry.relative(path))


@dataclass(frozen=True, slots=True)
class RootChain:
    """The trust-root versions of a registry: the verified current root and each version's file."""

    root: TrustRoot
    files: tuple[tuple[int, str], ...]  # (version, path relative to the registry root)
    anchor: Anchor | None = None  # the pinned version the chain was verified from (trust.anchor)

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document of ``kictl trust verify`` for a chain that verified."""
        return {
            "ok": True,
            "version": self.root.version,
            "versions": [{"version": v, "path": p} for v, p in self.files],
            "anchor": None
            if self.anchor is None
            else {"version": self.anchor.version, "digest": self.anchor.digest, "source": self.anchor.source},
        }


def root_chain(registry: Registry) -> RootChain:
    """Verify ``registry/trust/``: the versions ``<N>.root.json`` and ``root.json``, the newest.

    With no version files, ``root.json`` must be the keyless root of a new
    registry.  The chain is verified from its pinned anchor upwards when a
    version is pinned (``trust.anchor``: any version, so a registry re-anchored
    by new maintainers verifies), else from its lowest version (``anchor`` is
    then ``None``: ``kictl verify`` refuses such a chain).  Raises ``CheckFailed`` for a broken chain, a gap, or a
    ``root.json`` that is not the newest version; ``RegistryError`` when a
    file cannot be read.
    """
    current_data = _read(registry.root / ROOT_FILE, registry)
    numbered = _version_files_of(registry)
    if not numbered:
        root = _load_for_check(current_data, ROOT_FILE)
        if not root.empty:
            raise CheckFailed(
                f"{ROOT_FILE} has keys but {TRUST_DIR}/ keeps none of its versions (<N>.root.json); "
                "every version must be kept"
            )
        return RootChain(root=root, files=((root.version, ROOT_FILE),))
    datas: list[bytes] = []
    keyed: list[bool] = []
    for expected, (version, path) in enumerate(numbered, start=numbered[0][0]):
        if version != expected:
            raise CheckFailed(f"{TRUST_DIR}/ lacks trust root version {expected} (found {version}.root.json)")
        data = _read(path, registry)
        root = _load_for_check(data, registry.relative(path))
        if root.version != version:
            raise CheckFailed(f"{registry.relative(path)} holds version {root.version}, not {version}")
        datas.append(data)
        keyed.append(not root.empty)
    anchor = find_anchor(
        registry, [(version, data, has) for (version, _), data, has in zip(numbered, datas, keyed, strict=True)]
    )
    start = 0 if anchor is None else anchor.version - numbered[0][0]
    try:
        root = verify_root_chain(datas[start:])
    except CheckFailed as exc:
        raise CheckFailed(f"{TRUST_DIR}/: {exc.message}", details=exc.details) from exc
    if current_data != datas[-1]:
        if len(datas) > 1 and current_data == datas[-2]:
            raise CheckFailed(interrupted_message(numbered[-1][0]))
        raise CheckFailed(f"{ROOT_FILE} is not byte for byte {numbered[-1][1].name}, the newest version")
    return RootChain(root=root, files=tuple((v, registry.relative(p)) for v, p in numbered), anchor=anchor)


#: The command that finishes a trust-root write a crash interrupted (``repair_root``).
REPAIR_COMMAND = "kictl trust repair"


def interrupted_message(version: int) -> str:
    """The one-line error of a registry whose trust-root write stopped between its two files."""
    return (
        f"{ROOT_FILE} is still version {version - 1} but {TRUST_DIR}/{version}.root.json, which verifies, is newer: "
        f"a trust-root write was interrupted; finish it with `{REPAIR_COMMAND}`"
    )


def repair_root(registry: Registry) -> tuple[TrustRoot, bool, int]:
    """Finish a trust-root write that a crash interrupted (``kictl trust repair``), under the writer lock.

    A version is published in two files, ``<N>.root.json`` and then ``root.json``: a writer killed between
    them leaves ``root.json`` one version behind.  The chain up to ``<N>`` must verify (from its anchor,
    as every reader checks it); then ``root.json`` becomes ``<N>``'s bytes.  kictl's own temporary files
    left under ``registry/`` by a killed writer are removed.  Returns ``(the root, whether root.json was
    rewritten, how many temporary files were removed)``.  Raises ``CheckFailed`` when the chain does not
    verify or ``root.json`` is anything else than the newest version or the one before it (not an
    interrupted write: restore it from git), ``RegistryError`` on I/O errors.
    """
    with registry.writing():
        removed = _sweep_own_temporaries(registry)
        try:
            return root_chain(registry).root, False, removed
        except CheckFailed as exc:
            numbered = _version_files_of(registry)
            if not numbered or exc.message != interrupted_message(numbered[-1][0]):
                raise
        newest = _read(numbered[-1][1], registry)
        write_atomic(registry.root / ROOT_FILE, newest)
        return root_chain(registry).root, True, removed


def _version_files_of(registry: Registry) -> list[tuple[int, Path]]:
    numbered: list[tuple[int, Path]] = []
    if registry.trust_dir.is_dir():
        for entry in registry.trust_dir.iterdir():
            number = layout.parse_root_version_path(f"{TRUST_DIR}/{entry.name}")
            if number is not None:
                numbered.append((number, entry))
    return sorted(numbered)


def _sweep_own_temporaries(registry: Registry) -> int:
    """Remove kictl's temporary files (``.<name>.<random>.tmp``) under the trust root, attestations and
    advisories; only under the writer lock, where no writer is running."""

    found: list[Path] = []
    for top in (registry.trust_dir, registry.attestations_dir, registry.root / layout.ADVISORIES_DIR):
        for dirpath, _, filenames in os.walk(top):
            found.extend(Path(dirpath) / name for name in filenames if is_temporary_name(name))
    return len(sweep_temporaries(found, older_than=0.0))


def registry_root(registry: Registry) -> TrustRoot:
    """The registry's current trust root, verified through its whole chain; raises ``CheckFailed``."""
    return root_chain(registry).root


def _floor_second(moment: datetime) -> datetime:
    return moment.replace(microsecond=0)


def _now() -> datetime:
    return datetime.now(UTC)


def _publish_root(
    registry: Registry, signed: dict[str, Any], keys: Sequence[Ed25519PrivateKey], *, anchor: bool = False
) -> TrustRoot:
    """Sign ``signed`` with ``keys``, verify it may follow the current root, then write it.

    ``anchor``: pin it on this machine first (``kictl trust init``'s anchor, ``trust.anchor``).
    """
    previous = root_chain(registry)
    signatures = sign_envelope(ROOT_PAYLOAD_TYPE, canon.canonical_bytes(signed), keys)["signatures"]
    unique = {entry["keyid"]: entry for entry in signatures}
    document = {"signed": signed, "signatures": list(unique.values())}
    data = canon.pretty_bytes(document)
    verify_root_update(previous.root.data, data)
    new_root = load_root(data)
    if anchor:
        record_local_anchor(registry, data)  # before the root is written: a crash after it leaves no unpinned root
    # Each step leaves a registry the next command reads or repairs: version file 1 (the keyless root
    # again), then <N>.root.json (readers name `kictl trust repair` until root.json follows), then
    # root.json, each written whole by a rename.  Temporary files are never read (``is_temporary_name``).
    with registry.writing(), Transaction() as transaction:
        if previous.files == ((previous.root.version, ROOT_FILE),):
            # The keyless root of `kictl init` becomes version file 1 of the chain.
            transaction.write(root_version_path(registry, previous.root.version), previous.root.data)
        transaction.write(root_version_path(registry, new_root.version), data)
        write_atomic(registry.root / ROOT_FILE, data)
    return new_root


def _key_entry(
    public_key: Ed25519PublicKey,
    *,
    owner: str,
    roles: Sequence[str],
    not_before: datetime | None,
    not_after: datetime | None,
) -> dict[str, Any]:
    unknown = [role for role in roles if role not in ROLES]
    if unknown or not roles:
        raise UsageError(f"roles are among {', '.join(ROLES)}; got {', '.join(roles) or 'none'}")
    if not owner or any(ord(char) < 0x20 for char in owner):
        raise UsageError("an owner is a non-empty line of text")
    start = not_before or _floor_second(_now())
    entry: dict[str, Any] = {
        "publicKey": public_bytes(public_key).hex(),
        "scheme": "ed25519",
        "owner": owner,
        "roles": sorted(set(roles), key=ROLES.index),
        "notBefore": format_timestamp(start),
    }
    if not_after is not None:
        if not_after <= start:
            raise UsageError(f"--not-after {format_timestamp(not_after)} is not after {format_timestamp(start)}")
        entry["notAfter"] = format_timestamp(not_after)
    return entry


def check_signers(
    keys: Sequence[Ed25519PrivateKey],
    maintainers: set[str],
    threshold: int,
    stranger: str,
    *,
    who: str = "maintainer(s)",
) -> None:
    """A new root version is signed by its own maintainers, ``threshold`` of them at most: raises ``UsageError``
    naming a signing key that is not among ``maintainers`` (``stranger`` says what to do) or a threshold out of
    range (``kictl trust init``, ``kictl trust reanchor``)."""
    for key in keys:
        keyid = keyid_of(key.public_key())
        if keyid not in maintainers:
            raise UsageError(f"signing key {_short(keyid)} {stranger}")
    if threshold < 1 or threshold > len(maintainers):
        raise UsageError(f"--threshold {threshold} must be between 1 and the {len(maintainers)} {who}")


def init_root(
    registry: Registry,
    *,
    maintainers: Sequence[tuple[Ed25519PublicKey, str]],
    keys: Sequence[Ed25519PrivateKey],
    threshold: int = 1,
    not_before: datetime | None = None,
) -> TrustRoot:
    """Write the trust anchor: the first root with keys, listing ``maintainers`` (key, owner).

    Every signing key must be among them; ``notBefore`` defaults to now.  Raises
    ``UsageError`` when the registry's root already has keys or the threshold
    cannot be met, ``CheckFailed`` when the signatures do not reach it.
    """
    current = root_chain(registry).root
    if not current.empty:
        raise UsageError(
            f"the trust root (version {current.version}) already has keys; "
            "change it with `kictl trust add-key` or `kictl trust revoke`"
        )
    if not keys:
        raise UsageError("the first trust root must be signed by its maintainers: pass --key with their private keys")
    entries: dict[str, dict[str, Any]] = {}
    for public_key, owner in maintainers:
        entries[keyid_of(public_key)] = _key_entry(
            public_key, owner=owner, roles=["maintainer"], not_before=not_before, not_after=None
        )
    check_signers(
        keys, set(entries), threshold, "is not among the --maintainer keys; give its .pub file with --maintainer"
    )
    signed = {
        "apiVersion": API_VERSION,
        "kind": "TrustRoot",
        "version": current.version + 1,
        "threshold": threshold,
        "keys": entries,
    }
    return _publish_root(registry, signed, keys, anchor=True)


def add_key(
    registry: Registry,
    public_key: Ed25519PublicKey,
    *,
    owner: str,
    roles: Sequence[str],
    keys: Sequence[Ed25519PrivateKey],
    not_before: datetime | None = None,
    not_after: datetime | None = None,
    threshold: int | None = None,
) -> TrustRoot:
    """Publish the next root version with one more key, signed by maintainer ``keys``.

    ``notBefore`` defaults to now (whole seconds, the resolution of git's
    clock).  Raises ``UsageError`` when the key is already listed,
    ``CheckFailed`` when the signatures miss either threshold.
    """
    current = root_chain(registry).root
    if current.empty:
        raise UsageError("the trust root has no keys yet; start with `kictl trust init`")
    keyid = keyid_of(public_key)
    if keyid in current.keys:
        existing = current.keys[keyid]
        raise UsageError(f"key {_short(keyid)} is already in the trust root (owner {existing.owner})")
    signed = _next_signed(current)
    signed["keys"][keyid] = _key_entry(public_key, owner=owner, roles=roles, not_before=not_before, not_after=not_after)
    if threshold is not None:
        signed["threshold"] = threshold
    return _publish_root(registry, signed, keys)


def revoke_key(
    registry: Registry,
    keyid: str,
    *,
    reason: str,
    keys: Sequence[Ed25519PrivateKey],
    at: datetime | None = None,
) -> TrustRoot:
    """Publish the next root version with ``keyid`` revoked (``retired`` or ``compromised``) at ``at``.

    A retired key's signatures made before ``at`` stay valid; a compromised
    key's signatures are all invalid.  ``at`` defaults to now (whole seconds).
    Raises ``NotFoundError`` for an unknown keyid, ``UsageError`` for a bad
    reason or a key already revoked, ``CheckFailed`` when signatures miss a threshold.
    """
    if reason not in REVOCATION_REASONS:
        raise UsageError(f"--reason is one of {', '.join(REVOCATION_REASONS)}, not {reason!r}")
    current = root_chain(registry).root
    full = current.find_key(keyid)
    existing = current.keys[full]
    if existing.revoked is not None and not (existing.revoked.reason == "retired" and reason == "compromised"):
        raise UsageError(
            f"key {_short(full)} ({existing.owner}) is already revoked "
            f"({existing.revoked.reason}, {existing.revoked.at})"
        )
    signed = _next_signed(current)
    moment = at or _floor_second(_now())
    signed["keys"][full]["revoked"] = {"at": format_timestamp(moment), "reason": reason}
    return _publish_root(registry, signed, keys)


def sign_policy(registry: Registry, *, keys: Sequence[Ed25519PrivateKey]) -> TrustRoot:
    """Write the next trust-root version naming the sha256 of ``registry/policy.json`` (its ``policyDigest``).

    A policy change is a maintainer's decision: the threshold of maintainer
    signatures a root change needs is what a policy change needs (docs/trust.md
    "The policy"; ``kictl review`` lints a policy change without it).  Raises
    ``UsageError`` when the root has no keys or already names these bytes,
    ``CheckFailed`` when the signatures do not reach the threshold.
    """
    current = root_chain(registry).root
    if current.empty:
        raise UsageError("the trust root has no keys yet: create it with `kictl trust init` first")
    digest = canon.bytes_digest(_read(registry.policy_path, registry))
    if current.document.signed.policy_digest == digest:
        raise UsageError(f"trust root version {current.version} already signs this policy ({digest})")
    signed = _next_signed(current)
    signed["policyDigest"] = digest
    return _publish_root(registry, signed, keys)


def _next_signed(current: TrustRoot) -> dict[str, Any]:
    signed: dict[str, Any] = copy.deepcopy(current.raw["signed"])
    signed["version"] = current.version + 1
    return signed
