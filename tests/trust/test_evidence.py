"""Evidence levels, retractions and `check_record` (what `kictl verify DIGEST` computes)."""

from __future__ import annotations

import json

import pytest

from kictl import canon, standing, trust
from kictl.errors import CheckFailed, NotFoundError
from tests.trust.conftest import Setup, add_records, at, build_records, commit_all, rerun_predicate, sign


def levels(setup: Setup) -> str:
    return standing.evidence_levels(setup.registry, [setup.run.digest])[setup.run.digest]


def test_a_signed_run_is_reported(setup: Setup) -> None:
    assert levels(setup) == "unsigned"
    sign(setup, setup.submitter)
    report = trust.check_record(setup.registry, setup.run.digest)
    assert report.ok, report.failures
    assert report.level == "reported"
    assert report.trust.submitted
    assert len(report.records) == 6  # the run and the five records it references
    assert report.root_version == 5


def test_only_invalid_submissions_leave_a_run_unsigned(setup: Setup) -> None:
    """A submission by a key the root does not know, or by a key without the submitter role, is no signature."""
    sign(setup, setup.stranger)
    sign(setup, setup.maintainer)
    assert levels(setup) == "unsigned"
    report = trust.check_record(setup.registry, setup.run.digest)
    assert not report.ok
    assert report.level == "unsigned"
    assert not report.trust.submitted
    assert report.to_json()["level"] == "unsigned"
    sign(setup, setup.submitter)
    assert levels(setup) == "reported"


def test_a_verifier_rerun_decides_even_without_a_submission(setup: Setup) -> None:
    """Evidence from a controlled rerun outranks the missing signature: the level is the rerun's verdict."""
    sign(setup, setup.verifier, "rerun", rerun_predicate(1.0))
    report = trust.check_record(setup.registry, setup.run.digest)
    assert report.level == "verified"
    assert not report.trust.submitted
    assert "no valid submission signature" in report.notes


def test_verifier_rerun_that_agrees_verifies(setup: Setup) -> None:
    sign(setup, setup.submitter)
    sign(setup, setup.verifier, "rerun", rerun_predicate(1.05))
    assert levels(setup) == "verified"


@pytest.mark.parametrize(
    "predicate",
    [
        rerun_predicate(1.5, "disagrees"),
        rerun_predicate(None, "failed"),
        rerun_predicate(1.5, "agrees"),  # says agrees, but 50% slower is beyond the policy's 10%
    ],
)
def test_verifier_rerun_that_disagrees_or_fails_disputes(setup: Setup, predicate: dict[str, object]) -> None:
    sign(setup, setup.verifier, "rerun", predicate)
    assert levels(setup) == "disputed"


@pytest.mark.parametrize("predicate", [rerun_predicate(0.74, "agrees"), rerun_predicate(0.74, "disagrees")])
def test_a_verifier_rerun_faster_than_claimed_verifies(setup: Setup, predicate: dict[str, object]) -> None:
    sign(setup, setup.verifier, "rerun", predicate)  # one-sided: 26% faster is no evidence against the author
    assert levels(setup) == "verified"


def test_one_disagreeing_verifier_outweighs_an_agreeing_one(setup: Setup) -> None:
    sign(setup, setup.verifier, "rerun", rerun_predicate(1.0))
    sign(setup, setup.verifier, "rerun", rerun_predicate(2.0, "disagrees"))
    assert levels(setup) == "disputed"


def test_tolerance_comes_from_the_policy(setup: Setup) -> None:
    sign(setup, setup.verifier, "rerun", rerun_predicate(1.3))
    assert levels(setup) == "disputed"
    policy = json.loads(setup.registry.policy_path.read_bytes())
    policy["rerunTolerance"] = 0.5
    setup.registry.policy_path.write_bytes(canon.pretty_bytes(policy))
    assert levels(setup) == "disputed"  # an unsigned edit is not read (docs/trust.md "What readers count")
    trust.sign_policy(setup.registry, keys=[setup.maintainer.load()])
    assert levels(setup) == "verified"


