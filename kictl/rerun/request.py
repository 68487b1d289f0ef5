"""A rerun request: what binds a GPU machine's results to the job the signer asked for (DESIGN §10, issue 29).

The machine that runs submitted code is not trusted, so the signer does not
take its word for what ran.  Before the GPU job starts, the signing side
(``kictl attest request``, with the verifier's private key) writes a
``RerunRequest``:

* ``nonce``: 128 fresh random bits;
* ``issuedAt`` and ``notAfter``: the job's window, by the signer's clock;
* ``keyid``: the key that made the request (and that alone can sign its results);
* ``runs``: the original BenchmarkRuns asked for, as full digests.

From that body and the private key the signer derives, with HMAC-SHA256 under
a key hashed from the private key's raw bytes (domain-separated, so it is
neither the key nor a signature), two values the GPU job is handed with the
request and must use: the bench session's ``inputSecret`` (it seeds every
input value of the correctness rounds and the timed calls, and is recorded in
the rerun's BenchmarkRun) and the ``seedSalt`` of the rounds' index
structures.  Whoever lacks the private key cannot compute them for any body,
so a results folder written without the request, with another request's body,
the original's secret, a zero salt or an edited window does not check out.
The secret from which the values are derived (the HMAC key) never leaves the
signing side; at signing time ``expected_secrets`` recomputes the values from
the body the results carry.  The request is not secret after the job: its
values are published in the rerun's record, as every bench secret is.

``check_binding`` applies every rule that does not need the registry:
the request's key, the runs asked for, the salt, the input secret and the
times.  ``kictl.rerun.attest`` adds those that do (a nonce signed before, a
secret some published run already used).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Literal

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import StringConstraints, ValidationError

from kictl import canon
from kictl.errors import CheckFailed, RecordError, RegistryError, UsageError
from kictl.records import Digest, Timestamp, WireModel, format_timestamp, parse_timestamp
from kictl.store.files import write_atomic

REQUEST_FILE = "request.json"
REQUEST_KIND = "RerunRequest"
#: how long a request stays open by default: the GPU job's timeout (3 h) and a queue before it
DEFAULT_WINDOW = timedelta(hours=6)
#: clock difference allowed between the GPU machine and the signer
CLOCK_SKEW = timedelta(minutes=5)
ZERO_SALT = "0" * 32

Hex32 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]
Hex64 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class RequestBody(WireModel):
    """What the signer asked for; every member is covered by the values derived from it."""

    api_version: Literal["kernelindex.dev/v1alpha1"] = "kernelindex.dev/v1alpha1"
    kind: Literal["RerunRequest"] = "RerunRequest"
    nonce: Hex32
    issued_at: Timestamp
    not_after: Timestamp
    keyid: Hex64
    runs: tuple[Digest, ...]


class RerunRequest(WireModel):
    """``request.json``: the body and the values the GPU job must use (recomputed by the signer, never read)."""

    body: RequestBody
    input_secret: Hex32 | None = None
    seed_salt: Hex32 | None = None
    #: issue 32: the secret the held-out shapes are drawn from, so that whoever runs the job cannot choose them
    held_out_secret: Hex32 | None = None


def _derivation_key(private_key: Ed25519PrivateKey) -> bytes:
    raw = private_key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return hashlib.sha256(b"kictl rerun request v1\x00" + raw).digest()


def body_bytes(body: RequestBody) -> bytes:
    """The JCS bytes of the body: what the derived values are bound to."""
    return canon.canonical_bytes(body.model_dump(mode="json", by_alias=True))


def expected_secrets(body: RequestBody, private_key: Ed25519PrivateKey) -> tuple[str, str]:
    """``(inputSecret, seedSalt)`` for ``body``: HMAC-SHA256 under the key's derivation key, 128 bits each."""
    key = _derivation_key(private_key)
    message = body_bytes(body)
    values = []
    for label in (b"input-secret", b"seed-salt"):
        values.append(hmac.new(key, label + b"\x00" + message, hashlib.sha256).hexdigest()[:32])
    return values[0], values[1]


def expected_held_out_secret(body: RequestBody, private_key: Ed25519PrivateKey) -> str:
    """The held-out shapes' secret for ``body`` (issue 32): HMAC-SHA256 as ``expected_secrets``, its own label.

    Drawn from the request, the shapes are fixed before the GPU job starts: the job cannot draw again and
    again until the shapes suit the kernel, because any other secret does not check out at signing.
    """
    key = _derivation_key(private_key)
    return hmac.new(key, b"held-out-secret\x00" + body_bytes(body), hashlib.sha256).hexdigest()[:32]


