"""The review's seams to kictl.trust and kictl.rank: what review makes of their answers.

Signature verification and ranking are not this module's: until kictl.trust
and kictl.rank are wired into ``review.default_checks``, these tests give the
review stand-ins with the seams' contracts (a verdict per envelope, a
leaderboard diff per PR) and check the lints, hints, Markdown tables and
"not checked" notes the review derives from them, over real PR branches.
The stand-in verifier does NOT verify signatures: it looks the envelope's
keyid up in a table.  Real verification is kictl.trust's and is tested there.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kictl import canon
from kictl.errors import CheckFailed
from kictl.policy import Policy
from kictl.records import StoredRecord
from kictl.review import (
    AttestationVerdict,
    Checks,
    GroupDiff,
    LeaderboardDiff,
    Move,
    ReviewReport,
    StaleGroup,
    Standing,
    claimed_predicate_type,
    render_markdown,
    render_text,
    review,
)
from kictl.store import Registry
from tests.review.conftest import ACTOR, SUBMITTER_KEY, Pr, assert_markdown_renders, envelope, keyid

VERIFIER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
STRANGER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(2, 34)))
SIGNED = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
ROLES = {keyid(SUBMITTER_KEY): ("submitter",), keyid(VERIFIER_KEY): ("verifier",)}


class TableVerifier:
    """A stand-in for kictl.trust's verify_attestation: roles by the envelope's keyid, type as claimed."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes, datetime]] = []

    def __call__(self, data: bytes, subject: StoredRecord, root: bytes, signed_at: datetime) -> AttestationVerdict:
        self.calls.append((subject.digest, root, signed_at))
        hint = json.loads(data)["signatures"][0]["keyid"]
        roles = ROLES.get(hint)
        if roles is None:
            return AttestationVerdict(None, problem=f"signed by key {hint[:12]}, which the trust root does not list")
        return AttestationVerdict(claimed_predicate_type(data), roles)


def _reviewed(pr: Pr, checks: Checks) -> ReviewReport:
    report = review(pr.registry, "main", checks=checks)
    assert_markdown_renders(render_markdown(report))
    for line in render_text(report).splitlines():
        assert len(line) <= 100, line
    return report


def _codes(findings: Sequence[Any]) -> list[str]:
    return [finding.code for finding in findings]


# --------------------------------------------------------------------------- trust


def test_signed_run_passes(pr: Pr) -> None:
    run = pr.base.run_like(median_ns=30_000)
    pr.add_record(run)
    pr.add_envelope(run, envelope(run, "submission", SUBMITTER_KEY))
    pr.commit()
    verifier = TableVerifier()
    report = _reviewed(pr, Checks(verify_attestation=verifier))
    assert _codes(report.lints) == []
    assert "signatures" not in {item.check for item in report.not_checked}
    assert [digest for digest, _, _ in verifier.calls] == [canon.record_digest(run)]


def test_unsigned_run(pr: Pr) -> None:
    pr.add_record(pr.base.run_like(median_ns=30_000))
    pr.commit()
    report = _reviewed(pr, Checks(verify_attestation=TableVerifier()))
    assert _codes(report.lints) == ["unsigned-run"]
    assert report.lints[0].message.startswith("no valid submission attestation by a submitter key")


def test_run_signed_only_by_a_verifier_is_unsigned(pr: Pr) -> None:
    run = pr.base.run_like(median_ns=30_000)
    pr.add_record(run)
    pr.add_envelope(run, envelope(run, "submission", VERIFIER_KEY))
    pr.commit()
    report = _reviewed(pr, Checks(verify_attestation=TableVerifier()))
    assert _codes(report.lints) == ["unsigned-run"]


def test_attestation_that_does_not_verify(pr: Pr) -> None:
    run = pr.base.run_like(median_ns=30_000)
    pr.add_record(run)
    path = pr.add_envelope(run, envelope(run, "submission", STRANGER_KEY))
    pr.commit()
    report = _reviewed(pr, Checks(verify_attestation=TableVerifier()))
    assert _codes(report.lints) == ["bad-attestation"]
    assert report.lints[0].path == path
    assert report.lints[0].message.endswith("which the trust root does not list")


def test_new_attestation_about_a_published_run_is_verified_too(pr: Pr) -> None:
    pr.add_envelope(pr.base.run, envelope(pr.base.run, "review", STRANGER_KEY))
    pr.commit()
    report = _reviewed(pr, Checks(verify_attestation=TableVerifier()))
    assert _codes(report.lints) == ["bad-attestation"]


