"""Keys, DSSE attestations, the trust root and evidence levels (DESIGN §5).

Every claim in the registry is attributable and every tampering detectable,
offline.  This module holds the four parts of that promise:

*Keys.*  Ed25519 through ``cryptography``.  A keyid is the hex SHA-256 of the
raw 32-byte public key and is always recomputed by the verifier, never taken
from an envelope.  Private keys are PKCS#8 PEM files of mode 0600, encrypted
when ``$KICTL_KEY_PASSPHRASE`` is set; public keys are SubjectPublicKeyInfo
PEM, optionally preceded by ``owner:`` and ``keyid:`` lines (RFC 7468 §5.2
allows explanatory text before the encapsulation boundary).

*Attestations.*  A DSSE envelope (DSSE envelope.md; payloadType
``application/vnd.in-toto+json``) whose payload is the JCS bytes of an in-toto
Statement v1 (in-toto attestation spec/v1/statement.md) about one record:
``subject = [{"name": "<kind>/<name>", "digest": {"sha256": <hex>}}]`` and
``predicateType = https://kernelindex.dev/attestation/<type>/v1`` with the
types ``submission``, ``rerun``, ``review`` and ``retraction``.  Signatures are
Ed25519 over the pre-authentication encoding (DSSE protocol.md, "PAE").  An
envelope about record ``<hex>`` is stored at
``registry/attestations/<hex[0:2]>/<hex>/<envelope hex>.dsse.json``, its bytes
``canon.pretty_bytes(envelope)`` and its name the SHA-256 of its JCS bytes.

*The trust root.*  ``registry/trust/root.json`` is the current version of a
versioned document ``{"signed": {...}, "signatures": [...]}`` that lists keys
(owner, roles among ``maintainer``, ``submitter``, ``verifier``, validity
window, revocation) and a maintainer threshold.  Every version is also kept as
``registry/trust/<N>.root.json``.  Root signatures are Ed25519 over
PAE(``application/vnd.kernelindex.trust-root+json``, JCS(signed)), so that a
root signature can never be replayed as an attestation or the reverse.
Rotation follows TUF (specification §5.3.4 and §5.3.5) in full: version N+1
must be exactly N+1 and be signed by a threshold of version N's maintainer
keys *and* by a threshold of its own maintainer keys, each key counted once.
The root ``kictl init`` writes has no keys; the version after it, the trust
anchor, needs only its own threshold.

*Evidence.*  Computed, never declared: ``reported`` unless a ``verifier`` key
attests a rerun; ``verified`` when such reruns agree (verdict ``agrees`` and the
latency ratio within the policy's ``rerunTolerance``), ``disputed`` when any of
them disagreed or failed.  Community reruns (other roles) and reviews are
counted but never change the level.  A valid ``retraction`` (by a maintainer
or the record's own submitter) marks the record retracted.

Verification raises: ``verify_*`` return a value or raise ``CheckFailed``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import re
import stat
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal, TypeAlias

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import Field, StringConstraints, ValidationError, model_validator

from kictl import canon, layout
from kictl.errors import CheckFailed, EnvError, KictlError, NotFoundError, RecordError, RegistryError, UsageError
from kictl.layout import ATTESTATIONS_DIR, ROOT_FILE, TRUST_DIR
from kictl.lookup import MIN_PREFIX, hex_prefix
from kictl.records import API_VERSION, KINDS, StoredRecord, Timestamp, WireModel, format_timestamp, parse_timestamp
from kictl.store import Registry, Transaction, write_atomic

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_PREFIX = "https://kernelindex.dev/attestation/"
ROOT_PAYLOAD_TYPE = "application/vnd.kernelindex.trust-root+json"
PREDICATE_TYPES = ("submission", "rerun", "review", "retraction")
ROLES = ("maintainer", "submitter", "verifier")
LEVELS = ("reported", "verified", "disputed")
REVOCATION_REASONS = ("retired", "compromised")
PASSPHRASE_ENV = "KICTL_KEY_PASSPHRASE"

Role: TypeAlias = Literal["maintainer", "submitter", "verifier"]
Level: TypeAlias = Literal["reported", "verified", "disputed"]


def predicate_type_uri(kind: str) -> str:
    """``https://kernelindex.dev/attestation/<kind>/v1``; raises ``UsageError`` for unknown kinds."""
    if kind.startswith(PREDICATE_PREFIX):
        kind = predicate_kind(kind) or kind
    if kind not in PREDICATE_TYPES:
        raise UsageError(f"unknown attestation type {kind!r}; expected one of {', '.join(PREDICATE_TYPES)}")
    return f"{PREDICATE_PREFIX}{kind}/v1"


def predicate_kind(uri: str) -> str | None:
    """The short type (``rerun``) of one of kictl's predicate type URIs, else ``None``."""
    for kind in PREDICATE_TYPES:
        if uri == f"{PREDICATE_PREFIX}{kind}/v1":
            return kind
    return None