def test_community_reruns_and_reviews_are_counted_but_never_change_the_level(setup: Setup) -> None:
    sign(setup, setup.community, "rerun", rerun_predicate(3.0, "disagrees"))
    sign(setup, setup.community, "rerun", rerun_predicate(1.0))
    sign(setup, setup.maintainer, "review", {"note": "numbers look plausible"})
    summary = standing.trust_summaries(setup.registry, [setup.run.digest])[setup.run.digest]
    assert summary == trust.RecordTrust(level="unsigned", community_reruns=2, reviews=1)
    sign(setup, setup.submitter)
    summary = standing.trust_summaries(setup.registry, [setup.run.digest])[setup.run.digest]
    assert summary == trust.RecordTrust(level="reported", submitted=True, community_reruns=2, reviews=1)
    report = trust.check_record(setup.registry, setup.run.digest)
    assert sorted(r.counts_for or "" for r in report.attestations) == [
        "community",
        "community",
        "review",
        "submission",
    ]


def test_one_signed_payload_counts_once_however_many_files_carry_it(setup: Setup) -> None:
    """Attack: re-add the same signed statement under other file names (e.g. padding stripped) to inflate counts."""
    path = sign(setup, setup.community, "rerun", rerun_predicate(1.0))
    data = path.read_bytes()
    envelope = json.loads(data)
    envelope["signatures"] = envelope["signatures"] * 2  # the same signature twice: other bytes, same pair
    copies = [("a.dsse.json", data), ("b.dsse.json", data), ("c.dsse.json", canon.pretty_bytes(envelope))]
    root = trust.registry_root(setup.registry)
    now = at("2026-06-01")
    results, standing = trust.judge_attestations(
        setup.run, root, [(name, body, now, True) for name, body in copies], rerun_tolerance=0.05
    )
    assert standing.community_reruns == 1
    assert next(result.counts_for for result in results if result.failure is None) == "community"


def test_invalid_envelopes_never_raise_the_level(setup: Setup) -> None:
    sign(setup, setup.stranger, "rerun", rerun_predicate(1.0))  # unknown key
    path = sign(setup, setup.verifier, "rerun", rerun_predicate(1.0))
    commit_all(setup.registry, at("2026-01-01"))
    trust.revoke_key(setup.registry, setup.verifier.keyid, reason="compromised", keys=[setup.maintainer.load()])
    assert path.exists()
    assert levels(setup) == "unsigned"
    report = trust.check_record(setup.registry, setup.run.digest)
    assert not report.ok
    messages = "\n".join(report.failures)
    assert "unknown key" in messages
    assert "revoked as compromised" in messages


def test_revocation_by_time_follows_the_commit_that_added_the_envelope(setup: Setup) -> None:
    """A rerun committed before a verifier key's retirement keeps counting; one committed after does not."""
    before = sign(setup, setup.verifier, "rerun", rerun_predicate(1.0))
    commit_all(setup.registry, at("2026-03-01"), "rerun before the retirement")
    trust.revoke_key(
        setup.registry, setup.verifier.keyid, reason="retired", keys=[setup.maintainer.load()], at=at("2026-04-01")
    )
    commit_all(setup.registry, at("2026-04-01"), "retire the verifier")
    assert levels(setup) == "verified"
    after = sign(setup, setup.verifier, "rerun", rerun_predicate(1.02))
    report = trust.check_record(setup.registry, setup.run.digest)
    assert [r.failure for r in report.attestations if r.path.endswith(before.name)] == [None]
    late = [r for r in report.attestations if r.path.endswith(after.name)]
    assert late[0].committed is False  # uncommitted: its signing time is now, after the retirement
    assert "was retired on 2026-04-01T00:00:00.000Z" in (late[0].failure or "")
    commit_all(setup.registry, at("2026-05-01"), "rerun after the retirement")
    report = trust.check_record(setup.registry, setup.run.digest)
    late = [r for r in report.attestations if r.path.endswith(after.name)]
    assert late[0].committed is True
    assert late[0].signed_at == at("2026-05-01")
    assert "was retired on 2026-04-01" in (late[0].failure or "")
    assert report.level == "verified"  # the earlier rerun still counts


