"""Leaderboard hints in review, through the real kictl.rank over the query index (DESIGN §6, issue 7).

One PR branch per hint: ``new-first`` (with its margin, and the first #1 of a
new group), ``rank-change`` (a reorder under the same #1, a tie within noise),
``rerun-suggested`` (a new #1 more than 20% ahead of a record a verifier's rerun
made ``verified``, with a real rerun attestation) and ``stale-group``.  The base
(conftest) holds torch_matmul on m128/H200 at 40.0 µs (noise 125 ns from its
10-90 % band); what the base needs beyond that is committed on ``main`` first.
"""

from __future__ import annotations

from typing import Any

import pytest

from kictl import canon, rank
from tests import factories
from tests.conftest import RunCli
from tests.review.conftest import (
    SUBMITTER_KEY,
    VERIFIER_KEY,
    Pr,
    Reviewed,
    assert_markdown_renders,
    envelope,
    run_review,
)

GROUP = "gemm_n4096_k4096 · m128 · H200 · kictl-cuda-events · median"


def _implementation(pr: Pr, name: str) -> dict[str, Any]:
    raw = factories.implementation(canon.record_digest(pr.base.definition), name=name)
    pr.add_record(raw)
    return raw


def _signed_run(
    pr: Pr, median_ns: int, implementation: dict[str, Any] | None = None, workload: str = "m128", **changes: Any
) -> dict[str, Any]:
    if implementation is not None:
        changes["implementationDigest"] = canon.record_digest(implementation)
    run = pr.base.run_like(workload=workload, median_ns=median_ns, **changes)
    pr.add_record(run)
    pr.add_envelope(run, envelope(run))
    return run


def _key(pr: Pr, workload: str = "m128", gpu: str = "H200") -> str:
    workload_digest = canon.record_digest(pr.base.workloads[workload])
    return rank.comparison_key(workload_digest, gpu, "kictl-cuda-events", "median")


def _passes_with(reviewed: Reviewed, hints: list[str]) -> None:
    assert reviewed.exit_code == 0, reviewed.json_result.output
    assert reviewed.lint_codes == [], reviewed.json_result.output
    assert reviewed.hint_codes == hints, reviewed.json_result.output
    assert reviewed.document["notChecked"] == []


def test_new_first_with_its_margin_and_table(cli: RunCli, pr: Pr) -> None:
    triton = _implementation(pr, "triton_tiled")
    run = _signed_run(pr, 30_000, triton)
    pr.commit()
    reviewed = run_review(cli, pr)
    _passes_with(reviewed, ["new-first"])
    hint = reviewed.document["hints"][0]
    assert hint["message"] == (
        f"triton_tiled is the new #1 of {GROUP}: 30.0 µs, 1.33x faster than torch_matmul (40.0 µs)"
    )
    assert hint["group"] == _key(pr)
    (group,) = reviewed.document["leaderboards"]
    assert group["key"] == _key(pr)
    assert (group["definition"], group["workload"], group["gpu"]) == ("gemm_n4096_k4096", "m128", "H200")
    assert group["newFirst"] is True
    assert group["margin"] == pytest.approx(40_000 / 30_000)
    assert group["before"]["run"] == canon.record_digest(pr.base.run)
    assert group["after"]["run"] == canon.record_digest(run)
    assert group["after"]["evidence"] == "reported"
    assert [(m["implementation"], m["beforeRank"], m["afterRank"]) for m in group["moves"]] == [
        ("triton_tiled", None, 1),
        ("torch_matmul", 1, 2),
    ]
    markdown = reviewed.markdown
    assert assert_markdown_renders(markdown) == 2  # the hints and the group's table
    assert f"**{GROUP.replace('_', chr(92) + '_')}** (group `{_key(pr)}`)" in markdown
    assert "| `triton_tiled` | - | - | #1 | 30.0 µs |" in markdown
    assert "| `torch_matmul` | #1 | 40.0 µs | #2 | 40.0 µs |" in markdown
    text = cli("review", "--registry", pr.root, "--base", "main")
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    assert all(len(line) <= 100 for line in lines), lines
    assert lines[lines.index("leaderboards:") + 2 :] == [
        "          - -> #1              - -> 30.0 µs     triton_tiled",
        "         #1 -> #2        40.0 µs -> 40.0 µs     torch_matmul",
    ]


