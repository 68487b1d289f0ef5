"""Signing and verifying attestations: every tampering case and every key and role rule."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kictl import canon, trust
from kictl.errors import CheckFailed, EnvError, RecordError, UsageError
from kictl.validate import check_envelope_file
from tests.trust.conftest import EPOCH, Setup, at, commit_all, rerun_predicate, sign

SIGNED_AT = at("2026-02-01")


def craft(statement: dict[str, Any], keys: list[Ed25519PrivateKey], payload_type: str = trust.PAYLOAD_TYPE) -> bytes:
    return canon.pretty_bytes(trust.sign_envelope(payload_type, canon.canonical_bytes(statement), keys))


def statement(setup: Setup, kind: str = "submission", predicate: dict[str, Any] | None = None) -> dict[str, Any]:
    return trust.statement_for(setup.run, kind, predicate or {})


def verify(setup: Setup, data: bytes, *, when: datetime = SIGNED_AT, **kwargs: Any) -> trust.VerifiedAttestation:
    root = trust.registry_root(setup.registry)
    return trust.verify_attestation(data, subject=setup.run, root=root, signed_at=when, **kwargs)


# --------------------------------------------------------------------------- the good path


def test_signed_submission_is_stored_where_and_as_the_registry_expects(setup: Setup) -> None:
    path = sign(setup, setup.submitter)
    hex_digest = canon.digest_hex(setup.run.digest)
    relative = setup.registry.relative(path)
    assert relative.startswith(f"registry/attestations/{hex_digest[:2]}/{hex_digest}/")
    data = path.read_bytes()
    assert check_envelope_file(relative, data) == []
    envelope = canon.parse_json(data)
    assert path.name == canon.sha256_hex(canon.canonical_bytes(envelope)) + ".dsse.json"
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert envelope["signatures"][0]["keyid"] == setup.submitter.keyid
    payload = base64.b64decode(envelope["payload"])
    assert payload == canon.canonical_bytes(json.loads(payload))
    assert json.loads(payload) == {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": f"BenchmarkRun/{setup.run.name}", "digest": {"sha256": hex_digest}}],
        "predicateType": "https://kernelindex.dev/attestation/submission/v1",
        "predicate": {},
    }


def test_verified_attestation_carries_only_the_verified_bytes(setup: Setup) -> None:
    data = sign(setup, setup.submitter).read_bytes()
    result = verify(setup, data)
    assert result.predicate_type == "submission"
    assert result.keyid == setup.submitter.keyid
    assert result.owner == "submitter"
    assert result.roles == ("submitter",)
    envelope = json.loads(data)
    assert result.payload == base64.b64decode(envelope["payload"])
    assert result.statement == json.loads(result.payload)


def test_signing_twice_is_idempotent(setup: Setup) -> None:
    first = sign(setup, setup.submitter)
    second = sign(setup, setup.submitter)
    assert first == second
    assert len(list(first.parent.iterdir())) == 1


def test_keyid_hint_is_never_trusted(setup: Setup) -> None:
    envelope = trust.sign_envelope(
        trust.PAYLOAD_TYPE, canon.canonical_bytes(statement(setup)), [setup.submitter.load()]
    )
    envelope["signatures"][0]["keyid"] = setup.maintainer.keyid  # a lie: the maintainer did not sign
    result = verify(setup, canon.pretty_bytes(envelope))
    assert result.keyid == setup.submitter.keyid
    del envelope["signatures"][0]["keyid"]
    assert verify(setup, canon.pretty_bytes(envelope)).keyid == setup.submitter.keyid


def test_url_safe_unpadded_base64_is_accepted(setup: Setup) -> None:
    envelope = json.loads(sign(setup, setup.submitter).read_bytes())
    for member in (envelope, envelope["signatures"][0]):
        key = "payload" if member is envelope else "sig"
        raw = base64.b64decode(member[key])
        member[key] = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    assert verify(setup, json.dumps(envelope).encode()).predicate_type == "submission"


# --------------------------------------------------------------------------- tampering


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda env: b"{not json", "corrupted envelope"),
        (lambda env: json.dumps({**env, "payload": "***"}).encode(), "corrupted envelope: payload is not base64"),
        (lambda env: json.dumps({k: v for k, v in env.items() if k != "signatures"}).encode(), "no signatures"),
        (lambda env: json.dumps({**env, "signatures": []}).encode(), "signatures is not a non-empty list"),
        (lambda env: json.dumps({**env, "signatures": [{"keyid": "x"}]}).encode(), "signature 0 has no sig"),
        (lambda env: json.dumps([env]).encode(), "not a JSON object"),
    ],
)
def test_corrupted_envelope(setup: Setup, mutate: Any, message: str) -> None:
    envelope = json.loads(sign(setup, setup.submitter).read_bytes())
    with pytest.raises(CheckFailed, match=message):
        verify(setup, mutate(envelope))


def test_changed_payload_is_a_bad_signature(setup: Setup) -> None:
    envelope = json.loads(sign(setup, setup.submitter).read_bytes())
    forged = statement(setup, "review", {"note": "excellent"})
    envelope["payload"] = base64.b64encode(canon.canonical_bytes(forged)).decode()
    with pytest.raises(CheckFailed, match=r"bad signature: signature 0, claimed by key \w+ \(submitter\)"):
        verify(setup, json.dumps(envelope).encode())


def test_changed_payload_type_is_a_bad_signature(setup: Setup) -> None:
    envelope = json.loads(sign(setup, setup.submitter).read_bytes())
    envelope["payloadType"] = "application/vnd.in-toto+json;v=2"
    with pytest.raises(CheckFailed, match="bad signature"):
        verify(setup, json.dumps(envelope).encode())


def test_one_bad_signature_among_good_ones_fails(setup: Setup) -> None:
    keys = [setup.submitter.load(), setup.verifier.load()]
    envelope = trust.sign_envelope(trust.PAYLOAD_TYPE, canon.canonical_bytes(statement(setup)), keys)
    sig = bytearray(base64.b64decode(envelope["signatures"][1]["sig"]))
    sig[0] ^= 1
    envelope["signatures"][1]["sig"] = base64.b64encode(bytes(sig)).decode()
    with pytest.raises(CheckFailed, match="bad signature: signature 1"):
        verify(setup, canon.pretty_bytes(envelope))


def test_signature_by_an_unknown_key(setup: Setup) -> None:
    data = sign(setup, setup.stranger).read_bytes()
    with pytest.raises(CheckFailed, match=f"unknown key: signature 0 verifies under no key .*{setup.stranger.keyid}"):
        verify(setup, data)


def test_wrong_payload_type(setup: Setup) -> None:
    data = craft(statement(setup), [setup.submitter.load()], payload_type="application/json")
    with pytest.raises(CheckFailed, match="wrong payloadType 'application/json'"):
        verify(setup, data)


def test_subject_digest_of_another_record(setup: Setup) -> None:
    data = sign(setup, setup.submitter, record=setup.records.implementation).read_bytes()
    with pytest.raises(CheckFailed, match=f"subject: the statement is about {setup.records.implementation.digest}"):
        verify(setup, data)


def test_subject_name_must_match(setup: Setup) -> None:
    body = statement(setup)
    body["subject"][0]["name"] = "BenchmarkRun/someone-else"
    with pytest.raises(CheckFailed, match="subject: the statement names"):
        verify(setup, craft(body, [setup.submitter.load()]))


def test_record_bytes_changed_after_signing(setup: Setup) -> None:
    data = sign(setup, setup.submitter).read_bytes()
    path = setup.registry.record_path("BenchmarkRun", setup.run.digest)
    raw = json.loads(path.read_bytes())
    raw["spec"]["timing"]["latencyNs"]["median"] = 1  # a thousand times faster
    path.write_bytes(canon.pretty_bytes(raw))
    tampered = setup.registry.load(setup.run.digest)
    root = trust.registry_root(setup.registry)
    with pytest.raises(CheckFailed, match="subject: the statement is about"):
        trust.verify_attestation(data, subject=tampered, root=root, signed_at=SIGNED_AT)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"_type": "https://in-toto.io/Statement/v0.1"}, "_type is"),
        ({"predicateType": "https://slsa.dev/provenance/v1"}, "unknown predicateType"),
        ({"subject": []}, "subject is not a non-empty list"),
        ({"subject": [{"name": "x", "digest": {"sha512": "00"}}]}, "no sha256 digest"),
        ({"predicate": {"note": "ok", "extra": 1}}, r"\$\.extra: unknown member"),
        ({"predicate": []}, "predicate is not an object"),
    ],
)
def test_malformed_statement(setup: Setup, body: dict[str, Any], message: str) -> None:
    with pytest.raises(CheckFailed, match=message):
        verify(setup, craft({**statement(setup), **body}, [setup.submitter.load()]))


def test_rerun_predicate_is_validated(setup: Setup) -> None:
    body = statement(setup, "rerun", {"runDigest": "sha256:" + "0" * 64, "verdict": "agrees"})
    with pytest.raises(CheckFailed, match="a rerun that agrees states its latency ratio"):
        verify(setup, craft(body, [setup.verifier.load()]))
    with pytest.raises(RecordError, match="a rerun that disagrees states its latency ratio"):
        sign(setup, setup.verifier, "rerun", rerun_predicate(None, "disagrees"))
    with pytest.raises(UsageError, match="unknown attestation type 'vote'"):
        sign(setup, setup.verifier, "vote")


# --------------------------------------------------------------------------- keys over time


def test_key_not_yet_valid_or_expired(setup: Setup, key_folder: Any) -> None:
    from tests.trust.conftest import make_key

    temp = make_key(setup.registry.root.parent / "keys", "temporary")
    trust.add_key(
        setup.registry,
        trust.load_public_key(temp.public),
        owner="temporary",
        roles=["submitter"],
        keys=[setup.maintainer.load()],
        not_before=at("2026-01-01"),
        not_after=at("2026-03-01"),
    )
    data = sign(setup, temp).read_bytes()
    assert verify(setup, data, when=at("2026-02-01")).owner == "temporary"
    with pytest.raises(CheckFailed, match=r"is valid from 2026-01-01T00:00:00.000Z, after this attestation was signed"):
        verify(setup, data, when=at("2025-12-31"))
    with pytest.raises(CheckFailed, match=r"expired on 2026-03-01T00:00:00.000Z"):
        verify(setup, data, when=at("2026-03-01"))


def test_retired_key_keeps_signatures_made_before_the_revocation(setup: Setup) -> None:
    data = sign(setup, setup.submitter).read_bytes()
    trust.revoke_key(
        setup.registry,
        setup.submitter.keyid[:10],
        reason="retired",
        keys=[setup.maintainer.load()],
        at=at("2026-06-01"),
    )
    assert verify(setup, data, when=at("2026-05-31")).keyid == setup.submitter.keyid
    with pytest.raises(CheckFailed, match=r"was retired on 2026-06-01T00:00:00.000Z, before this attestation"):
        verify(setup, data, when=at("2026-06-01"))


def test_compromised_key_invalidates_every_signature(setup: Setup) -> None:
    data = sign(setup, setup.submitter).read_bytes()
    trust.revoke_key(
        setup.registry, setup.submitter.keyid, reason="compromised", keys=[setup.maintainer.load()], at=at("2026-06-01")
    )
    with pytest.raises(CheckFailed, match=r"revoked as compromised on 2026-06-01.*none of its signatures count"):
        verify(setup, data, when=at("2025-01-02"))


# --------------------------------------------------------------------------- roles


def test_submission_needs_a_submitter(setup: Setup) -> None:
    data = sign(setup, setup.verifier).read_bytes()
    with pytest.raises(
        CheckFailed, match=r"role: a submission needs a submitter key; signed by verifier \(\w+: verifier\)"
    ):
        verify(setup, data)


def test_retraction_by_maintainer_or_the_records_submitter_only(setup: Setup) -> None:
    reason: dict[str, object] = {"reason": "timer bug"}
    by_maintainer = sign(setup, setup.maintainer, "retraction", reason).read_bytes()
    assert verify(setup, by_maintainer).predicate_type == "retraction"
    by_submitter = sign(setup, setup.submitter, "retraction", reason).read_bytes()
    with pytest.raises(CheckFailed, match="role: a retraction needs a maintainer or the record's submitter"):
        verify(setup, by_submitter)
    assert verify(setup, by_submitter, submitters={setup.submitter.keyid}).owner == "submitter"
    by_other = sign(setup, setup.community, "retraction", reason).read_bytes()
    with pytest.raises(CheckFailed, match="role: a retraction needs"):
        verify(setup, by_other, submitters={setup.submitter.keyid})


def test_reruns_and_reviews_may_come_from_any_listed_key(setup: Setup) -> None:
    rerun = sign(setup, setup.community, "rerun", rerun_predicate(1.01)).read_bytes()
    result = verify(setup, rerun)
    assert result.predicate_type == "rerun"
    assert not result.has_role("verifier")
    review = sign(setup, setup.verifier, "review", {"note": "looks right"}).read_bytes()
    assert verify(setup, review).predicate_json == {"note": "looks right"}


# --------------------------------------------------------------------------- private keys


def test_private_key_with_loose_permissions_is_refused(setup: Setup) -> None:
    setup.submitter.private.chmod(0o644)
    try:
        with pytest.raises(EnvError, match="permissions 0644 are too open"):
            sign(setup, setup.submitter)
    finally:
        setup.submitter.private.chmod(0o600)
    assert not setup.registry.attestation_folder(setup.run.digest).exists()


def test_signing_a_tampered_record_is_refused(setup: Setup) -> None:
    path = setup.registry.record_path("BenchmarkRun", setup.run.digest)
    raw = json.loads(path.read_bytes())
    raw["spec"]["status"] = "timeout"
    del raw["spec"]["timing"]
    path.write_bytes(canon.pretty_bytes(raw))
    with pytest.raises(RecordError, match="refusing to sign"):
        sign(setup, setup.submitter)


def test_uncommitted_and_committed_envelopes_both_verify(setup: Setup) -> None:
    sign(setup, setup.submitter)
    report = trust.check_record(setup.registry, setup.run.digest)
    assert report.ok, report.failures
    assert [r.committed for r in report.attestations] == [False]
    commit_all(setup.registry, at("2026-02-01"))
    report = trust.check_record(setup.registry, setup.run.digest)
    assert [(r.committed, r.signed_at) for r in report.attestations] == [(True, at("2026-02-01"))]
    assert EPOCH < report.attestations[0].signed_at


def test_sign_record_joins_a_transaction(setup: Setup) -> None:
    from kictl.store.files import Transaction

    transaction = Transaction()
    path = trust.sign_record(setup.registry, setup.run.digest, setup.submitter.private, transaction=transaction)
    assert transaction.created == [path]
    assert path.exists()
    transaction.rollback()  # what Transaction.__exit__ does when a later step fails
    assert not path.exists()