def _short(keyid: str) -> str:
    return keyid[:12]


def _moment(text: str) -> datetime:
    return parse_timestamp(text)


# =========================================================================== keys


def public_bytes(public_key: Ed25519PublicKey) -> bytes:
    """The raw 32 bytes of an Ed25519 public key."""
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def keyid_of(public_key: Ed25519PublicKey) -> str:
    """Hex SHA-256 of the raw 32-byte public key (DESIGN §5)."""
    return canon.sha256_hex(public_bytes(public_key))


def _passphrase() -> bytes | None:
    value = os.environ.get(PASSPHRASE_ENV)
    return value.encode("utf-8") if value else None


def public_key_text(public_key: Ed25519PublicKey, *, owner: str | None = None) -> bytes:
    """The ``.pub`` file: ``owner:`` and ``keyid:`` lines, then the PEM public key."""
    lines = []
    if owner:
        if "\n" in owner or "\r" in owner:
            raise UsageError("an owner is one line of text")
        lines.append(f"owner: {owner}\n")
    lines.append(f"keyid: {keyid_of(public_key)}\n")
    pem = public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "".join(lines).encode("utf-8") + pem


def generate_keypair(out: Path, *, owner: str | None = None) -> str:
    """Write a new Ed25519 key to ``out`` (PEM, mode 0600) and ``out.pub``; return its keyid.

    The private key is encrypted with ``$KICTL_KEY_PASSPHRASE`` when that is
    set.  Raises ``UsageError`` when either file exists (keys are never
    overwritten) and ``RegistryError`` when they cannot be written.
    """
    public_path = out.with_name(out.name + ".pub")
    for path in (out, public_path):
        if path.exists() or path.is_symlink():
            raise UsageError(f"{path} exists; keygen never overwrites a key (choose another --out)")
    private_key = Ed25519PrivateKey.generate()
    passphrase = _passphrase()
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption()
    )
    private_pem = private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    public_text = public_key_text(private_key.public_key(), owner=owner)
    created: list[Path] = []
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        for path, data, mode in ((out, private_pem, 0o600), (public_path, public_text, 0o644)):
            # O_EXCL: never replace a file that appeared since the check above.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            created.append(path)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(path, mode)  # the umask may have removed bits, never added them
    except FileExistsError as exc:
        _remove_all(created[:-1] if created and created[-1] != Path(exc.filename) else created)
        raise UsageError(f"{exc.filename} exists; keygen never overwrites a key") from exc
    except OSError as exc:
        _remove_all(created)
        raise RegistryError(f"cannot write {exc.filename or out}: {exc.strerror}") from exc
    return keyid_of(private_key.public_key())


