"""``kictl trust reanchor``: a new trust-root version signed by new maintainers only (docs/trust.md "Re-anchoring").

Apart from ``kictl.trust.anchor`` (which pins and finds anchors) and ``kictl.trust.root`` (which verifies chains
from an anchor), because it needs both: ``root`` finds its anchor through ``anchor``, and a re-anchor writes a
root version and then pins it, so it sits above the two and neither imports it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kictl import canon
from kictl.errors import RegistryError, UsageError
from kictl.layout import ROOT_FILE
from kictl.records import format_timestamp
from kictl.store.files import Transaction, write_atomic
from kictl.store.registry import Registry
from kictl.trust._common import REVOCATION_REASONS, ROOT_PAYLOAD_TYPE
from kictl.trust.anchor import STATE_FILE, _state, _write_state
from kictl.trust.dsse import sign_envelope
from kictl.trust.keys import keyid_of
from kictl.trust.root import (
    _floor_second,
    _key_entry,
    _now,
    _read,
    check_signers,
    load_root,
    root_chain,
    root_version_path,
    verify_anchor,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

    from kictl.trust.root import TrustRoot


def reanchor(
    registry: Registry,
    *,
    maintainers: Sequence[tuple[Ed25519PublicKey, str]],
    keys: Sequence[Ed25519PrivateKey],
    threshold: int = 1,
    reason: str = "retired",
    at: datetime | None = None,
    others: Sequence[tuple[Ed25519PublicKey, str, Sequence[str]]] = (),
    retire: Sequence[str] = (),
    sign_policy: bool = False,
) -> TrustRoot:
    """Write the next trust-root version signed by new maintainers only: a re-anchor (docs/trust.md).

    For a registry whose maintainer keys are lost (``reason="retired"``) or
    stolen (``"compromised"``), so that no ordinary rotation can be signed.  The
    new version keeps every key of the current one, revokes each of its active
    maintainer keys at ``at`` (default now, whole seconds) for ``reason``, and
    adds ``maintainers`` (public key, owner) with ``threshold``; every signing
    key in ``keys`` must be among them, and together they must reach it.  It
    cannot carry the old maintainers' signatures, so it does not link to the
    chain: only a pin of its digest makes it count (this machine's, written
    here and replacing this registry's earlier local anchors; a user's
    ``kictl trust pin``; the package's ``PACKAGE_ANCHORS``).  ``kictl review``
    lints it ``trust-root-threshold``, as it should: a re-anchor is merged by a
    maintainer, out of band.

    Whatever else went with the lost maintainer keys goes in the same version,
    so that the version readers pin is complete: ``others`` adds keys that are
    not maintainers (public key, owner, roles: a new verifier or submitter),
    ``retire`` revokes further listed keys for ``reason`` (by keyid or a unique
    prefix of 12+ hex digits: a verifier or submitter whose private half was
    kept with the maintainers'), and ``sign_policy`` names the sha256 of
    ``registry/policy.json`` (``policyDigest``), as ``kictl trust
    sign-policy`` would in a version of its own.

    Raises ``UsageError`` when the root has no keys yet, a new maintainer is
    already listed, a signing key is not a new maintainer, the threshold or
    reason is invalid; ``CheckFailed`` when the current chain does not verify
    or the signatures miss the threshold; ``RegistryError`` when a file cannot
    be written.
    """

    if reason not in REVOCATION_REASONS:
        raise UsageError(f"--reason is one of {', '.join(REVOCATION_REASONS)}, not {reason!r}")
    current = root_chain(registry).root
    if current.empty:
        raise UsageError("the trust root has no keys yet: there is nothing to re-anchor; use `kictl trust init`")
    if not maintainers:
        raise UsageError("a re-anchor names its new maintainers: give their public keys")
    moment = at or _floor_second(_now())
    signed: dict[str, Any] = copy.deepcopy(current.raw["signed"])
    signed["version"] = current.version + 1
    for keyid in current.maintainers():
        signed["keys"][keyid]["revoked"] = {"at": format_timestamp(moment), "reason": reason}
    new_ids: set[str] = set()
    for public_key, owner in maintainers:
        keyid = keyid_of(public_key)
        if keyid in current.keys:
            raise UsageError(
                f"key {keyid[:12]} is already in trust root version {current.version} ({current.keys[keyid].owner}); "
                "a key the registry already lists can sign an ordinary rotation (`kictl trust add-key`)"
            )
        signed["keys"][keyid] = _key_entry(
            public_key, owner=owner, roles=["maintainer"], not_before=moment, not_after=None
        )
        new_ids.add(keyid)
    for public_key, owner, roles in others:
        keyid = keyid_of(public_key)
        if keyid in signed["keys"]:
            raise UsageError(f"key {keyid[:12]} is listed twice (already in the root or named twice)")
        if "maintainer" in roles:
            raise UsageError(f"key {keyid[:12]}: a re-anchor's maintainers are given with --maintainer")
        signed["keys"][keyid] = _key_entry(public_key, owner=owner, roles=roles, not_before=moment, not_after=None)
    for prefix in retire:
        matches = [
            keyid
            for keyid in current.keys
            if keyid.startswith(prefix.lower()) and "revoked" not in signed["keys"][keyid]
        ]
        if len(prefix) < 12 or len(matches) != 1:
            raise UsageError(
                f"--retire {prefix}: give the keyid (12+ hex digits) of exactly one key of trust root version "
                f"{current.version} that is not revoked yet (`kictl trust show`)"
            )
        signed["keys"][matches[0]]["revoked"] = {"at": format_timestamp(moment), "reason": reason}
    if sign_policy:
        signed["policyDigest"] = canon.bytes_digest(_read(registry.policy_path, registry))
    check_signers(
        keys,
        set(new_ids),
        threshold,
        "is not among the new maintainers; a re-anchor is signed by its new maintainers only",
        who="new maintainer(s)",
    )
    signed["threshold"] = threshold
    envelope = sign_envelope(ROOT_PAYLOAD_TYPE, canon.canonical_bytes(signed), keys)
    unique = {entry["keyid"]: entry for entry in envelope["signatures"]}
    data = canon.pretty_bytes({"signed": signed, "signatures": list(unique.values())})
    new_root = load_root(data)
    verify_anchor(new_root)
    try:
        with Transaction() as transaction:
            transaction.write(root_version_path(registry, new_root.version), data)
            write_atomic(registry.root / ROOT_FILE, data)
    except OSError as exc:
        raise RegistryError(f"{registry.trust_dir}: cannot write trust root version {new_root.version}: {exc}") from exc
    state = _state(registry)
    state["anchors"] = [canon.DIGEST_PREFIX + canon.sha256_hex(data)]
    try:
        _write_state(registry, state)
    except OSError as exc:
        raise RegistryError(f"{registry.root / STATE_FILE}: cannot write: {exc}") from exc
    return new_root
