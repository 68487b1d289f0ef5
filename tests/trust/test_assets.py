"""Negative fixtures under tests/assets/trust/, each named after its defect."""

from __future__ import annotations

import pytest

from kictl import trust
from kictl.errors import CheckFailed, RecordError
from tests.conftest import ASSETS

TRUST_ASSETS = ASSETS / "trust"

ENVELOPES = {
    "envelope_truncated.dsse.json": r"corrupted envelope: \$\.signatures\[0\]\.sig: unterminated string \(line 7",
    "envelope_duplicate_member.dsse.json": 'corrupted envelope: \\$: duplicate key "payload"',
    "envelope_payload_not_base64.dsse.json": "corrupted envelope: payload is not base64",
    "envelope_mixed_base64_alphabets.dsse.json": "corrupted envelope: payload mixes two base64 alphabets",
    "envelope_no_signatures.dsse.json": "corrupted envelope: signatures is not a non-empty list",
    "envelope_signature_without_sig.dsse.json": "corrupted envelope: signature 0 has no sig",
}

ROOTS = {
    "root_keyid_mismatch.json": "the keyid is not the SHA-256 of the public key",
    "root_threshold_above_maintainers.json": r"\$\.signed\.threshold: 2 exceeds the 1 active maintainer",
    "root_unknown_member.json": r"\$\.signed\.expires: unknown member",
    "root_not_ed25519.json": r"scheme: Input should be 'ed25519'",
    "root_duplicate_member.json": 'duplicate key "threshold"',
}


def test_every_asset_is_covered() -> None:
    assert sorted(path.name for path in TRUST_ASSETS.iterdir()) == sorted([*ENVELOPES, *ROOTS])


@pytest.mark.parametrize(("name", "message"), sorted(ENVELOPES.items()))
def test_corrupted_envelopes(name: str, message: str) -> None:
    with pytest.raises(CheckFailed, match=message):
        trust.parse_envelope((TRUST_ASSETS / name).read_bytes())


@pytest.mark.parametrize(("name", "message"), sorted(ROOTS.items()))
def test_invalid_roots(name: str, message: str) -> None:
    data = (TRUST_ASSETS / name).read_bytes()
    with pytest.raises(RecordError, match=message):
        trust.load_root(data)
    with pytest.raises(CheckFailed, match=message):
        trust.verify_root_chain([data])
