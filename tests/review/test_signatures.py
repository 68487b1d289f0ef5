"""Signatures and the trust root in review, through the real kictl.trust (DESIGN §5, issue 7).

One PR branch per lint: ``unsigned-run``, ``bad-attestation`` (for each way an
envelope fails: an unknown key, a wrong role, a changed payload, another
record's statement, a key not yet valid, retired or compromised at the time)
and ``trust-root-threshold``.  The base's trust root (conftest) lists a
maintainer, ``SUBMITTER_KEY`` and ``VERIFIER_KEY``; envelopes are signed with
real Ed25519 keys by conftest's own DSSE code.  The signing time of an
envelope a PR adds is the commit time of the base's tip, never later than now:
the PR's own commit dates are the attacker's to choose (docs/review.md).
"""

from __future__ import annotations

import base64
import copy
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kictl import canon, trust
from tests.conftest import RunCli
from tests.review.conftest import (
    MAINTAINER_KEY,
    SUBMITTER_KEY,
    VERIFIER_KEY,
    Pr,
    Reviewed,
    envelope,
    envelope_path,
    keyid,
    run_review,
)

STRANGER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(2, 34)))
ROOT = "registry/trust/root.json"


def _signed_pr(pr: Pr, value: dict[str, Any] | None = None, *, when: datetime | None = None) -> str:
    """A PR adding one run (slower than the base's, so no leaderboard change) and an envelope about it."""
    run = pr.base.run_like(median_ns=45_000)
    pr.add_record(run)
    path = pr.add_envelope(run, value if value is not None else envelope(run))
    pr.commit("a signed run", when=when)
    return path


def _one_lint(reviewed: Reviewed, code: str) -> dict[str, Any]:
    assert reviewed.exit_code == 1, reviewed.json_result.output
    assert reviewed.lint_codes == [code], reviewed.json_result.output
    assert reviewed.hint_codes == [], reviewed.json_result.output
    assert reviewed.document["notChecked"] == []
    lint: dict[str, Any] = reviewed.document["lints"][0]
    return lint


def test_run_signed_by_the_submitter_passes(cli: RunCli, pr: Pr) -> None:
    _signed_pr(pr)
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 0, reviewed.json_result.output
    assert (reviewed.lint_codes, reviewed.hint_codes, reviewed.document["notChecked"]) == ([], [], [])


def test_unsigned_run(cli: RunCli, pr: Pr) -> None:
    run = pr.base.run_like(median_ns=45_000)
    path = pr.add_record(run)
    pr.commit()
    lint = _one_lint(run_review(cli, pr), "unsigned-run")
    assert lint["path"] == path
    assert lint["message"].startswith("no valid submission attestation by a submitter key of the trust root")


def test_review_attestation_is_no_submission(cli: RunCli, pr: Pr) -> None:
    run = pr.base.run_like(median_ns=45_000)
    pr.add_record(run)
    pr.add_envelope(run, envelope(run, "review", SUBMITTER_KEY, {"note": "looks fine"}))
    pr.commit()
    _one_lint(run_review(cli, pr), "unsigned-run")


def test_signed_by_a_key_the_root_does_not_list(cli: RunCli, pr: Pr) -> None:
    run = pr.base.run_like(median_ns=45_000)
    path = _signed_pr(pr, envelope(run, "submission", STRANGER_KEY))
    lint = _one_lint(run_review(cli, pr), "bad-attestation")
    assert lint["path"] == path
    assert lint["message"] == (
        f"unknown key: signature 0 verifies under no key of trust root version 4 (keyid hint {keyid(STRANGER_KEY)})"
    )


def test_submission_by_a_verifier_key_lacks_the_role(cli: RunCli, pr: Pr) -> None:
    run = pr.base.run_like(median_ns=45_000)
    _signed_pr(pr, envelope(run, "submission", VERIFIER_KEY))
    lint = _one_lint(run_review(cli, pr), "bad-attestation")
    assert lint["message"].startswith("role: a submission needs a submitter key; signed by Vic Verifier (")