def test_first_record_of_a_new_group(cli: RunCli, pr: Pr) -> None:
    _signed_run(pr, 100_000, workload="m512")
    pr.commit()
    reviewed = run_review(cli, pr)
    _passes_with(reviewed, ["new-first"])
    assert reviewed.document["hints"][0]["message"] == (
        "torch_matmul is the first #1 of gemm_n4096_k4096 · m512 · H200 · kictl-cuda-events · median: 100 µs"
    )
    assert reviewed.document["hints"][0]["group"] == _key(pr, "m512")


def test_faster_run_of_the_same_implementation_is_a_new_first(cli: RunCli, pr: Pr) -> None:
    _signed_run(pr, 38_000)
    pr.commit()
    reviewed = run_review(cli, pr)
    _passes_with(reviewed, ["new-first"])
    assert reviewed.document["hints"][0]["message"].endswith("1.05x faster than torch_matmul (40.0 µs)")
    (group,) = reviewed.document["leaderboards"]
    assert [(m["beforeNs"], m["afterNs"]) for m in group["moves"]] == [(40_000, 38_000)]


def test_rank_change_under_the_same_first(cli: RunCli, pr: Pr) -> None:
    slow = _implementation(pr, "slow_kernel")
    _signed_run(pr, 60_000, slow)
    pr.publish()
    mid = _implementation(pr, "mid_kernel")
    _signed_run(pr, 50_000, mid)
    pr.commit()
    reviewed = run_review(cli, pr)
    _passes_with(reviewed, ["rank-change"])
    assert reviewed.document["hints"][0]["message"] == f"2 rank changes in {GROUP}; #1 stays torch_matmul"
    (group,) = reviewed.document["leaderboards"]
    assert group["newFirst"] is False
    assert [(m["implementation"], m["beforeRank"], m["afterRank"]) for m in group["moves"]] == [
        ("mid_kernel", None, 2),
        ("slow_kernel", 2, 3),
    ]


def test_a_tie_within_noise_shares_the_first_rank(cli: RunCli, pr: Pr) -> None:
    twin = _implementation(pr, "twin_kernel")
    _signed_run(pr, 40_100, twin)  # 100 ns slower: inside the 125 ns noise of both runs
    pr.commit()
    reviewed = run_review(cli, pr)
    _passes_with(reviewed, ["rank-change"])
    assert reviewed.document["hints"][0]["message"] == f"1 rank change in {GROUP}; #1 stays torch_matmul"
    (group,) = reviewed.document["leaderboards"]
    assert [(m["implementation"], m["afterRank"]) for m in group["moves"]] == [("twin_kernel", 1)]


def _rerun(pr: Pr, verdict: str, ratio: float, key: Any) -> None:
    """A rerun attestation about the base's run, committed on main."""
    mine = pr.base.run_like(median_ns=int(40_000 * ratio))  # the rerunner's own run (not filed)
    predicate = {"runDigest": canon.record_digest(mine), "ratio": ratio, "verdict": verdict}
    pr.add_envelope(pr.base.run, envelope(pr.base.run, "rerun", key, predicate))
    pr.publish("a rerun of torch_matmul on m128")