def _remove_all(paths: Iterable[Path]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink()


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """An Ed25519 private key from a PEM file.

    The passphrase comes from ``$KICTL_KEY_PASSPHRASE``.  Raises ``EnvError``
    (exit 5) when the file is missing, readable by group or others, encrypted
    without a passphrase set, not decryptable with it, or not an Ed25519 key.
    """
    try:
        info = path.stat()
    except FileNotFoundError as exc:
        raise EnvError(f"no private key at {path}") from exc
    except OSError as exc:
        raise EnvError(f"{path}: cannot read: {exc.strerror}") from exc
    if os.name == "posix" and info.st_mode & 0o077:
        mode = stat.S_IMODE(info.st_mode)
        raise EnvError(
            f"{path}: permissions {mode:04o} are too open for a private key "
            f"(group or others may read it); run chmod 600 {path}"
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EnvError(f"{path}: cannot read: {exc.strerror}") from exc
    passphrase = _passphrase()
    encrypted = b"ENCRYPTED PRIVATE KEY" in data
    if encrypted and passphrase is None:
        raise EnvError(f"{path} is encrypted; set ${PASSPHRASE_ENV} to its passphrase")
    try:
        key = serialization.load_pem_private_key(data, password=passphrase if encrypted else None)
    except ValueError as exc:
        if encrypted:
            raise EnvError(f"cannot decrypt {path}: wrong passphrase in ${PASSPHRASE_ENV}") from exc
        raise EnvError(f"{path} is not a PEM private key") from exc
    except (TypeError, UnsupportedAlgorithm) as exc:
        raise EnvError(f"{path} is not a usable PEM private key: {exc}") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise EnvError(f"{path} is a {type(key).__name__.removeprefix('_')}, not an Ed25519 key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """An Ed25519 public key from a PEM file (a ``.pub`` file from ``kictl keygen``).

    Raises ``EnvError`` when the file is missing or holds no Ed25519 public key.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise EnvError(f"no public key at {path}") from exc
    except OSError as exc:
        raise EnvError(f"{path}: cannot read: {exc.strerror}") from exc
    if b"PRIVATE KEY" in data:
        raise EnvError(f"{path} holds a private key; give its .pub file")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise EnvError(f"{path} is not a PEM public key") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise EnvError(f"{path} is not an Ed25519 public key")
    return key


def public_key_owner(path: Path) -> str | None:
    """The ``owner:`` line of a ``.pub`` file written by ``kictl keygen --owner``, if any."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("-----BEGIN"):
            break
        if line.startswith("owner:"):
            return line.removeprefix("owner:").strip() or None
    return None


# =========================================================================== DSSE


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE protocol, "PAE": ``DSSEv1 SP LEN(type) SP type SP LEN(body) SP body``.

    LEN is the ASCII decimal byte length without leading zeros.
    """
    type_bytes = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(type_bytes), type_bytes, len(payload), payload)


def _b64encode(data: bytes) -> str:
    return base64.standard_b64encode(data).decode("ascii")


_B64_RE = re.compile(r"^[A-Za-z0-9+/_-]*={0,2}$")


def _b64decode(text: object, what: str) -> bytes:
    """DSSE envelope.md: standard or URL-safe base64, verifiers accept either (padding optional)."""
    if not isinstance(text, str) or not _B64_RE.match(text):
        raise CheckFailed(f"corrupted envelope: {what} is not base64")
    body = text.rstrip("=")
    if "-" in body or "_" in body:
        if "+" in body or "/" in body:
            raise CheckFailed(f"corrupted envelope: {what} mixes two base64 alphabets")
        body = body.replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CheckFailed(f"corrupted envelope: {what} is not base64 ({exc})") from exc


def sign_envelope(payload_type: str, payload: bytes, keys: Sequence[Ed25519PrivateKey]) -> dict[str, Any]:
    """A DSSE JSON envelope (envelope.md) with one signature per key over PAE(type, payload)."""
    message = pae(payload_type, payload)
    return {
        "payload": _b64encode(payload),
        "payloadType": payload_type,
        "signatures": [{"keyid": keyid_of(key.public_key()), "sig": _b64encode(key.sign(message))} for key in keys],
    }


@dataclass(frozen=True, slots=True)
class EnvelopeSignature:
    """One signature of an envelope: the unauthenticated keyid hint and the signature bytes."""

    keyid_hint: str | None
    sig: bytes


@dataclass(frozen=True, slots=True)
class Envelope:
    """A decoded DSSE envelope: nothing in it is verified yet."""

    payload_type: str
    payload: bytes
    signatures: tuple[EnvelopeSignature, ...]

    def pae(self) -> bytes:
        return pae(self.payload_type, self.payload)


def parse_envelope(data: bytes) -> Envelope:
    """Decode a DSSE JSON envelope; raises ``CheckFailed`` ("corrupted envelope: ...").

    Unknown members are ignored, as envelope.md's parsing rules require.
    """
    try:
        value = canon.parse_json(data, source="envelope")
    except RecordError as exc:
        raise CheckFailed(f"corrupted envelope: {exc.message.removeprefix('envelope: ')}") from exc
    if not isinstance(value, dict):
        raise CheckFailed("corrupted envelope: not a JSON object")
    for member in ("payload", "payloadType", "signatures"):
        if member not in value:
            raise CheckFailed(f"corrupted envelope: no {member}")
    payload_type = value["payloadType"]
    if not isinstance(payload_type, str):
        raise CheckFailed("corrupted envelope: payloadType is not a string")
    payload = _b64decode(value["payload"], "payload")
    raw_signatures = value["signatures"]
    if not isinstance(raw_signatures, list) or not raw_signatures:
        raise CheckFailed("corrupted envelope: signatures is not a non-empty list")
    signatures = []
    for index, item in enumerate(raw_signatures):
        if not isinstance(item, dict) or "sig" not in item:
            raise CheckFailed(f"corrupted envelope: signature {index} has no sig")
        hint = item.get("keyid")
        if hint is not None and not isinstance(hint, str):
            raise CheckFailed(f"corrupted envelope: signature {index} has a keyid that is not a string")
        signatures.append(EnvelopeSignature(keyid_hint=hint or None, sig=_b64decode(item["sig"], f"signature {index}")))
    return Envelope(payload_type=payload_type, payload=payload, signatures=tuple(signatures))


# =========================================================================== models


_Model = WireModel


Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
HexKey = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
Text = Annotated[str, StringConstraints(min_length=1, max_length=4096)]
Owner = Annotated[str, StringConstraints(pattern=r"^[^\x00-\x1f]+$", min_length=1, max_length=256)]


class SubmissionPredicate(_Model):
    """``submission``: I ran this and vouch for it."""

    note: Text | None = None


class RerunPredicate(_Model):
    """``rerun``: I reran the record; my own BenchmarkRun, the latency ratio (mine over
    the record's primary statistic) and my verdict."""

    run_digest: Digest
    ratio: Annotated[float, Field(gt=0.0)] | None = None
    verdict: Literal["agrees", "disagrees", "failed"]
    note: Text | None = None

    @model_validator(mode="after")
    def _ratio_unless_failed(self) -> RerunPredicate:
        if self.verdict != "failed" and self.ratio is None:
            raise ValueError(f"a rerun that {self.verdict} states its latency ratio")
        return self


class ReviewPredicate(_Model):
    """``review``: a note about the record."""

    note: Text


class RetractionPredicate(_Model):
    """``retraction``: the record should no longer be used, and why."""

    reason: Text
    superseded_by: Digest | None = None


PREDICATE_MODELS: dict[str, type[_Model]] = {
    "submission": SubmissionPredicate,
    "rerun": RerunPredicate,
    "review": ReviewPredicate,
    "retraction": RetractionPredicate,
}


def _validate_json_model(model: type[_Model], value: Any, where: str) -> _Model:
    """Validate a parsed JSON value strictly; raises ``RecordError`` with ``where: $.path: message``."""
    import json

    try:
        return model.model_validate_json(json.dumps(value, allow_nan=False))
    except ValidationError as exc:
        first = exc.errors()[0]
        path = canon.format_path(tuple(first["loc"]))
        message = str(first["msg"]).removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = "unknown member"
        raise RecordError(
            f"{where}: {path}: {message}", details=[f"{len(exc.errors()) - 1} more"] if len(exc.errors()) > 1 else ()
        ) from exc


def predicate_model(kind: str, predicate: Mapping[str, Any] | None) -> _Model:
    """Validate a predicate of type ``kind``; raises ``RecordError`` (exit 3) or ``UsageError``."""
    predicate_type_uri(kind)
    return _validate_json_model(PREDICATE_MODELS[kind], dict(predicate or {}), f"{kind} predicate")


class Revocation(_Model):
    at: Timestamp
    reason: Literal["retired", "compromised"]


class TrustedKey(_Model):
    public_key: HexKey
    scheme: Literal["ed25519"]
    owner: Owner
    roles: Annotated[tuple[Role, ...], Field(min_length=1)]
    not_before: Timestamp
    not_after: Timestamp | None = None
    revoked: Revocation | None = None

    @model_validator(mode="after")
    def _coherent(self) -> TrustedKey:
        if len(set(self.roles)) != len(self.roles):
            raise ValueError("roles repeat")
        if self.not_after is not None and _moment(self.not_after) <= _moment(self.not_before):
            raise ValueError("notAfter is not after notBefore")
        return self


class RootSigned(_Model):
    api_version: Literal["kernelindex.dev/v1alpha1"]
    kind: Literal["TrustRoot"]
    version: Annotated[int, Field(ge=1, le=canon.MAX_SAFE_INTEGER)]
    threshold: Annotated[int, Field(ge=1, le=1000)]
    keys: dict[HexKey, TrustedKey]


class RootSignature(_Model):
    keyid: str
    sig: str


class RootDocument(_Model):
    signed: RootSigned
    signatures: tuple[RootSignature, ...]


# =========================================================================== the trust root


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
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise RegistryError(f"{registry.relative(path)}: no such file") from exc
    except OSError as exc:
        raise RegistryError(f"{registry.relative(path)}: cannot read: {exc.strerror}") from exc


@dataclass(frozen=True, slots=True)
class RootChain:
    """The trust-root versions of a registry: the verified current root and each version's file."""

    root: TrustRoot
    files: tuple[tuple[int, str], ...]  # (version, path relative to the registry root)


def root_chain(registry: Registry) -> RootChain:
    """Verify ``registry/trust/``: the versions ``<N>.root.json`` and ``root.json``, the newest.

    With no version files, ``root.json`` must be the keyless root of a new
    registry.  Raises ``CheckFailed`` for a broken chain, a gap, or a
    ``root.json`` that is not the newest version; ``RegistryError`` when a
    file cannot be read.
    """
    current_data = _read(registry.root / ROOT_FILE, registry)
    numbered: list[tuple[int, Path]] = []
    if registry.trust_dir.is_dir():
        for entry in registry.trust_dir.iterdir():
            number = layout.parse_root_version_path(f"{TRUST_DIR}/{entry.name}")
            if number is not None:
                numbered.append((number, entry))
    numbered.sort()
    if not numbered:
        root = _load_for_check(current_data, ROOT_FILE)
        if not root.empty:
            raise CheckFailed(
                f"{ROOT_FILE} has keys but {TRUST_DIR}/ keeps none of its versions (<N>.root.json); "
                "every version must be kept"
            )
        return RootChain(root=root, files=((root.version, ROOT_FILE),))
    datas = []
    for expected, (version, path) in enumerate(numbered, start=numbered[0][0]):
        if version != expected:
            raise CheckFailed(f"{TRUST_DIR}/ lacks trust root version {expected} (found {version}.root.json)")
        data = _read(path, registry)
        root = _load_for_check(data, registry.relative(path))
        if root.version != version:
            raise CheckFailed(f"{registry.relative(path)} holds version {root.version}, not {version}")
        datas.append(data)
    try:
        root = verify_root_chain(datas)
    except CheckFailed as exc:
        raise CheckFailed(f"{TRUST_DIR}/: {exc.message}", details=exc.details) from exc
    if current_data != datas[-1]:
        raise CheckFailed(f"{ROOT_FILE} is not byte for byte {numbered[-1][1].name}, the newest version")
    return RootChain(root=root, files=tuple((v, registry.relative(p)) for v, p in numbered))


def registry_root(registry: Registry) -> TrustRoot:
    """The registry's current trust root, verified through its whole chain; raises ``CheckFailed``."""
    return root_chain(registry).root


def _floor_second(moment: datetime) -> datetime:
    return moment.replace(microsecond=0)


def _now() -> datetime:
    return datetime.now(UTC)


def _publish_root(registry: Registry, signed: dict[str, Any], keys: Sequence[Ed25519PrivateKey]) -> TrustRoot:
    """Sign ``signed`` with ``keys``, verify it may follow the current root, then write it."""
    previous = root_chain(registry)
    signatures = sign_envelope(ROOT_PAYLOAD_TYPE, canon.canonical_bytes(signed), keys)["signatures"]
    unique = {entry["keyid"]: entry for entry in signatures}
    document = {"signed": signed, "signatures": list(unique.values())}
    data = canon.pretty_bytes(document)
    verify_root_update(previous.root.data, data)
    new_root = load_root(data)
    with Transaction() as transaction:
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
    for key in keys:
        if keyid_of(key.public_key()) not in entries:
            raise UsageError(
                f"--key {_short(keyid_of(key.public_key()))} is not among the --maintainer keys; "
                "give its .pub file with --maintainer"
            )
    if threshold < 1 or threshold > len(entries):
        raise UsageError(f"--threshold {threshold} must be between 1 and the {len(entries)} maintainer(s)")
    signed = {
        "apiVersion": API_VERSION,
        "kind": "TrustRoot",
        "version": current.version + 1,
        "threshold": threshold,
        "keys": entries,
    }
    return _publish_root(registry, signed, keys)


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


def _next_signed(current: TrustRoot) -> dict[str, Any]:
    import copy

    signed: dict[str, Any] = copy.deepcopy(current.raw["signed"])
    signed["version"] = current.version + 1
    return signed


# =========================================================================== attestations


@dataclass(frozen=True, slots=True)
class Signer:
    """A key that made a valid signature, as the trust root describes it."""

    keyid: str
    owner: str
    roles: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"keyid": self.keyid, "owner": self.owner, "roles": list(self.roles)}


@dataclass(frozen=True, slots=True)
class VerifiedAttestation:
    """What a verified envelope says; built only from the bytes whose signatures verified."""

    predicate_type: str  # short: submission, rerun, review, retraction
    predicate_type_uri: str
    predicate: _Model
    predicate_json: dict[str, Any]
    statement: dict[str, Any]
    payload: bytes
    signers: tuple[Signer, ...]
    signed_at: datetime

    @property
    def keyid(self) -> str:
        return self.signers[0].keyid

    @property
    def owner(self) -> str:
        return self.signers[0].owner

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(sorted({role for signer in self.signers for role in signer.roles}, key=ROLES.index))

    def has_role(self, role: str) -> bool:
        return any(role in signer.roles for signer in self.signers)


def statement_for(record: StoredRecord, predicate_kind_name: str, predicate: Mapping[str, Any]) -> dict[str, Any]:
    """The in-toto Statement v1 about ``record`` (spec/v1/statement.md)."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": f"{record.kind}/{record.name}", "digest": {"sha256": canon.digest_hex(record.digest)}}],
        "predicateType": predicate_type_uri(predicate_kind_name),
        "predicate": dict(predicate),
    }


def _signer_of(root: TrustRoot, envelope: Envelope, index: int) -> Signer:
    signature = envelope.signatures[index]
    message = envelope.pae()
    hint = signature.keyid_hint
    order = [hint] if hint in root.keys else []
    order += [keyid for keyid in root.keys if keyid != hint]
    for keyid in order:
        assert keyid is not None
        try:
            root.public_key(keyid).verify(signature.sig, message)
        except InvalidSignature:
            continue
        # The keyid is recomputed from the key that verified, never taken from the hint.
        key = root.keys[keyid]
        return Signer(keyid=keyid, owner=key.owner, roles=key.roles)
    if hint is not None and hint in root.keys:
        raise CheckFailed(
            f"bad signature: signature {index}, claimed by key {_short(hint)} ({root.keys[hint].owner}), "
            "does not verify: the envelope was changed after signing or was signed by another key"
        )
    raise CheckFailed(
        f"unknown key: signature {index} verifies under no key of trust root version {root.version} "
        f"(keyid hint {hint or 'none'})"
    )


def _check_key_time(root: TrustRoot, signer: Signer, signed_at: datetime) -> None:
    key = root.keys[signer.keyid]
    who = f"key {_short(signer.keyid)} ({key.owner})"
    when = format_timestamp(signed_at)
    if key.revoked is not None:
        if key.revoked.reason == "compromised":
            raise CheckFailed(f"{who} was revoked as compromised on {key.revoked.at}: none of its signatures count")
        if signed_at >= _moment(key.revoked.at):
            raise CheckFailed(f"{who} was retired on {key.revoked.at}, before this attestation was signed ({when})")
    if signed_at < _moment(key.not_before):
        raise CheckFailed(f"{who} is valid from {key.not_before}, after this attestation was signed ({when})")
    if key.not_after is not None and signed_at >= _moment(key.not_after):
        raise CheckFailed(f"{who} expired on {key.not_after}, before this attestation was signed ({when})")


def _parse_statement(payload: bytes, subject: StoredRecord) -> tuple[dict[str, Any], str, str]:
    try:
        statement = canon.parse_json(payload, source="statement")
    except RecordError as exc:
        raise CheckFailed(f"statement: {exc.message.removeprefix('statement: ')}") from exc
    if not isinstance(statement, dict):
        raise CheckFailed("statement: not a JSON object")
    if statement.get("_type") != STATEMENT_TYPE:
        raise CheckFailed(f"statement: _type is {statement.get('_type')!r}, not {STATEMENT_TYPE!r}")
    uri = statement.get("predicateType")
    kind = predicate_kind(uri) if isinstance(uri, str) else None
    if kind is None:
        raise CheckFailed(f"statement: unknown predicateType {uri!r}")
    subjects = statement.get("subject")
    if not isinstance(subjects, list) or not subjects:
        raise CheckFailed("statement: subject is not a non-empty list")
    expected_hex = canon.digest_hex(subject.digest)
    named: list[str] = []
    for item in subjects:
        digest = item.get("digest") if isinstance(item, dict) else None
        sha = digest.get("sha256") if isinstance(digest, dict) else None
        if not isinstance(sha, str):
            raise CheckFailed("statement: a subject has no sha256 digest")
        named.append(sha)
        if sha == expected_hex:
            expected_name = f"{subject.kind}/{subject.name}"
            if item.get("name") != expected_name:
                raise CheckFailed(
                    f"subject: the statement names sha256:{sha} {item.get('name')!r}, not {expected_name!r}"
                )
            return statement, kind, uri  # type: ignore[return-value]
    raise CheckFailed(
        f"subject: the statement is about {', '.join('sha256:' + s for s in named)}, not this record ({subject.digest})"
    )


class AttestationRejected(CheckFailed):
    """An envelope whose signatures verified but which is rejected all the same (exit 1).

    It keeps who signed and, once known, the predicate type, so that reports can
    say "a rerun by X, rejected because ...".
    """

    def __init__(self, message: str, *, signers: Sequence[Signer], predicate_type: str | None) -> None:
        super().__init__(message)
        self.signers = tuple(signers)
        self.predicate_type = predicate_type


def _verify_core(envelope: bytes, subject: StoredRecord, root: TrustRoot, signed_at: datetime) -> VerifiedAttestation:
    parsed = parse_envelope(envelope)
    # DSSE protocol, "To verify": signatures first, then the payload type, then parse the body.
    signers = [_signer_of(root, parsed, index) for index in range(len(parsed.signatures))]
    unique = tuple({signer.keyid: signer for signer in signers}.values())
    try:
        return _verify_signed(parsed, subject, root, signed_at, unique)
    except AttestationRejected:
        raise
    except CheckFailed as exc:  # before the predicate type is known
        raise AttestationRejected(exc.message, signers=unique, predicate_type=None) from exc


def _verify_signed(
    parsed: Envelope, subject: StoredRecord, root: TrustRoot, signed_at: datetime, signers: tuple[Signer, ...]
) -> VerifiedAttestation:
    if parsed.payload_type != PAYLOAD_TYPE:
        raise CheckFailed(f"wrong payloadType {parsed.payload_type!r}; attestations are {PAYLOAD_TYPE!r}")
    statement, kind, uri = _parse_statement(parsed.payload, subject)
    try:
        for signer in signers:
            _check_key_time(root, signer, signed_at)
        raw_predicate = statement.get("predicate", {})
        if not isinstance(raw_predicate, dict):
            raise CheckFailed("statement: predicate is not an object")
        try:
            model = _validate_json_model(PREDICATE_MODELS[kind], raw_predicate, f"{kind} predicate")
        except RecordError as exc:
            raise CheckFailed(f"statement: {exc.message}") from exc
    except CheckFailed as exc:
        raise AttestationRejected(exc.message, signers=signers, predicate_type=kind) from exc
    return VerifiedAttestation(
        predicate_type=kind,
        predicate_type_uri=uri,
        predicate=model,
        predicate_json=raw_predicate,
        statement=statement,
        payload=parsed.payload,
        signers=signers,
        signed_at=signed_at,
    )


def _check_role(attestation: VerifiedAttestation, submitters: Collection[str]) -> None:
    """DESIGN §5 and issue 3: submission needs submitter; retraction needs maintainer or the
    record's own submitter; reruns and reviews may come from any listed key."""
    kind = attestation.predicate_type
    who = ", ".join(f"{s.owner} ({_short(s.keyid)}: {', '.join(s.roles)})" for s in attestation.signers)
    if kind == "submission" and not attestation.has_role("submitter"):
        raise CheckFailed(f"role: a submission needs a submitter key; signed by {who}")
    if kind == "retraction" and not (
        attestation.has_role("maintainer") or any(s.keyid in submitters for s in attestation.signers)
    ):
        raise CheckFailed(f"role: a retraction needs a maintainer or the record's submitter; signed by {who}")


def verify_attestation(
    envelope: bytes,
    *,
    subject: StoredRecord,
    root: TrustRoot,
    signed_at: datetime,
    submitters: Collection[str] = (),
) -> VerifiedAttestation:
    """Verify one DSSE envelope about ``subject`` as of ``signed_at``.

    ``submitters`` are the keyids of the record's valid submissions (a
    retraction by one of them is allowed).  Raises ``CheckFailed`` naming the
    defect: a corrupted envelope, a bad signature, an unknown key, a wrong
    payloadType, a malformed statement, a subject digest of another record, a
    key not valid or revoked at ``signed_at``, a compromised key, or a role not
    allowed for the predicate type.
    """
    attestation = _verify_core(envelope, subject, root, signed_at)
    _check_role(attestation, submitters)
    return attestation


def envelope_name(envelope: Mapping[str, Any]) -> str:
    """``<sha256 of the envelope's JCS bytes>.dsse.json`` (what ``validate.check_envelope_file`` expects)."""
    return layout.envelope_file_name(canon.sha256_hex(canon.canonical_bytes(envelope)))


def attestation_envelope(
    record: StoredRecord,
    key: Ed25519PrivateKey,
    *,
    predicate_type: str = "submission",
    predicate: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A signed envelope about ``record`` (not written anywhere); raises ``RecordError``/``UsageError``."""
    kind = predicate_kind(predicate_type) or predicate_type
    model = predicate_model(kind, predicate)
    body = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    payload = canon.canonical_bytes(statement_for(record, kind, body))
    return sign_envelope(PAYLOAD_TYPE, payload, [key])


def sign_record(
    registry: Registry,
    digest: str,
    key_path: Path,
    *,
    predicate_type: str = "submission",
    predicate: dict[str, Any] | None = None,
    transaction: Transaction | None = None,
) -> Path:
    """Sign an attestation about the record ``digest`` and publish it; return the envelope's path.

    The file is written atomically and never overwritten; signing the same
    statement twice with the same key yields the same file (Ed25519 is
    deterministic).  With ``transaction`` the write joins it (and is undone
    with it).  Raises ``NotFoundError`` for an unknown record,
    ``RecordError`` for a record whose bytes no longer match its digest or a
    bad predicate, ``EnvError`` for an unusable key, ``RegistryError`` on I/O errors.
    """
    key = load_private_key(key_path)
    record = registry.load(digest)
    if record.digest != digest:
        raise RecordError(f"the file of record {digest} holds bytes that hash to {record.digest}; refusing to sign")
    envelope = attestation_envelope(record, key, predicate_type=predicate_type, predicate=predicate)
    path = registry.attestation_folder(digest) / envelope_name(envelope)
    if transaction is not None:
        transaction.write(path, canon.pretty_bytes(envelope))
        return path
    with Transaction() as own:
        own.write(path, canon.pretty_bytes(envelope))
    return path


def signing_warnings(registry: Registry, key_path: Path, predicate_type: str) -> list[str]:
    """Why an attestation signed now with ``key_path`` would not count, if it would not (advice only)."""
    try:
        root = registry_root(registry)
    except KictlError as exc:
        return [f"the trust root does not verify: {exc.message}"]
    keyid = keyid_of(load_private_key(key_path).public_key())
    if keyid not in root.keys:
        return [f"key {_short(keyid)} is not in the trust root; the attestation will not verify until it is added"]
    key = root.keys[keyid]
    signer = Signer(keyid=keyid, owner=key.owner, roles=key.roles)
    warnings = []
    try:
        _check_key_time(root, signer, _floor_second(_now()))
    except CheckFailed as exc:
        warnings.append(exc.message)
    kind = predicate_kind(predicate_type) or predicate_type
    if kind == "submission" and "submitter" not in key.roles:
        warnings.append(f"key {_short(keyid)} ({key.owner}) lacks the submitter role a submission needs")
    if kind == "rerun" and "verifier" not in key.roles:
        warnings.append(f"key {_short(keyid)} ({key.owner}) is no verifier: this rerun counts as a community rerun")
    return warnings


# =========================================================================== judging a record


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

    level: Level = "reported"
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


def _rerun_agrees(predicate: RerunPredicate, tolerance: float) -> bool:
    return predicate.verdict == "agrees" and predicate.ratio is not None and abs(predicate.ratio - 1.0) <= tolerance


def judge_attestations(
    subject: StoredRecord,
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
    submitters: set[str] = set()
    for _, _, _, att, _ in cores:
        if att is not None and att.predicate_type == "submission" and att.has_role("submitter"):
            submitters.update(signer.keyid for signer in att.signers if "submitter" in signer.roles)
    results: list[AttestationResult] = []
    agree = disagree = community = reviews = 0
    retracted = submitted = False
    for path, signed_at, committed, att, failure in cores:
        counts_for = None
        if att is not None and failure is None:
            try:
                _check_role(att, submitters)
            except CheckFailed as exc:
                failure = exc.message
        if att is not None and failure is None:
            kind = att.predicate_type
            if kind == "rerun" and att.has_role("verifier"):
                assert isinstance(att.predicate, RerunPredicate)
                counts_for = "evidence"
                if _rerun_agrees(att.predicate, rerun_tolerance):
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
    level: Level = "disputed" if disagree else "verified" if agree else "reported"
    trust = RecordTrust(
        level=level, retracted=retracted, submitted=submitted, community_reruns=community, reviews=reviews
    )
    return results, trust


def _signing_times(registry: Registry) -> dict[str, datetime]:
    """Path (relative) → author time of the commit that first added it, for every committed envelope."""
    if not registry.is_git_repository():
        return {}
    history = registry.git
    return {
        path: datetime.fromtimestamp(info.timestamp, UTC)
        for path, info in history.first_added(ATTESTATIONS_DIR).items()
    }


def _envelope_files(registry: Registry, digest: str) -> list[Path]:
    folder = registry.attestation_folder(digest)
    if not folder.is_dir():
        return []
    return sorted(path for path in folder.iterdir() if path.is_file())


def _read_envelopes(
    registry: Registry, paths: Sequence[Path], times: Mapping[str, datetime], now: datetime
) -> list[tuple[str, bytes, datetime, bool]]:
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
            "records": [{"digest": d, "kind": k} for d, k in self.records],
            "blobs": self.blobs,
            "attestations": [result.to_json() for result in self.attestations],
            "failures": self.failures,
            "notes": self.notes,
        }


def _check_records(registry: Registry, digest: str, report: VerifyReport) -> StoredRecord | None:
    """Recompute the digest of ``digest``'s file and, transitively, of every record it references."""
    from kictl.validate import check_record_file

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


def check_record(registry: Registry, digest: str) -> VerifyReport:
    """What ``kictl verify DIGEST`` does; every failure is listed in the report.

    Recomputes the digest of the record and of every record (and blob) it
    references, verifies the trust-root chain and every envelope about the
    record (signing time: the author time of the commit that first added the
    envelope file, or now when it is uncommitted), and computes the evidence
    level.  Raises ``RecordError`` for a malformed digest and ``NotFoundError``
    when no record file has this digest as its name.
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
        root = registry_root(registry)
        report.root_version = root.version
    except CheckFailed as exc:
        report.failures.append(f"trust root: {exc.message}")
        root = None
    from kictl.validate import check_envelope_file

    now = _now()
    paths = _envelope_files(registry, digest)
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
    envelopes = _read_envelopes(registry, paths, _signing_times(registry), now)
    results, trust = judge_attestations(subject, root, envelopes, rerun_tolerance=registry.policy().rerun_tolerance)
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


# =========================================================================== many records at once


def resolve_digest(registry: Registry, reference: str) -> str:
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
            files = sorted(Path(entry.path) for entry in os.scandir(folder.path) if entry.is_file())
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


def trust_summaries(registry: Registry, digests: Iterable[str] | None = None) -> dict[str, RecordTrust]:
    """The standing of each record in ``digests`` (every record when ``None``).

    Only records with an attestation folder can be other than plain
    ``reported``: the attestations are scanned once, the git history read
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
    tolerance = registry.policy().rerun_tolerance
    times = _signing_times(registry)
    now = _now()
    for digest, paths in attested.items():
        try:
            subject = registry.load(digest)
        except KictlError:
            continue
        envelopes = _read_envelopes(registry, paths, times, now)
        _, summary = judge_attestations(subject, root, envelopes, rerun_tolerance=tolerance)
        summaries[digest] = summary
    return summaries


def evidence_levels(registry: Registry, digests: Iterable[str] | None = None) -> dict[str, str]:
    """``{digest: "reported" | "verified" | "disputed"}`` for ``digests`` (every record when ``None``).

    Raises ``CheckFailed`` when the trust root chain does not verify.
    """
    return {digest: summary.level for digest, summary in trust_summaries(registry, digests).items()}


def retracted_digests(registry: Registry, digests: Iterable[str] | None = None) -> set[str]:
    """The records (among ``digests``, or all) with a valid retraction; a leaderboard drops these.

    Raises ``CheckFailed`` when the trust root chain does not verify.
    """
    return {digest for digest, summary in trust_summaries(registry, digests).items() if summary.retracted}
