"""The verdict rules, on hand-made runs: one-sided (a faster rerun agrees), inconclusive within both runs'
capped noise, failed."""

from __future__ import annotations

from typing import Any

import pytest

from kictl import trust
from kictl.records import BenchmarkRunSpec
from kictl.rerun.verdict import judge

DIGEST = "sha256:" + "ab" * 32


def run(median: int, *, p10: int | None = None, p90: int | None = None, status: str = "passed") -> BenchmarkRunSpec:
    latency: dict[str, Any] = {"median": median}
    if p10 is not None:
        latency |= {"p10": p10, "p90": p90}
    value: dict[str, Any] = {
        "status": status,
        "timing": {"latencyNs": latency, "primaryStatistic": "median"},
        "observedAt": "2026-01-02T03:04:05.006Z",
        "workloadDigest": DIGEST,
        "implementationDigest": DIGEST,
        "protocolDigest": DIGEST,
        "environmentDigest": DIGEST,
    }
    if status != "passed":
        value["statusDetail"] = "round 1: 4096 of 4096 elements differ\nmore"
    return BenchmarkRunSpec.model_validate(value)


def test_within_the_tolerance_agrees() -> None:
    judged = judge(run(1000), run(1090), tolerance=0.1)
    assert (judged.verdict, judged.ratio) == ("agrees", 1.09)


@pytest.mark.parametrize("rerun_ns", range(880, 1121, 4))
def test_agrees_exactly_when_kictl_trust_counts_the_signed_ratio_as_agreement(rerun_ns: int) -> None:
    judged = judge(run(1000), run(rerun_ns, p10=rerun_ns, p90=rerun_ns), tolerance=0.1)
    assert judged.ratio is not None
    predicate = trust.RerunPredicate.model_validate({"runDigest": DIGEST, "ratio": judged.ratio, "verdict": "agrees"})
    assert (judged.verdict == "agrees") == trust.rerun_agrees(predicate, 0.1)


def test_a_rerun_26_percent_slower_disagrees_and_26_percent_faster_agrees() -> None:
    original = run(1000, p10=990, p90=1010)
    slower = judge(original, run(1260, p10=1250, p90=1270), tolerance=0.1)
    assert slower.verdict == "disagrees"
    assert "26.0% slower" in slower.reason
    faster = judge(original, run(740, p10=735, p90=745), tolerance=0.1)
    assert (faster.verdict, faster.ratio) == ("agrees", 0.74)
    assert "26.0% faster" in faster.reason


@pytest.mark.parametrize("rerun_ns", [1, 100, 500, 899])
def test_however_much_faster_a_rerun_is_it_never_disputes(rerun_ns: int) -> None:
    judged = judge(run(1000), run(rerun_ns), tolerance=0.1)
    assert judged.verdict == "agrees"
    assert judged.ratio is not None
    predicate = trust.RerunPredicate.model_validate({"runDigest": DIGEST, "ratio": judged.ratio, "verdict": "agrees"})
    assert trust.rerun_agrees(predicate, 0.1)


def test_a_faster_rerun_an_older_kictl_signed_as_disagrees_counts_as_agreement() -> None:
    predicate = trust.RerunPredicate.model_validate({"runDigest": DIGEST, "ratio": 0.74, "verdict": "disagrees"})
    assert trust.rerun_agrees(predicate, 0.1)
    slower = trust.RerunPredicate.model_validate({"runDigest": DIGEST, "ratio": 1.26, "verdict": "agrees"})
    assert not trust.rerun_agrees(slower, 0.1)  # a signed "agrees" beyond the tolerance is not believed
    failed = trust.RerunPredicate.model_validate({"runDigest": DIGEST, "verdict": "failed"})
    assert not trust.rerun_agrees(failed, 0.1)


def test_inside_both_runs_noise_it_is_inconclusive() -> None:
    noisy = run(1150, p10=1000, p90=1300)  # spread ±13%
    assert judge(run(1000), noisy, tolerance=0.1).verdict == "inconclusive"
    # the original's measured noise counts too: each run ±5%, together ±7.1%, covering 15% against +10%
    assert judge(run(1000, p10=950, p90=1050), run(1150, p10=1093, p90=1208), tolerance=0.1).verdict == "inconclusive"
    assert judge(run(1000, p10=999, p90=1001), run(1150, p10=1149, p90=1151), tolerance=0.1).verdict == "disagrees"


def test_the_noise_allowance_is_capped_and_never_makes_agreement() -> None:
    very_noisy = run(1250, p10=100, p90=5000)  # a rerun that spreads ±196% widens by 10% at most
    assert judge(run(1000), very_noisy, tolerance=0.1).verdict == "disagrees"
    claimed_noisy = run(1000, p10=10, p90=90_000)  # a claimed spread of ±4500% widens by 10% at most
    assert judge(claimed_noisy, run(1300, p10=1299, p90=1301), tolerance=0.1).verdict == "disagrees"
    assert judge(claimed_noisy, run(1150, p10=1149, p90=1151), tolerance=0.1).verdict == "inconclusive"


def test_a_rerun_that_did_not_pass_failed_with_its_status() -> None:
    judged = judge(run(1000), run(1000, status="incorrect_numerical"), tolerance=0.1)
    assert judged.verdict == "failed"
    assert judged.reason == "incorrect_numerical: round 1: 4096 of 4096 elements differ"


def test_a_forced_or_missing_rerun_is_inconclusive() -> None:
    assert judge(run(1000), run(1000), tolerance=0.1, comparable=False).verdict == "inconclusive"
    missing = judge(run(1000), None, tolerance=0.1, missing="no rerun: the reference failed")
    assert (missing.verdict, missing.reason, missing.ratio) == ("inconclusive", "no rerun: the reference failed", None)


def test_the_ratio_is_rounded_to_six_significant_digits() -> None:
    assert judge(run(3), run(1), tolerance=0.1).ratio == 0.333333