def test_payload_changed_after_signing(cli: RunCli, pr: Pr) -> None:
    run = pr.base.run_like(median_ns=45_000)
    value = envelope(run)
    statement = json.loads(base64.b64decode(value["payload"]))
    statement["predicate"] = {"note": "added after signing"}
    value["payload"] = base64.b64encode(canon.canonical_bytes(statement)).decode()
    _signed_pr(pr, value)
    lint = _one_lint(run_review(cli, pr), "bad-attestation")
    assert lint["message"].startswith(f"bad signature: signature 0, claimed by key {keyid(SUBMITTER_KEY)[:12]}")


def test_statement_about_another_record(cli: RunCli, pr: Pr) -> None:
    other = pr.base.run_like(median_ns=46_000)
    _signed_pr(pr, envelope(other))
    lint = _one_lint(run_review(cli, pr), "bad-attestation")
    assert lint["message"].startswith(f"subject: the statement is about {canon.record_digest(other)}, not this record")


def test_signed_before_the_key_was_valid(cli: RunCli, pr: Pr) -> None:
    """The base's tip is dated before the submitter's key becomes valid (2026-01-01)."""
    pr.write("registry/notes.txt", b"an older main\n")
    pr.publish("an old main", when=datetime(2025, 6, 1, tzinfo=UTC))
    _signed_pr(pr)
    lint = _one_lint(run_review(cli, pr), "bad-attestation")
    assert lint["message"] == (
        f"key {keyid(SUBMITTER_KEY)[:12]} (Sam Submitter) is valid from 2026-01-01T00:00:00.000Z, "
        "after this attestation was signed (2025-06-01T00:00:00.000Z)"
    )


@pytest.mark.parametrize("reason", ["retired", "compromised"])
def test_back_dated_pr_commit_does_not_escape_a_revocation(cli: RunCli, pr: Pr, reason: str) -> None:
    """Attack: the base revokes the key on 2026-06-01; the PR's commit claims 2026-03-01. The base tip's time counts."""
    at = datetime(2026, 6, 1, tzinfo=UTC)
    trust.revoke_key(pr.registry, keyid(SUBMITTER_KEY), reason=reason, keys=[MAINTAINER_KEY], at=at)
    pr.publish("revoke the submitter's key", when=datetime(2026, 7, 1, tzinfo=UTC))
    _signed_pr(pr, when=datetime(2026, 3, 1, tzinfo=UTC))
    message = _one_lint(run_review(cli, pr), "bad-attestation")["message"]
    assert "2026-06-01T00:00:00.000Z" in message
    assert "(2026-07-01T00:00:00.000Z)" in message or "compromised" in message


def test_retired_after_the_base_tip_still_signs(cli: RunCli, pr: Pr) -> None:
    """A key retired on 2026-06-01 still signs a PR whose base tip is from 2026-03-01."""
    trust.revoke_key(
        pr.registry, keyid(SUBMITTER_KEY), reason="retired", keys=[MAINTAINER_KEY], at=datetime(2026, 6, 1, tzinfo=UTC)
    )
    pr.publish("plan the retirement", when=datetime(2026, 3, 1, tzinfo=UTC))
    _signed_pr(pr, when=datetime(2026, 9, 1, tzinfo=UTC))  # the PR's own date does not matter either way
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 0, reviewed.json_result.output


def test_future_dated_commits_do_not_reach_a_future_key(cli: RunCli, pr: Pr) -> None:
    """Attack: a key valid only from 2030 signs today in a PR whose commits (and even the base tip) claim 2030."""
    future = datetime(2030, 1, 1, tzinfo=UTC)
    trust.add_key(
        pr.registry,
        STRANGER_KEY.public_key(),
        owner="Fay Future",
        roles=["submitter"],
        keys=[MAINTAINER_KEY],
        not_before=future,
    )
    pr.publish("a key valid from 2030", when=datetime(2030, 6, 1, tzinfo=UTC))
    run = pr.base.run_like(median_ns=45_000)
    _signed_pr(pr, envelope(run, "submission", STRANGER_KEY), when=datetime(2030, 6, 1, tzinfo=UTC))
    reviewed = run_review(cli, pr)
    assert reviewed.lint_codes == ["bad-attestation"], reviewed.json_result.output
    message = reviewed.document["lints"][0]["message"]
    assert "valid from 2030-01-01T00:00:00.000Z, after this attestation was signed" in message
    assert "signed (2030" not in message


