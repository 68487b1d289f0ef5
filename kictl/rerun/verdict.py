"""The verdict of a rerun: does the original's number hold up on a controlled machine? (DESIGN §5, §10)

``judge`` compares the rerun's BenchmarkRun with the original's on the
original protocol's primary statistic.  ``ratio`` is the rerun's latency over
the original's (above 1: the original claimed to be faster than the rerun
found), rounded to six significant digits, the value the attestation states.
The test is one-sided: a claim is disputed only by a rerun *slower* than it.
With ``slower = ratio - 1`` and ``t`` the policy's ``rerunTolerance``:

* ``failed``: the rerun did not pass (its status says why: wrong results on
  fresh seeds, a crash, a timeout, a failed integrity check).
* ``agrees``: the rerun passed and ``slower <= t``, including every rerun
  faster than claimed, however much faster: a faster machine, a quieter
  moment or a better driver is no evidence against the author.  This is
  exactly the test ``kictl.trust`` applies to a verifier's signed ratio, so a
  signed verdict always means what it says.
* ``inconclusive``: ``t < slower <= t + min(n, t)`` where ``n`` is the noise
  of both runs, ``sqrt(s_rerun² + s_original²)``, each ``s`` half the run's
  p10-p90 range over its median: the difference is within the noise the two
  runs showed, so neither agreement nor a dispute can be claimed.  The
  allowance is capped at ``t``, and it can only turn a dispute into
  ``inconclusive`` (never signed), never into agreement: the original's spread
  is a claim, so a run that claims a wide spread can at most avoid a verdict,
  within ``2t``.  Also ``inconclusive``: a forced rerun on another GPU or
  comparability family, and a workload this machine could not judge.  An
  inconclusive result is never signed: the ``rerun`` predicate has no such
  verdict.
* ``disagrees``: slower beyond both.
"""

from __future__ import annotations

import math
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
    slower = ratio - 1.0
    if slower <= tolerance:
        if slower < -tolerance:
            return verdict("agrees", f"the rerun is {-slower:.1%} faster than claimed (a faster rerun never disputes)")
        return verdict("agrees", f"within +{tolerance:.0%}")
    noise = math.hypot(spread or 0.0, original_spread or 0.0)
    allowance = min(noise, tolerance)
    if slower <= tolerance + allowance:
        return verdict(
            "inconclusive",
            f"{slower:.1%} slower, beyond +{tolerance:.0%} but within both runs' noise of ±{allowance:.1%}",
        )
    return verdict("disagrees", f"the rerun is {slower:.1%} slower than claimed (tolerance +{tolerance:.0%})")
