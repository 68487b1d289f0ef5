"""Interoperability with an independent DSSE implementation: securesystemslib's.

Both ways: an envelope written by `kictl sign` verifies with
``securesystemslib.dsse.Envelope``, and an envelope that securesystemslib signs
with an Ed25519 key verifies with `kictl verify`.  Also the DSSE spec's own
PAE test vector.
"""

from __future__ import annotations

import json

import pytest
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import CryptoSigner, SSlibKey

from kictl import canon, trust
from tests.conftest import RunCli
from tests.trust.conftest import Setup, at, commit_all, rerun_predicate, sign


def test_pae_matches_the_dsse_spec_test_vector() -> None:
    # DSSE protocol.md, "Test Vectors".
    assert trust.pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert trust.pae("", b"") == b"DSSEv1 0  0 "
    assert trust.pae("t", "é".encode()) == "DSSEv1 1 t 2 é".encode()


def test_pae_matches_securesystemslib() -> None:
    payload = canon.canonical_bytes({"a": "ünïcode", "b": [1, 2.5]})
    assert trust.pae(trust.PAYLOAD_TYPE, payload) == Envelope(payload, trust.PAYLOAD_TYPE, {}).pae()


def test_kictl_envelope_verifies_with_securesystemslib(setup: Setup) -> None:
    path = sign(setup, setup.verifier, "rerun", rerun_predicate(1.01))
    envelope = Envelope.from_dict(json.loads(path.read_bytes()))
    public = trust.load_public_key(setup.verifier.public)
    key = SSlibKey.from_crypto(public, keyid=setup.verifier.keyid)
    accepted = envelope.verify([key], 1)
    assert list(accepted) == [setup.verifier.keyid]
    statement = json.loads(envelope.payload)
    assert statement["predicateType"] == "https://kernelindex.dev/attestation/rerun/v1"
    assert statement["subject"][0]["digest"]["sha256"] == canon.digest_hex(setup.run.digest)
    # and securesystemslib refuses it under another key
    other = SSlibKey.from_crypto(trust.load_public_key(setup.submitter.public), keyid=setup.verifier.keyid)
    with pytest.raises(VerificationError):
        envelope.verify([other], 1)


def test_securesystemslib_envelope_verifies_with_kictl(setup: Setup, cli: RunCli) -> None:
    private = setup.submitter.load()
    # securesystemslib's own keyid (not kictl's): kictl must recompute the keyid from the key.
    signer = CryptoSigner(private, SSlibKey.from_crypto(private.public_key()))
    assert signer.public_key.keyid != setup.submitter.keyid
    statement = trust.statement_for(setup.run, "submission", {"note": "signed by securesystemslib"})
    envelope = Envelope(canon.canonical_bytes(statement), "application/vnd.in-toto+json", {})
    envelope.sign(signer)
    document = envelope.to_dict()
    folder = setup.registry.attestation_folder(setup.run.digest)
    folder.mkdir(parents=True)
    (folder / trust.envelope_name(document)).write_bytes(canon.pretty_bytes(document))
    commit_all(setup.registry, at("2026-02-01"), "an envelope from securesystemslib")
    result = cli("verify", setup.run.digest, "--registry", setup.registry.root, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["submitted"] is True
    (attestation,) = report["attestations"]
    assert attestation["valid"] is True
    assert attestation["signers"][0]["keyid"] == setup.submitter.keyid
    assert attestation["predicate"] == {"note": "signed by securesystemslib"}
    assert attestation["signedAt"] == "2026-02-01T00:00:00.000Z"


def test_securesystemslib_envelope_with_a_changed_payload_fails_kictl_verify(setup: Setup, cli: RunCli) -> None:
    private = setup.verifier.load()
    signer = CryptoSigner(private, SSlibKey.from_crypto(private.public_key()))
    statement = trust.statement_for(setup.run, "rerun", rerun_predicate(2.0, "disagrees"))
    envelope = Envelope(canon.canonical_bytes(statement), "application/vnd.in-toto+json", {})
    envelope.sign(signer)
    envelope.payload = canon.canonical_bytes(trust.statement_for(setup.run, "rerun", rerun_predicate(1.0)))
    document = envelope.to_dict()
    folder = setup.registry.attestation_folder(setup.run.digest)
    folder.mkdir(parents=True)
    (folder / trust.envelope_name(document)).write_bytes(canon.pretty_bytes(document))
    result = cli("verify", setup.run.digest[:20], "--registry", setup.registry.root)
    assert result.exit_code == 1, result.output
    assert "unknown key: signature 0 verifies" in result.stdout
    assert "evidence   unsigned" in result.stdout