def test_a_branch_forked_before_a_compromise_is_judged_by_the_base_tip(cli: RunCli, pr: Pr) -> None:
    """Attack: the PR forks from main, main then marks the submitter key compromised; the PR signs with it."""
    _signed_pr(pr)
    pr.repo.git.checkout("-q", "main")
    trust.revoke_key(pr.registry, keyid(SUBMITTER_KEY), reason="compromised", keys=[MAINTAINER_KEY])
    pr.repo.git.add("-A")
    pr.repo.index.commit("the submitter key is compromised")
    pr.repo.git.checkout("-q", "pr")
    lint = _one_lint(run_review(cli, pr), "bad-attestation")
    assert "compromised" in lint["message"]


def test_new_attestation_about_a_published_run_is_verified_too(cli: RunCli, pr: Pr) -> None:
    path = pr.add_envelope(pr.base.run, envelope(pr.base.run, "review", STRANGER_KEY, {"note": "suspicious"}))
    pr.commit()
    lint = _one_lint(run_review(cli, pr), "bad-attestation")
    assert lint["path"] == path
    assert lint["message"].startswith("unknown key: ")


def test_the_base_root_judges_even_when_the_pr_adds_the_key(cli: RunCli, pr: Pr) -> None:
    """A PR cannot vouch for itself: a key its own root change adds does not sign its runs."""
    trust.add_key(
        pr.registry, STRANGER_KEY.public_key(), owner="Stan Stranger", roles=["submitter"], keys=[MAINTAINER_KEY]
    )
    run = pr.base.run_like(median_ns=45_000)
    _signed_pr(pr, envelope(run, "submission", STRANGER_KEY))
    lint = _one_lint(run_review(cli, pr), "bad-attestation")
    assert lint["message"].startswith("unknown key: signature 0 verifies under no key of trust root version 4")


# --------------------------------------------------------------------------- the trust root


def _next_version(pr: Pr, signers: list[Ed25519PrivateKey]) -> tuple[int, bytes]:
    """The root's next version with STRANGER_KEY as a submitter, signed by ``signers``."""
    current = json.loads((pr.root / ROOT).read_bytes())
    signed = copy.deepcopy(current["signed"])
    signed["version"] += 1
    signed["keys"][keyid(STRANGER_KEY)] = {
        "publicKey": trust.public_bytes(STRANGER_KEY.public_key()).hex(),
        "scheme": "ed25519",
        "owner": "Stan Stranger",
        "roles": ["submitter"],
        "notBefore": "2026-01-01T00:00:00.000Z",
    }
    signatures = trust.sign_envelope(trust.ROOT_PAYLOAD_TYPE, canon.canonical_bytes(signed), signers)["signatures"]
    return signed["version"], canon.pretty_bytes({"signed": signed, "signatures": signatures})


def test_root_rotation_by_the_maintainer_passes(cli: RunCli, pr: Pr) -> None:
    trust.add_key(
        pr.registry, STRANGER_KEY.public_key(), owner="Stan Stranger", roles=["submitter"], keys=[MAINTAINER_KEY]
    )
    pr.commit("add a submitter")
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 0, reviewed.json_result.output
    assert sorted(change["path"] for change in reviewed.document["changes"]) == ["registry/trust/5.root.json", ROOT]
    assert (reviewed.lint_codes, reviewed.hint_codes, reviewed.document["notChecked"]) == ([], [], [])


