"""The wire models of the trust documents: the trust root's keys and revocations, in-toto Statements
and predicates.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, ValidationError, model_validator

from kictl import canon
from kictl.errors import RecordError
from kictl.records import Timestamp, WireModel
from kictl.trust._common import Role, _moment, predicate_type_uri

_Model = WireModel


Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
HexKey = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
Text = Annotated[str, StringConstraints(min_length=1, max_length=4096)]
Owner = Annotated[str, StringConstraints(pattern=r"^[^\x00-\x1f]+$", min_length=1, max_length=256)]


class SubmissionPredicate(_Model):
    """``submission``: I ran this and vouch for it."""

    note: Text | None = None


class HeldOutCheck(WireModel):
    """A rerun's correctness check on held-out shapes (issue 32; drawn and judged by ``kictl.rerun.heldout``)."""

    verdict: Literal["generalizes", "fails on held-out shapes", "skipped"]
    shapes: tuple[dict[str, Annotated[int, Field(ge=0)]], ...] = ()  # every axis of each drawn shape
    failed: tuple[dict[str, Any], ...] = ()  # {"axes": shape, "status": run status} per failed shape
    secret: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")] | None = None  # what drew them
    cap: Annotated[int, Field(ge=0)] | None = None  # at most this value per drawn axis (a CPU rerun)
    note: Text | None = None


class RerunPredicate(_Model):
    """``rerun``: I reran the record; my own BenchmarkRun, the latency ratio (mine over
    the record's primary statistic) and my verdict."""

    run_digest: Digest
    ratio: Annotated[float, Field(gt=0.0)] | None = None
    verdict: Literal["agrees", "disagrees", "failed"]
    tolerance: Annotated[float, Field(gt=0.0)] | None = None  # the + the verifier judged with (policy)
    #: the nonce of the rerun request the rerun was made for (kictl.rerun.request): signed once
    nonce: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")] | None = None
    note: Text | None = None
    held_out: HeldOutCheck | None = None  # issue 32: correctness on held-out shapes (kictl.rerun.heldout)

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
    #: sha256 of the bytes of ``registry/policy.json`` the maintainers signed (docs/trust.md "The policy").
    policy_digest: Digest | None = None


class RootSignature(_Model):
    keyid: str
    sig: str


class RootDocument(_Model):
    signed: RootSigned
    signatures: tuple[RootSignature, ...]