def make_request(
    runs: Sequence[str],
    private_key: Ed25519PrivateKey,
    keyid: str,
    *,
    window: timedelta = DEFAULT_WINDOW,
    now: datetime | None = None,
) -> RerunRequest:
    """A new request for ``runs`` (full digests) by the key ``private_key`` (whose keyid is ``keyid``)."""
    if not runs:
        raise UsageError("a rerun request names at least one run")
    if window <= timedelta(0):
        raise UsageError("a rerun request's window must be positive")
    moment = (now or datetime.now(UTC)).replace(microsecond=0)
    body = RequestBody(
        nonce=secrets.token_hex(16),
        issued_at=format_timestamp(moment),
        not_after=format_timestamp(moment + window),
        keyid=keyid,
        runs=tuple(dict.fromkeys(runs)),
    )
    input_secret, seed_salt = expected_secrets(body, private_key)
    held_out = expected_held_out_secret(body, private_key)
    return RerunRequest(body=body, input_secret=input_secret, seed_salt=seed_salt, held_out_secret=held_out)


def write_request(path: Path, request: RerunRequest) -> None:
    """Write ``request`` (normal form, atomically); raises ``RegistryError``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RegistryError(f"cannot create {path.parent}: {exc.strerror}") from exc
    write_atomic(path, canon.pretty_bytes(request.model_dump(mode="json", by_alias=True, exclude_none=True)))


def read_request(path: Path) -> RerunRequest:
    """The request at ``path``; raises ``UsageError`` when absent, ``RecordError`` when malformed."""
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise UsageError(
            f"{path}: no rerun request; the signing side makes one first (`kictl attest request RUN... --key K`)"
        ) from exc
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read: {exc.strerror}") from exc
    value = canon.parse_json(data, source=str(path))
    try:
        return RerunRequest.model_validate_json(json.dumps(value, allow_nan=False))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise RecordError(f"{path}: {canon.format_path(tuple(first['loc']))}: {first['msg']}") from exc


def check_request(body: RequestBody, keyid: str, *, now: datetime) -> None:
    """The request itself: made by this key, a window that opened in the past.  Raises ``CheckFailed``.

    The body's members are authenticated by the values derived from them (``check_binding``).
    """
    if body.keyid != keyid:
        raise CheckFailed(f"the rerun request was made by key {body.keyid[:12]}, not by the signing key {keyid[:12]}")
    issued, closes = parse_timestamp(body.issued_at), parse_timestamp(body.not_after)
    if issued > now + CLOCK_SKEW:
        raise CheckFailed(f"the rerun request is dated {body.issued_at}, in the future")
    if closes <= issued:
        raise CheckFailed(f"the rerun request's window closes ({body.not_after}) before it opens ({body.issued_at})")


def check_time(what: str, stamp: str, body: RequestBody, *, now: datetime) -> None:
    """``stamp`` lies in the request's window and not in the future; raises ``CheckFailed``."""
    moment = parse_timestamp(stamp)
    if moment > now + CLOCK_SKEW:
        raise CheckFailed(f"{what} {stamp} is in the future (the signer's clock says {format_timestamp(now)})")
    issued, closes = parse_timestamp(body.issued_at), parse_timestamp(body.not_after)
    if moment < issued - CLOCK_SKEW or moment > closes + CLOCK_SKEW:
        raise CheckFailed(f"{what} {stamp} is outside the job's window ({body.issued_at} to {body.not_after})")


def check_binding(
    body: RequestBody,
    private_key: Ed25519PrivateKey,
    *,
    original: str,
    original_secret: str | None,
    rerun_secret: str | None,
    seed_salt: str | None,
) -> None:
    """One result is bound to ``body``: asked for, with the salt and input secret derived for it.

    Raises ``CheckFailed`` naming the first rule broken: a run not asked for, a
    missing or zero salt, the original's input secret reused, a salt or secret
    this request did not give.
    """
    if original not in body.runs:
        raise CheckFailed(f"the rerun request (nonce {body.nonce}) did not ask for {original}")
    expected_secret, expected_salt = expected_secrets(body, private_key)
    if seed_salt is None:
        raise CheckFailed("it states no seed salt: its correctness rounds' seeds cannot be rechecked")
    if seed_salt == ZERO_SALT or not seed_salt.strip("0"):
        raise CheckFailed("its seed salt is zero")
    if rerun_secret is None:
        raise CheckFailed("the rerun's BenchmarkRun states no inputSecret: its inputs cannot be rechecked")
    if original_secret is not None and rerun_secret == original_secret:
        raise CheckFailed("the rerun reuses the original run's inputSecret: it is no fresh rerun")
    if not hmac.compare_digest(seed_salt, expected_salt):
        raise CheckFailed(f"its seed salt is not the one the rerun request (nonce {body.nonce}) gave")
    if not hmac.compare_digest(rerun_secret, expected_secret):
        raise CheckFailed(
            f"the rerun's inputSecret is not the one the rerun request (nonce {body.nonce}) gave: "
            "its inputs were not drawn for this job"
        )
