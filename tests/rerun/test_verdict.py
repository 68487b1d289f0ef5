"""The verdict rules, on hand-made runs: agrees, disagrees both ways, inconclusive within capped noise, failed."""

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
    assert (judged.verdict == "agrees") == trust._rerun_agrees(predicate, 0.1)


@pytest.mark.parametrize(("rerun_ns", "word"), [(1300, "slower"), (700, "faster")])
def test_beyond_it_disagrees_either_way(rerun_ns: int, word: str) -> None:
    judged = judge(run(1000), run(rerun_ns, p10=rerun_ns - 5, p90=rerun_ns + 5), tolerance=0.1)
    assert judged.verdict == "disagrees"
    assert word in judged.reason


def test_inside_the_reruns_own_noise_it_is_inconclusive() -> None:
    noisy = run(1150, p10=1000, p90=1300)  # spread ±13%
    assert judge(run(1000), noisy, tolerance=0.1).verdict == "inconclusive"


def test_the_noise_allowance_is_capped_and_never_the_originals() -> None:
    very_noisy = run(1250, p10=100, p90=5000)  # a rerun that spreads ±196% widens by 10% at most
    assert judge(run(1000), very_noisy, tolerance=0.1).verdict == "disagrees"
    claimed_noisy = run(1000, p10=10, p90=90_000)  # the original's claimed spread widens nothing
    assert judge(claimed_noisy, run(1300, p10=1299, p90=1301), tolerance=0.1).verdict == "disagrees"


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
