"""One PR branch per hint the review gives on its own: reported exactly, exit 0, Markdown renders."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kictl import canon, trust
from tests.conftest import RunCli
from tests.review.conftest import GEMM, MAINTAINER_KEY, SUBMITTER_KEY, VERIFIER_KEY, Pr, envelope, run_review

NATIVE = {"source": "flashinfer-bench", "benchmark": "mlsys26-contest", "externalId": "trace-17"}


def test_imported_run_without_rerun(cli: RunCli, pr: Pr) -> None:
    run = pr.base.run_like(median_ns=45_000, sourceNative=NATIVE)
    pr.add_record(run)
    pr.add_envelope(run, envelope(run, "submission"))
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 0, reviewed.json_result.output
    assert reviewed.lint_codes == []
    assert reviewed.hint_codes == ["source-native-no-rerun"]
    hint = reviewed.document["hints"][0]
    assert hint["path"].startswith("registry/records/BenchmarkRun/")
    assert hint["message"].startswith(
        "imported from flashinfer-bench mlsys26-contest with no verified rerun attestation by a verifier"
    )
    assert hint["message"].endswith("`kictl rerun RUN --out DIR`, then `kictl attest rerun DIR --key VERIFIER_KEY`")
    assert "verify --rerun" not in reviewed.markdown


@pytest.mark.parametrize(
    ("key", "hinted"),
    [(VERIFIER_KEY, False), (SUBMITTER_KEY, True)],
    ids=["verifier-rerun", "community-rerun"],
)
def test_imported_run_with_a_rerun_attestation(cli: RunCli, pr: Pr, key: Ed25519PrivateKey, hinted: bool) -> None:
    """A verifier's rerun answers the hint; a rerun by a key without the verifier role does not."""
    run = pr.base.run_like(median_ns=45_000, sourceNative=NATIVE)
    rerun = pr.base.run_like(median_ns=45_500)  # the rerunner's own run (not filed here)
    pr.add_record(run)
    pr.add_envelope(run, envelope(run, "submission"))
    predicate = {"runDigest": canon.record_digest(rerun), "ratio": 1.011, "verdict": "agrees"}
    pr.add_envelope(run, envelope(run, "rerun", key, predicate))
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 0, reviewed.json_result.output
    assert reviewed.lint_codes == []
    assert reviewed.hint_codes == (["source-native-no-rerun"] if hinted else [])


def test_definition_gets_a_new_version(cli: RunCli, pr: Pr) -> None:
    reference = pr.root / GEMM / "reference.py"
    reference.write_text(reference.read_text() + "\n# accumulate in float64 from now on\n")
    compiled = cli("definitions", "compile", "gemm_n4096_k4096", "--registry", pr.root)
    assert compiled.exit_code == 0, compiled.output
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 0, reviewed.json_result.output
    assert reviewed.lint_codes == []
    assert reviewed.hint_codes == ["definition-new-version"]
    old = canon.record_digest(pr.base.definition)
    assert f"(was {old})" in reviewed.document["hints"][0]["message"]
    assert reviewed.document["added"]["records"] == {"Definition": 1, "Workload": 6}


def _change_policy(pr: Pr) -> None:
    policy = json.loads((pr.root / "registry" / "policy.json").read_text())
    policy["staleAfterDays"] = 180
    pr.write("registry/policy.json", canon.pretty_bytes(policy))


def test_policy_changed_and_signed_by_the_maintainer(cli: RunCli, pr: Pr) -> None:
    _change_policy(pr)
    trust.sign_policy(pr.registry, keys=[MAINTAINER_KEY])
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 0, reviewed.json_result.output
    assert reviewed.lint_codes == []
    assert reviewed.hint_codes == ["policy-changed"]
    assert reviewed.document["hints"][0]["path"] == "registry/policy.json"


def test_an_unsigned_policy_change_is_a_lint(cli: RunCli, pr: Pr) -> None:
    _change_policy(pr)
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    assert reviewed.lint_codes == ["policy-unsigned"]
    assert "`kictl trust sign-policy --key MAINTAINER_KEY`" in reviewed.document["lints"][0]["message"]


def test_a_policy_signed_by_a_stranger_is_a_lint(cli: RunCli, pr: Pr) -> None:
    """Attack: the PR adds a root version naming its policy, signed by a key that is no maintainer."""

    _change_policy(pr)
    current = json.loads((pr.root / "registry/trust/root.json").read_bytes())
    signed = dict(current["signed"], version=current["signed"]["version"] + 1)
    signed["policyDigest"] = canon.bytes_digest((pr.root / "registry/policy.json").read_bytes())
    stranger = Ed25519PrivateKey.from_private_bytes(bytes(range(7, 39)))
    envelope = trust.sign_envelope(trust.ROOT_PAYLOAD_TYPE, canon.canonical_bytes(signed), [stranger])
    data = canon.pretty_bytes({"signed": signed, "signatures": envelope["signatures"]})
    pr.write(f"registry/trust/{signed['version']}.root.json", data)
    pr.write("registry/trust/root.json", data)
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    assert "trust-root-threshold" in reviewed.lint_codes
