"""The review's seams (``Checks``) and what fills them: kictl.trust, kictl.rank and ``HeadEvidence``.

The lints and hints the wired review gives are tested PR by PR in
test_signatures.py and test_leaderboards.py.  Here: that ``default_checks``
fills every seam, that a missing or failing seam is listed as "not checked"
(never passed silently), that a base trust root which does not parse rejects
every envelope, and that evidence levels come from the head's committed
attestations judged by the base's root, not from the working tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kictl import canon
from kictl.errors import RegistryError
from kictl.policy import Policy
from kictl.review import Checks, HeadEvidence, LeaderboardDiff, default_checks, render_markdown, render_text, review
from kictl.store.registry import Registry
from tests.conftest import RunCli
from tests.review.conftest import (
    SUBMITTER_KEY,
    VERIFIER_KEY,
    Pr,
    assert_markdown_renders,
    envelope,
    run_review,
)

NATIVE = {"source": "flashinfer-bench", "benchmark": "mlsys26-contest"}


def test_default_checks_fill_every_seam() -> None:
    checks = default_checks()
    assert checks.verify_attestation is not None
    assert checks.verify_root_update is not None
    assert checks.leaderboards is not None


def test_missing_seams_are_listed_as_not_checked(pr: Pr) -> None:
    run = pr.base.run_like(median_ns=30_000, sourceNative=NATIVE)
    pr.add_record(run)
    pr.add_envelope(run, envelope(run, "rerun", SUBMITTER_KEY))  # unverified: only its claimed type is read
    root = pr.root / "registry" / "trust" / "root.json"
    root.write_bytes(root.read_bytes().replace(b'"version": 4', b'"version": 5'))
    pr.commit()
    report = review(pr.registry, "main", checks=Checks())
    assert report.ok
    assert [item.check for item in report.not_checked] == ["trust root", "signatures", "leaderboards"]
    assert report.leaderboards is None
    assert [finding.code for finding in report.hints] == []  # it claims a rerun
    assert_markdown_renders(render_markdown(report))
    assert "#### Not checked" in render_markdown(report)
    assert all(len(line) <= 100 for line in render_text(report).splitlines())


def test_a_failing_ranking_is_listed_as_not_checked(pr: Pr) -> None:
    run = pr.base.run_like(median_ns=30_000)
    pr.add_record(run)
    pr.add_envelope(run, envelope(run))
    pr.commit()

    def broken(
        registry: Registry, base: str, head: str, policy: Policy, runs: Sequence[str], tip: str
    ) -> LeaderboardDiff:
        raise RegistryError(f"{registry.root}/.kictl/index.sqlite: cannot write: Read-only file system")

    checks = default_checks()
    report = review(pr.registry, "main", checks=Checks(checks.verify_attestation, checks.verify_root_update, broken))
    assert report.ok
    assert [(item.check, item.reason.split(":")[0]) for item in report.not_checked] == [
        ("leaderboards", "ranking failed")
    ]


def test_a_base_root_that_does_not_parse_rejects_every_envelope(cli: RunCli, pr: Pr) -> None:
    pr.write("registry/trust/root.json", b'{"signed": {}, "signatures": []}\n')
    pr.publish("a broken root on main")
    run = pr.base.run_like(median_ns=45_000)
    pr.add_record(run)
    pr.add_envelope(run, envelope(run))
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    assert reviewed.lint_codes == ["bad-attestation"]
    assert reviewed.document["lints"][0]["message"].startswith("the base's registry/trust/root.json: $.signed.")


def _rerun_envelope(pr: Pr, verdict: str, ratio: float, key: Any) -> dict[str, Any]:
    mine = pr.base.run_like(median_ns=int(40_000 * ratio))
    predicate = {"runDigest": canon.record_digest(mine), "ratio": ratio, "verdict": verdict}
    return envelope(pr.base.run, "rerun", key, predicate)


def _evidence(pr: Pr) -> str:
    registry = pr.registry
    head = pr.repo.head.commit.hexsha
    root = registry.git.read_file("main", "registry/trust/root.json")
    digest = canon.record_digest(pr.base.run)
    source = HeadEvidence(registry, head, root, Policy(), lambda d: registry.load(d))
    return source([digest])[digest]


def test_head_evidence_from_committed_reruns_only(pr: Pr) -> None:
    assert _evidence(pr) == "reported"  # a submission does not move the level
    pr.add_envelope(pr.base.run, _rerun_envelope(pr, "agrees", 1.03, VERIFIER_KEY))
    assert _evidence(pr) == "reported"  # in the working tree only: the review reads git
    pr.commit()
    assert _evidence(pr) == "verified"
    pr.add_envelope(pr.base.run, _rerun_envelope(pr, "disagrees", 1.4, VERIFIER_KEY))
    pr.commit()
    assert _evidence(pr) == "disputed"


def test_head_evidence_ignores_community_reruns(pr: Pr) -> None:
    pr.add_envelope(pr.base.run, _rerun_envelope(pr, "agrees", 1.0, SUBMITTER_KEY))
    pr.commit()
    assert _evidence(pr) == "reported"


def test_a_pr_without_runs_builds_no_leaderboards(pr: Pr) -> None:
    pr.add_envelope(pr.base.run, envelope(pr.base.run, "review", SUBMITTER_KEY, {"note": "reproduced locally"}))
    pr.commit()
    report = review(pr.registry, "main")
    assert report.ok
    assert report.leaderboards == []
    assert not list((pr.root / ".kictl").glob("index*"))  # the query index was not needed