def test_root_change_without_the_maintainer_threshold(cli: RunCli, pr: Pr) -> None:
    version, data = _next_version(pr, [STRANGER_KEY])
    pr.write(f"registry/trust/{version}.root.json", data)
    pr.write(ROOT, data)
    pr.commit()
    lint = _one_lint(run_review(cli, pr), "trust-root-threshold")
    assert lint["path"] == "registry/trust/5.root.json"
    assert (
        lint["message"] == "trust root version 5 is signed by 0 maintainer(s) of version 4, needs 1 (signed by: none)"
    )


def test_root_json_is_not_the_newest_version(cli: RunCli, pr: Pr) -> None:
    version, data = _next_version(pr, [MAINTAINER_KEY])
    pr.write(f"registry/trust/{version}.root.json", data)  # root.json left as version 4
    pr.commit()
    lint = _one_lint(run_review(cli, pr), "trust-root-threshold")
    assert lint["path"] == ROOT
    assert lint["message"].startswith("registry/trust/root.json is not byte for byte 5.root.json")


def test_root_changed_without_keeping_its_version(cli: RunCli, pr: Pr) -> None:
    _, data = _next_version(pr, [MAINTAINER_KEY])
    pr.write(ROOT, data)
    pr.commit()
    lint = _one_lint(run_review(cli, pr), "trust-root-threshold")
    assert lint["message"].startswith("changes the trust root without keeping the new version as registry/trust/")


def test_stray_file_in_the_trust_folder(cli: RunCli, pr: Pr) -> None:
    pr.write("registry/trust/keys.txt", b"not a root version\n")
    pr.commit()
    lint = _one_lint(run_review(cli, pr), "path-not-allowed")
    assert lint["message"] == "not a trust-root version (registry/trust/<N>.root.json)"


def test_published_root_version_edited(cli: RunCli, pr: Pr) -> None:
    path = "registry/trust/4.root.json"
    pr.write(path, (pr.root / path).read_bytes().replace(b"Sam Submitter", b"Sam Impostor"))
    pr.commit()
    lint = _one_lint(run_review(cli, pr), "published-changed")
    assert lint["message"].startswith("edits a published trust-root version")


def test_markdown_lists_the_attestation_lints(cli: RunCli, pr: Pr) -> None:
    run = pr.base.run_like(median_ns=45_000)
    pr.add_record(run)
    path = envelope_path(run, envelope(run, "submission", STRANGER_KEY))
    pr.add_envelope(run, envelope(run, "submission", STRANGER_KEY))
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.markdown.startswith("### kictl review fails: 1 lint, 0 hints in 2 changed files\n")
    assert f"| `{path}` | `bad-attestation` | unknown key: signature 0 verifies under no key" in reviewed.markdown


def _verifier_rerun(pr: Pr, key: Ed25519PrivateKey = VERIFIER_KEY) -> tuple[dict[str, Any], str]:
    """The verifier's own run of the base's run, and the rerun attestation (about the original) naming it."""
    mine = pr.base.run_like(median_ns=40_400)
    predicate = {"runDigest": canon.record_digest(mine), "ratio": 1.01, "verdict": "agrees"}
    path = pr.add_envelope(pr.base.run, envelope(pr.base.run, "rerun", key, predicate))
    return mine, path


@pytest.mark.parametrize("where", ["pr", "base"])
def test_a_verifier_rerun_run_needs_no_submission(cli: RunCli, pr: Pr, where: str) -> None:
    mine, _ = _verifier_rerun(pr)
    if where == "base":
        pr.publish("the verifier's attestation lands first")
    pr.add_record(mine)
    pr.commit("the verifier's own run")
    reviewed = run_review(cli, pr)
    assert "unsigned-run" not in reviewed.lint_codes, reviewed.json_result.output
    assert reviewed.exit_code == 0, reviewed.json_result.output


def test_a_submitter_rerun_does_not_sign_its_run(cli: RunCli, pr: Pr) -> None:
    mine, _ = _verifier_rerun(pr, SUBMITTER_KEY)  # a community rerun: no verifier
    pr.add_record(mine)
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.lint_codes == ["unsigned-run"], reviewed.json_result.output