@pytest.mark.parametrize(
    ("rerun", "new_ns", "evidence", "hints"),
    [
        (("agrees", 1.02, VERIFIER_KEY), 30_000, "verified", ["new-first", "rerun-suggested"]),
        (("agrees", 1.02, VERIFIER_KEY), 35_000, "verified", ["new-first"]),  # 14% ahead: under 20%
        (None, 30_000, "reported", ["new-first"]),
        (("agrees", 1.02, SUBMITTER_KEY), 30_000, "reported", ["new-first"]),  # a community rerun
        # 50% slower than claimed, beyond rerunTolerance: disputed, and still on the board, labelled
        (("agrees", 1.5, VERIFIER_KEY), 30_000, "disputed", ["new-first"]),
    ],
    ids=["verified", "verified-small-lead", "unverified", "community-rerun", "disputed"],
)
def test_rerun_suggested_for_a_big_lead_over_a_verified_record(
    cli: RunCli, pr: Pr, rerun: tuple[str, float, Any] | None, new_ns: int, evidence: str, hints: list[str]
) -> None:
    if rerun is not None:
        _rerun(pr, *rerun)
    triton = _implementation(pr, "triton_tiled")
    _signed_run(pr, new_ns, triton)
    pr.commit()
    reviewed = run_review(cli, pr)
    _passes_with(reviewed, hints)
    (group,) = reviewed.document["leaderboards"]
    assert group["before"]["evidence"] == evidence
    if "rerun-suggested" in hints:
        assert reviewed.document["hints"][1]["message"] == (
            f"triton_tiled is 33% ahead of the verified record of torch_matmul in {GROUP}: "
            "ask a verifier for a rerun before trusting it"
        )
        assert reviewed.document["hints"][1]["group"] == _key(pr)


@pytest.mark.parametrize(
    ("workload", "median_ns", "gpu", "hints"),
    [
        ("m128", 45_000, "H200", ["stale-group"]),  # same definition and GPU: m512's stale #1 is worth a run
        ("m512", 800_000, "H200", ["new-first"]),  # the PR refreshes m512 itself
        ("m128", 45_000, "B200", ["new-first"]),  # another GPU: its first #1, and no H200 group to refresh
    ],
    ids=["could-refresh", "refreshes", "other-gpu"],
)
def test_stale_group_the_pr_could_refresh(
    cli: RunCli, pr: Pr, workload: str, median_ns: int, gpu: str, hints: list[str]
) -> None:
    _signed_run(pr, 900_000, workload="m512", observedAt="2024-01-05T09:00:00.000Z")
    pr.publish("an old result")
    changes: dict[str, Any] = {}
    if gpu != "H200":
        environment = factories.environment(gpu)
        pr.add_record(environment)
        changes["environmentDigest"] = canon.record_digest(environment)
    _signed_run(pr, median_ns, workload=workload, **changes)
    pr.commit()
    reviewed = run_review(cli, pr)
    _passes_with(reviewed, hints)
    if hints == ["stale-group"]:
        hint = reviewed.document["hints"][0]
        assert hint["message"] == (
            "the #1 of gemm_n4096_k4096 · m512 · H200 (torch_matmul observed 2024-01-05) is stale; "
            "a run of this workload on this GPU would refresh it"
        )
        assert hint["group"] == _key(pr, "m512")
        assert reviewed.document["leaderboards"] == []


def test_a_verifiers_own_rerun_filed_in_the_pr_is_not_a_contender(cli: RunCli, pr: Pr) -> None:
    """A PR that files a verifier's rerun (attestation and the rerun's own run) shows no new #1.

    The rerun read 38.0 µs against torch_matmul's 40.0 µs (ratio 0.95, agrees): ranked as a run of its own it
    would be a new #1; it is evidence that makes the 40.0 µs record verified.
    """
    mine = pr.base.run_like(median_ns=38_000)
    pr.add_record(mine)
    predicate = {"runDigest": canon.record_digest(mine), "ratio": 0.95, "verdict": "agrees"}
    pr.add_envelope(pr.base.run, envelope(pr.base.run, "rerun", VERIFIER_KEY, predicate))
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 0, reviewed.json_result.output
    assert reviewed.lint_codes == [], reviewed.json_result.output
    assert "new-first" not in reviewed.hint_codes, reviewed.json_result.output
    for group in reviewed.document["leaderboards"]:
        assert all(move.get("afterNs") != 38_000 for move in group["moves"]), group
