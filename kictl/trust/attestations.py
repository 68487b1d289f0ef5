"""Attestations about records: making, signing, storing and verifying DSSE envelopes against the trust
root.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kictl import canon, layout
from kictl.errors import CheckFailed, KictlError, RecordError
from kictl.lookup import Named
from kictl.records import StoredRecord, format_timestamp
from kictl.store.files import Transaction, is_temporary_name, sweep_temporaries
from kictl.store.registry import Registry
from kictl.trust._common import PAYLOAD_TYPE, ROLES, STATEMENT_TYPE, _moment, _short, predicate_kind, predicate_type_uri
from kictl.trust.dsse import Envelope, parse_envelope, sign_envelope
from kictl.trust.keys import keyid_of, load_private_key
from kictl.trust.models import PREDICATE_MODELS, _Model, _validate_json_model, predicate_model
from kictl.trust.root import TrustRoot, _floor_second, _now, registry_root


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


def _parse_statement(payload: bytes, subject: Named) -> tuple[dict[str, Any], str, str]:
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


def _verify_core(envelope: bytes, subject: Named, root: TrustRoot, signed_at: datetime) -> VerifiedAttestation:
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
    parsed: Envelope, subject: Named, root: TrustRoot, signed_at: datetime, signers: tuple[Signer, ...]
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


def may_retract(signers: Sequence[Signer], owners: Collection[str]) -> bool:
    """Who may retract a record, the one rule review and every reader apply (docs/trust.md "Who may retract").

    A ``maintainer`` key, or the record's original submitter: **every** key of ``owners`` (the submitter
    keys of its earliest valid submission, ``evidence.record_owners``) among the signers.  So a key that
    merely co-signed a submission of someone else's record, in the same envelope or the same commit,
    cannot retract it alone, and a submitter who vouched for the record later never can.
    """
    if any("maintainer" in signer.roles for signer in signers):
        return True
    keys = {signer.keyid for signer in signers}
    return bool(owners) and set(owners) <= keys


def _check_role(attestation: VerifiedAttestation, submitters: Collection[str]) -> None:
    """docs/trust.md and issue 3: submission needs submitter; retraction needs maintainer or the
    record's original submitter (``may_retract``); reruns and reviews may come from any listed key."""
    kind = attestation.predicate_type
    who = ", ".join(f"{s.owner} ({_short(s.keyid)}: {', '.join(s.roles)})" for s in attestation.signers)
    if kind == "submission" and not attestation.has_role("submitter"):
        raise CheckFailed(f"role: a submission needs a submitter key; signed by {who}")
    if kind == "retraction" and not may_retract(attestation.signers, submitters):
        owners = ", ".join(_short(keyid) for keyid in sorted(submitters)) or "none valid"
        raise CheckFailed(
            f"role: a retraction needs a maintainer or the record's submitter (every key of its earliest "
            f"valid submission: {owners}); signed by {who}"
        )


def verify_attestation(
    envelope: bytes,
    *,
    subject: StoredRecord,
    root: TrustRoot,
    signed_at: datetime,
    submitters: Collection[str] = (),
) -> VerifiedAttestation:
    """Verify one DSSE envelope about ``subject`` as of ``signed_at``.

    ``submitters`` are the record's owners (``evidence.record_owners``: the
    keys of its earliest valid submission); a retraction signed by all of
    them, or by a maintainer, is allowed (``may_retract``).  Raises ``CheckFailed`` naming the
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
    # One file, written whole to a temporary file and linked into place: a killed `sign` leaves either no
    # envelope or the whole one, and at most a temporary file that no reader counts (``is_temporary_name``);
    # the next writer removes it once it is a minute old.
    with registry.writing(), Transaction() as own:
        folder = path.parent
        if folder.is_dir():
            sweep_temporaries([entry for entry in folder.iterdir() if is_temporary_name(entry.name)])
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
