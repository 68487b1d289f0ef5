"""Constants shared by the modules of ``kictl.trust``."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, TypeAlias

from kictl.errors import UsageError
from kictl.records import parse_timestamp

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_PREFIX = "https://kernelindex.dev/attestation/"
ROOT_PAYLOAD_TYPE = "application/vnd.kernelindex.trust-root+json"
PREDICATE_TYPES = ("submission", "rerun", "review", "retraction")
ROLES = ("maintainer", "submitter", "verifier")
#: Evidence levels (docs/trust.md "Evidence"): ``unsigned`` has no valid submission signature, ``reported`` has one.
LEVELS = ("unsigned", "reported", "verified", "disputed")
REVOCATION_REASONS = ("retired", "compromised")
PASSPHRASE_ENV = "KICTL_KEY_PASSPHRASE"

Role: TypeAlias = Literal["maintainer", "submitter", "verifier"]
Level: TypeAlias = Literal["unsigned", "reported", "verified", "disputed"]


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


def short_keyid(keyid: str) -> str:
    """The first 12 hex digits of a keyid, as every message names a key."""
    return keyid[:12]


_short = short_keyid


def _moment(text: str) -> datetime:
    return parse_timestamp(text)