def test_offline_signing_time_is_the_merge_onto_the_main_line(setup: Setup) -> None:
    """Attack: a branch back-dates its commit to before the retirement; merged after it, the merge's time counts."""
    from tests.trust.conftest import git_date

    git = setup.registry.git.repo.git
    main = setup.registry.git.current_branch()
    assert main is not None
    git.checkout("-q", "-b", "backdated")
    late = sign(setup, setup.verifier, "rerun", rerun_predicate(1.0))
    commit_all(setup.registry, at("2026-03-01"), "a rerun that claims March")
    git.checkout("-q", main)
    trust.revoke_key(
        setup.registry, setup.verifier.keyid, reason="retired", keys=[setup.maintainer.load()], at=at("2026-04-01")
    )
    commit_all(setup.registry, at("2026-04-01"), "retire the verifier")
    with git_date(at("2026-05-01")):
        git.merge("--no-ff", "-q", "-m", "merge the back-dated branch", "backdated")
    report = trust.check_record(setup.registry, setup.run.digest)
    [result] = [r for r in report.attestations if r.path.endswith(late.name)]
    assert result.committed is True
    assert result.signed_at == at("2026-05-01")  # the merge commit on the main line, not the branch's March
    assert "was retired on 2026-04-01" in (result.failure or "")
    assert report.level == "unsigned"


def test_a_future_dated_commit_counts_as_signed_now(setup: Setup) -> None:
    """Attack: a key valid only from 2030 signs, and the commit claims 2031; signing time never passes now."""
    from datetime import UTC, datetime

    future = setup.stranger
    trust.add_key(
        setup.registry,
        trust.load_public_key(future.public),
        owner=future.owner,
        roles=["verifier"],
        keys=[setup.maintainer.load()],
        not_before=at("2030-01-01"),
    )
    path = sign(setup, future, "rerun", rerun_predicate(1.0))
    commit_all(setup.registry, at("2031-01-01"), "a rerun from the future")
    report = trust.check_record(setup.registry, setup.run.digest)
    [result] = [r for r in report.attestations if r.path.endswith(path.name)]
    assert result.signed_at <= datetime.now(UTC)
    assert "is valid from 2030-01-01" in (result.failure or "")
    assert report.level == "unsigned"


def test_compromise_invalidates_even_old_commits(setup: Setup) -> None:
    sign(setup, setup.verifier, "rerun", rerun_predicate(1.0))
    commit_all(setup.registry, at("2026-03-01"))
    assert levels(setup) == "verified"
    trust.revoke_key(
        setup.registry, setup.verifier.keyid, reason="compromised", keys=[setup.maintainer.load()], at=at("2026-04-01")
    )
    commit_all(setup.registry, at("2026-04-01"))
    assert levels(setup) == "unsigned"


def test_retractions(setup: Setup) -> None:
    sign(setup, setup.submitter)
    assert standing.retracted_digests(setup.registry) == set()
    sign(setup, setup.community, "retraction", {"reason": "not mine to retract"})
    assert standing.retracted_digests(setup.registry) == set()
    sign(setup, setup.submitter, "retraction", {"reason": "the timer was wrong"})
    assert standing.retracted_digests(setup.registry) == {setup.run.digest}
    report = trust.check_record(setup.registry, setup.run.digest)
    assert report.trust.retracted
    assert [f for f in report.failures if "role: a retraction" in f]


def test_evidence_levels_over_many_records(setup: Setup) -> None:
    others = [build_records(latency_ns=2_000_000 + i, tag=f"x{i}") for i in range(3)]
    for records in others:
        add_records(setup.registry, records.all())
    sign(setup, setup.verifier, "rerun", rerun_predicate(1.0))
    sign(setup, setup.verifier, "rerun", rerun_predicate(2.0, "disagrees"), record=others[0].run)
    every = standing.evidence_levels(setup.registry)
    assert every[setup.run.digest] == "verified"
    assert every[others[0].run.digest] == "disputed"
    assert every[others[1].run.digest] == "unsigned"
    assert len(every) == 6 + 3 * 2  # each adds an implementation and a run; the rest is shared
    subset = standing.evidence_levels(setup.registry, [others[2].run.digest, others[0].run.digest])
    assert subset == {others[2].run.digest: "unsigned", others[0].run.digest: "disputed"}


