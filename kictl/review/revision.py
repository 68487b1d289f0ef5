"""Reading a git revision of the registry: files by path, the record a path names, a claimed predicate
type, the policy.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable

from pydantic import ValidationError

from kictl import canon, layout
from kictl.errors import RecordError
from kictl.policy import Policy
from kictl.review._common import _CONTROL, PREDICATE_PREFIX, PREDICATE_SUFFIX
from kictl.store.git import GitHistory


def read_paths(history: GitHistory, rev: str, paths: Iterable[str]) -> dict[str, bytes]:
    """The bytes of the files among ``paths`` at ``rev`` (one ``git cat-file --batch``); absent ones left out.

    Paths with control characters are never asked for: one request is one line.
    """
    wanted = sorted({path for path in paths if path and not _CONTROL.search(path)})
    found = history.read_paths(rev, wanted)
    return {path: data for path, data in found.items() if data is not None}


def record_path_digest(path: str) -> tuple[str, str] | None:
    """``(kind, digest)`` named by a path on the ``registry/records/<kind>/<xx>/<hex>.json`` layout."""
    return layout.parse_record_path(path)


def claimed_predicate_type(envelope: bytes) -> str | None:
    """The predicate type a DSSE envelope *claims*, its signatures unverified (``rerun``, ``submission``, ...).

    Reads ``payload`` (standard base64) as an in-toto Statement and its
    ``predicateType``; ``None`` for anything else.  Used only where the trust
    seam is absent, and reported as unverified.
    """
    try:
        value = canon.parse_json(envelope)
        payload = base64.b64decode(value["payload"], validate=True)
        uri = canon.parse_json(payload)["predicateType"]
    except (RecordError, KeyError, TypeError, ValueError, binascii.Error):
        return None
    if isinstance(uri, str) and uri.startswith(PREDICATE_PREFIX) and uri.endswith(PREDICATE_SUFFIX):
        return uri[len(PREDICATE_PREFIX) : -len(PREDICATE_SUFFIX)] or None
    return None


def _policy_from_bytes(data: bytes, source: str) -> Policy:
    """``registry/policy.json`` from its bytes; raises ``RecordError``."""
    canon.parse_json(data, source=source)
    try:
        return Policy.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise RecordError(first["msg"], path=source, pointer=canon.format_path(tuple(first["loc"]))) from exc
