"""The verdict of a rerun: does the original's number hold up on a controlled machine? (DESIGN §5, §10)

``judge`` compares the rerun's BenchmarkRun with the original's on the
original protocol's primary statistic.  ``ratio`` is the rerun's latency over
the original's (above 1: the original claimed to be faster than the rerun
found), rounded to six significant digits, the value the attestation states.
With ``d = |ratio - 1|`` and ``t`` the policy's ``rerunTolerance``:

* ``failed``: the rerun did not pass (its status says why: wrong results on
  fresh seeds, a crash, a timeout, a failed integrity check).
* ``agrees``: the rerun passed and ``d <= t``.  This is exactly the test
  ``kictl.trust`` applies to a verifier's ``agrees`` (an ``agrees`` beyond the
  tolerance would count as a dispute), so a signed verdict always means what
  it says.
* ``inconclusive``: ``t < d <= t + min(s, t)`` where ``s`` is the rerun's own
  spread (half the p10-p90 range over the median): the difference is within
  the noise this machine showed, so neither agreement nor a dispute can be
  claimed.  The allowance is the *rerun's* noise only, measured by the
  verifier: the original's spread is a claim and is never allowed to widen
  anything; and it is capped at ``t``, so a deliberately noisy
  implementation cannot turn every dispute into "inconclusive".  Also
  ``inconclusive``: a forced rerun on another GPU or comparability family,
  and a workload this machine could not judge.  An inconclusive result is
  never signed: the ``rerun`` predicate has no such verdict.
* ``disagrees``: beyond both, faster or slower.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from kictl.records import BenchmarkRunSpec

Verdict: TypeAlias = Literal["agrees", "disagrees", "failed", "inconclusive"]
VERDICTS: tuple[str, ...] = ("agrees", "disagrees", "failed", "inconclusive")
#: Verdicts a ``rerun`` attestation can carry (``kictl.trust.RerunPredicate``).
SIGNABLE: tuple[str, ...] = ("agrees", "disagrees", "failed")


@dataclass(frozen=True, slots=True)
class Judgement:
    """A verdict and the numbers behind it."""

    verdict: Verdict
    ratio: float | None
    statistic: str
    original_ns: int
    rerun_ns: int | None
    tolerance: float
    rerun_spread: float | None
    original_spread: float | None
    reason: str


def _spread(spec: BenchmarkRunSpec) -> float | None:
    """Half the p10-p90 range over the median, when the run states them."""
    if spec.timing is None:
        return None
    latency = spec.timing.latency_ns
    if latency.p10 is None or latency.p90 is None or not latency.median:
        return None
    return max(0.0, (latency.p90 - latency.p10) / (2 * latency.median))


def _round(value: float) -> float:
    return float(f"{value:.6g}")


def judge(
    original: BenchmarkRunSpec,
    rerun: BenchmarkRunSpec | None,
    *,
    tolerance: float,
    comparable: bool = True,
    missing: str = "no rerun was made",
) -> Judgement:
    """The verdict of ``rerun`` on ``original``; ``comparable`` is false for a forced rerun.

    ``original`` must have passed (``job.build_job`` refuses the others).
    """
    assert original.timing is not None
    statistic = original.timing.primary_statistic
    original_ns = original.timing.primary_ns()
    original_spread = _spread(original)
    if rerun is None:
        return Judgement("inconclusive", None, statistic, original_ns, None, tolerance, None, original_spread, missing)
    rerun_ns = getattr(rerun.timing.latency_ns, statistic) if rerun.timing is not None else None
    ratio = _round(rerun_ns / original_ns) if rerun_ns and original_ns else None
    spread = _spread(rerun)

    def verdict(kind: Verdict, reason: str) -> Judgement:
        return Judgement(kind, ratio, statistic, original_ns, rerun_ns, tolerance, spread, original_spread, reason)

    if not comparable:
        return verdict("inconclusive", "forced past a refusal: another GPU or comparability family")
    if rerun.status != "passed":
        detail = (rerun.status_detail or "").strip().splitlines()
        return verdict("failed", f"{rerun.status}: {detail[0][:300]}" if detail else rerun.status)
    if ratio is None:
        return verdict("inconclusive", f"the rerun has no {statistic} to compare")
    distance = abs(ratio - 1.0)
    if distance <= tolerance:
        return verdict("agrees", f"within ±{tolerance:.0%}")
    allowance = min(spread or 0.0, tolerance)
    if distance <= tolerance + allowance:
        return verdict(
            "inconclusive",
            f"{distance:.1%} off, beyond ±{tolerance:.0%} but within the rerun's own spread of ±{allowance:.1%}",
        )
    direction = "slower" if ratio > 1 else "faster"
    return verdict("disagrees", f"the rerun is {distance:.1%} {direction} than claimed (tolerance ±{tolerance:.0%})")