def test_evidence_needs_a_valid_trust_root(setup: Setup) -> None:
    sign(setup, setup.verifier, "rerun", rerun_predicate(1.0))
    (setup.registry.trust_dir / "4.root.json").unlink()
    with pytest.raises(CheckFailed, match="lacks trust root version 4"):
        standing.evidence_levels(setup.registry)
    report = trust.check_record(setup.registry, setup.run.digest)
    assert report.level == "unsigned"
    assert report.failures[0].startswith("trust root: ")
    assert "attestation(s) not checked: the trust root does not verify" in report.failures[1]


# --------------------------------------------------------------------------- check_record


def test_check_record_finds_a_changed_referenced_record(setup: Setup) -> None:
    path = setup.registry.record_path("Implementation", setup.records.implementation.digest)
    raw = json.loads(path.read_bytes())
    raw["spec"]["license"] = "MIT"
    path.write_bytes(canon.pretty_bytes(raw))
    report = trust.check_record(setup.registry, setup.run.digest)
    assert not report.ok
    assert any("file name is not the record's digest" in f and "Implementation" in f for f in report.failures)


def test_check_record_finds_a_changed_record_and_its_signatures(setup: Setup) -> None:
    sign(setup, setup.submitter)
    path = setup.registry.record_path("BenchmarkRun", setup.run.digest)
    raw = json.loads(path.read_bytes())
    raw["spec"]["timing"]["latencyNs"]["median"] = 10
    path.write_bytes(canon.pretty_bytes(raw))
    report = trust.check_record(setup.registry, setup.run.digest)
    assert any("file name is not the record's digest" in f for f in report.failures)
    assert any("subject: the statement is about" in f for f in report.failures)
    assert report.trust.submitted is False


def test_check_record_finds_a_dangling_reference(setup: Setup) -> None:
    setup.registry.record_path("ExecutionEnvironment", setup.records.environment.digest).unlink()
    report = trust.check_record(setup.registry, setup.run.digest)
    assert any(f"no record {setup.records.environment.digest}" in f for f in report.failures)


def test_check_record_finds_a_misnamed_envelope(setup: Setup) -> None:
    path = sign(setup, setup.submitter)
    path.rename(path.with_name("0" * 64 + ".dsse.json"))
    report = trust.check_record(setup.registry, setup.run.digest)
    assert any("file name is not the envelope's digest" in f for f in report.failures)


def test_check_record_finds_a_rerun_of_another_kernel(setup: Setup) -> None:
    other = build_records(tag="other")
    add_records(setup.registry, [other.implementation, other.run])
    sign(setup, setup.verifier, "rerun", rerun_predicate(1.0, run_digest=other.run.digest))
    report = trust.check_record(setup.registry, setup.run.digest)
    assert any("has another implementationDigest" in f for f in report.failures)


def test_check_record_of_an_unknown_digest(setup: Setup) -> None:
    with pytest.raises(NotFoundError, match="no record sha256:0000"):
        trust.check_record(setup.registry, "sha256:" + "0" * 64)


def test_rejected_attestations_still_say_who_signed_and_what(setup: Setup) -> None:
    sign(setup, setup.verifier, "rerun", rerun_predicate(1.0))
    trust.revoke_key(setup.registry, setup.verifier.keyid, reason="compromised", keys=[setup.maintainer.load()])
    (result,) = trust.check_record(setup.registry, setup.run.digest).attestations
    assert not result.valid
    assert result.predicate_type == "rerun"
    assert [s.owner for s in result.signers] == ["verifier"]
    assert "revoked as compromised" in (result.failure or "")
