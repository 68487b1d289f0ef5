"""DSSE envelopes (DSSE envelope.md): parsing, the pre-authentication encoding (DSSE protocol.md,
"PAE") and signing.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kictl import canon
from kictl.errors import CheckFailed, RecordError
from kictl.trust.keys import keyid_of


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