def test_signing_time_and_root_come_from_history_and_base(pr: Pr) -> None:
    run = pr.base.run_like(median_ns=30_000)
    pr.add_record(run)
    pr.add_envelope(run, envelope(run))
    pr.repo.git.add("-A")
    pr.repo.index.commit("signed run", author=ACTOR, committer=ACTOR, author_date=f"{int(SIGNED.timestamp())} +0000")
    (pr.root / "registry" / "trust" / "root.json").write_text('{"signed": {}, "signatures": []}\n')
    pr.commit("a later commit changes the root; the base's root still judges the signatures")
    verifier = TableVerifier()
    review(pr.registry, "main", checks=Checks(verify_attestation=verifier))
    ((_, root, signed_at),) = verifier.calls
    assert signed_at == SIGNED
    assert root == pr.repo.git.show("main:registry/trust/root.json").encode() + b"\n"


def _change_root(pr: Pr) -> None:
    path = pr.root / "registry" / "trust" / "root.json"
    root = json.loads(path.read_text())
    root["signed"]["version"] = 2
    path.write_bytes(canon.pretty_bytes(root))
    pr.commit()


def test_trust_root_change_without_threshold(pr: Pr) -> None:
    _change_root(pr)
    seen: list[tuple[bytes, bytes]] = []

    def refuse(previous: bytes, new: bytes) -> None:
        seen.append((previous, new))
        raise CheckFailed("version 2 is signed by 0 of the 1 maintainer keys version 1 requires")

    report = _reviewed(pr, Checks(verify_root_update=refuse))
    assert _codes(report.lints) == ["trust-root-threshold"]
    assert report.lints[0].path == "registry/trust/root.json"
    assert json.loads(seen[0][0])["signed"]["version"] == 1
    assert json.loads(seen[0][1])["signed"]["version"] == 2


def test_trust_root_change_with_threshold_passes(pr: Pr) -> None:
    _change_root(pr)
    report = _reviewed(pr, Checks(verify_root_update=lambda previous, new: None))
    assert report.ok


def test_trust_root_change_without_the_seam_is_not_checked(pr: Pr) -> None:
    _change_root(pr)
    report = _reviewed(pr, Checks())
    assert report.ok
    assert [item.check for item in report.not_checked] == ["trust root"]


@pytest.mark.parametrize(("key", "hinted"), [(VERIFIER_KEY, False), (SUBMITTER_KEY, True)])
def test_imported_run_needs_a_verifier_rerun(pr: Pr, key: Ed25519PrivateKey, hinted: bool) -> None:
    run = pr.base.run_like(median_ns=30_000, sourceNative={"source": "flashinfer-bench"})
    pr.add_record(run)
    pr.add_envelope(run, envelope(run, "submission", SUBMITTER_KEY))
    pr.add_envelope(run, envelope(run, "rerun", key))
    pr.commit()
    report = _reviewed(pr, Checks(verify_attestation=TableVerifier()))
    assert _codes(report.lints) == []
    assert _codes(report.hints) == (["source-native-no-rerun"] if hinted else [])
    if hinted:
        assert "no verified rerun attestation by a verifier" in report.hints[0].message


# --------------------------------------------------------------------------- rank


def _standing(name: str, latency_ns: int, rank: int = 1, evidence: str = "reported") -> Standing:
    return Standing(
        implementation=name,
        run="sha256:" + canon.sha256_hex(name.encode()),
        rank=rank,
        latency_ns=latency_ns,
        evidence=evidence,
        observed_at="2026-11-30T07:31:00.000Z",
    )


def _group(before: Standing | None, after: Standing | None, moves: tuple[Move, ...] = ()) -> GroupDiff:
    return GroupDiff(
        key="sha256:" + "c" * 64,
        definition="gemm_n4096_k4096",
        workload="m128",
        gpu="H200",
        comparability="kictl-cuda-events",
        statistic="median",
        before_leader=before,
        after_leader=after,
        moves=moves,
    )


class FixedBoards:
    """A stand-in for kictl.rank's diff of two registry states: the diff it is given."""

    def __init__(self, diff: LeaderboardDiff) -> None:
        self.diff = diff
        self.calls: list[tuple[str, str, Policy, tuple[str, ...]]] = []

    def __call__(
        self, registry: Registry, base: str, head: str, policy: Policy, runs: Sequence[str]
    ) -> LeaderboardDiff:
        self.calls.append((base, head, policy, tuple(runs)))
        return self.diff


def _pr_with_run(pr: Pr) -> str:
    run = pr.base.run_like(median_ns=30_000)
    pr.add_record(run)
    pr.commit()
    return canon.record_digest(run)


def test_new_first_with_its_margin_and_table(pr: Pr) -> None:
    digest = _pr_with_run(pr)
    moves = (
        Move("triton_tiled", None, 1, None, 30_000),
        Move("torch_matmul", 1, 2, 40_000, 40_000),
    )
    boards = FixedBoards(
        LeaderboardDiff(groups=(_group(_standing("torch_matmul", 40_000), _standing("triton_tiled", 30_000), moves),))
    )
    report = _reviewed(pr, Checks(leaderboards=boards))
    assert _codes(report.hints) == ["new-first"]
    assert report.hints[0].message == (
        "triton_tiled is the new #1 of gemm_n4096_k4096 · m128 · H200 · kictl-cuda-events · median: "
        "30.0 µs, 1.33x faster than torch_matmul (40.0 µs)"
    )
    assert report.hints[0].group == "sha256:" + "c" * 64
    ((base, head, policy, runs),) = boards.calls
    assert (base, head) == (report.merge_base, report.head)
    assert runs == (digest,)
    assert policy.stale_after_days == 365
    markdown = render_markdown(report)
    assert assert_markdown_renders(markdown) == 2  # the hints and the group's table
    assert "| `triton_tiled` | - | - | #1 | 30.0 µs |" in markdown
    assert "leaderboards" not in {item.check for item in report.not_checked}


def test_first_record_of_a_new_group(pr: Pr) -> None:
    _pr_with_run(pr)
    boards = FixedBoards(LeaderboardDiff(groups=(_group(None, _standing("triton_tiled", 30_000)),)))
    report = _reviewed(pr, Checks(leaderboards=boards))
    assert _codes(report.hints) == ["new-first"]
    assert report.hints[0].message.startswith("triton_tiled is the first #1 of gemm_n4096_k4096")


@pytest.mark.parametrize(
    ("previous_ns", "evidence", "suggested"),
    [(45_000, "verified", True), (33_000, "verified", False), (45_000, "reported", False)],
)
def test_rerun_suggested_for_a_big_lead_over_a_verified_record(
    pr: Pr, previous_ns: int, evidence: str, suggested: bool
) -> None:
    _pr_with_run(pr)
    group = _group(_standing("torch_matmul", previous_ns, evidence=evidence), _standing("triton_tiled", 30_000))
    report = _reviewed(pr, Checks(leaderboards=FixedBoards(LeaderboardDiff(groups=(group,)))))
    assert _codes(report.hints) == (["new-first", "rerun-suggested"] if suggested else ["new-first"])
    if suggested:
        assert report.hints[1].message.startswith("triton_tiled is 50% ahead of the verified record of torch_matmul")


def test_rank_change_under_the_same_first(pr: Pr) -> None:
    _pr_with_run(pr)
    leader = _standing("cutlass", 20_000)
    moves = (Move("triton_tiled", 3, 2, 35_000, 30_000), Move("torch_matmul", 2, 3, 32_000, 32_000))
    report = _reviewed(pr, Checks(leaderboards=FixedBoards(LeaderboardDiff(groups=(_group(leader, leader, moves),)))))
    assert _codes(report.hints) == ["rank-change"]
    assert report.hints[0].message == (
        "2 rank changes in gemm_n4096_k4096 · m128 · H200 · kictl-cuda-events · median; #1 stays cutlass"
    )


def test_stale_group_the_pr_could_refresh(pr: Pr) -> None:
    _pr_with_run(pr)
    stale = StaleGroup(
        key="sha256:" + "d" * 64,
        definition="gemm_n4096_k4096",
        workload="m2048",
        gpu="H200",
        leader=Standing("torch_matmul", "sha256:" + "e" * 64, 1, 900_000, "reported", True, "2024-01-05T00:00:00.000Z"),
    )
    report = _reviewed(pr, Checks(leaderboards=FixedBoards(LeaderboardDiff(stale=(stale,)))))
    assert _codes(report.hints) == ["stale-group"]
    assert report.hints[0].message == (
        "the #1 of gemm_n4096_k4096 · m2048 · H200 (torch_matmul observed 2024-01-05) is stale; "
        "a run of this workload on this GPU would refresh it"
    )
    assert report.to_json()["hints"][0]["group"] == "sha256:" + "d" * 64
