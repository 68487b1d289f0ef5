"""``kictl review`` lints a record whose stated figures are not what its own evidence gives (issue 41).

A latency statistic against the run's kept samples (``timing-contradicts-samples``); an energy figure against
its trials' watts × time (``energy-contradicts-trials``); each message names the statistic or the check with
the stated and the derived figure.  An honest record, whose statistics ``kictl bench`` derived from its
samples, is not flagged.
"""

from __future__ import annotations

from typing import Any

from kictl.bench.worker.timing import summarize
from tests.conftest import RunCli
from tests.review.conftest import Pr, envelope, run_review

LIAR = [500_000, 510_000, 517_000, 530_000, 540_000] * 4  # median 517 µs


def _timing(samples: list[int], **stated: int) -> dict[str, Any]:
    return {"latencyNs": {**summarize(samples), **stated}, "samples": samples, "primaryStatistic": "median"}


def _codes(document: dict[str, Any], code: str) -> list[str]:
    return sorted(lint["message"] for lint in document["lints"] if lint["code"] == code)


def test_a_median_that_contradicts_its_samples_is_linted_with_both_figures(cli: RunCli, pr: Pr) -> None:
    liar = pr.base.run_like(median_ns=250_000, timing=_timing(LIAR, median=250_000))
    skewed = pr.base.run_like(median_ns=600_000, timing=_timing(LIAR, p90=600_000, stdev=1))
    honest = pr.base.run_like(median_ns=420_000, timing=_timing([410_000, 420_001, 430_003] * 7))
    rounded = pr.base.run_like(median_ns=517_001, timing=_timing(LIAR, median=517_001))  # an integer rounding
    for run in (liar, skewed, honest, rounded):
        pr.add_record(run)
        pr.add_envelope(run, envelope(run))
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    messages = _codes(reviewed.document, "timing-contradicts-samples")
    assert len(messages) == 2, messages
    (median,) = [message for message in messages if message.startswith("median")]
    assert median.startswith("median stated 250 µs (250000 ns), derived 517 µs from its 20 kept samples")
    (other,) = [message for message in messages if message.startswith("p90")]
    assert "p90 stated 600 µs" in other
    assert "stdev stated 1.00 ns" in other


def _energy(board_watts: float, idle_watts: float, ns_per_call: int, calls: int = 100) -> dict[str, Any]:
    """An energy member whose figures follow from the watts and the time, as kictl bench computes them."""
    per_call = ns_per_call * calls / calls
    joules = max(0.0, board_watts - idle_watts) * per_call / 1e9
    board = board_watts * per_call / 1e9
    trial = {
        "calls": calls, "loopNs": ns_per_call * calls, "joulesPerCall": joules, "boardJoulesPerCall": board,
        "boardWatts": board_watts, "idleWatts": idle_watts, "windowMs": 700.0, "counterSteps": 8,
        "uncertainty": 0.004,
    }  # fmt: skip
    return {
        "counter": "nvmlDeviceGetTotalEnergyConsumption", "joulesPerCall": joules, "boardJoulesPerCall": board,
        "averageWatts": board_watts, "idleWatts": idle_watts, "nsPerCall": ns_per_call, "spread": 0.0,
        **({"callsPerJoule": 1 / joules} if joules > 0 else {}), "counterPeriodMs": 100.0,
        "counterPeriodRangeMs": [97.0, 103.0], "counterUnitMillijoules": 1, "uncertainty": 0.004,
        "powerLimitMilliwatts": 700_000,
        "trials": [trial, dict(trial), dict(trial)],
    }  # fmt: skip


def test_an_energy_claim_off_by_ten_to_the_five_is_linted_with_the_check_named(cli: RunCli, pr: Pr) -> None:
    # 600 W against 150 W idle for 200 µs a call: 90 mJ above idle, 120 mJ on the board (a 700 W board allows 140)
    honest = pr.base.run_like(median_ns=200_000, energy=_energy(600.0, 150.0, 200_000))
    stated = _energy(600.0, 150.0, 200_000)
    stated["joulesPerCall"], stated["callsPerJoule"] = 1e-6, 1e6  # the run's figure only: 1 µJ
    claimed = pr.base.run_like(median_ns=201_000, energy=stated)
    forged = _energy(600.0, 150.0, 200_000)
    for trial in [forged, *forged["trials"]]:  # every figure but the watts and the time: 1 µJ
        trial["joulesPerCall"] = 1e-6
    forged["callsPerJoule"] = 1e6
    trials = pr.base.run_like(median_ns=202_000, energy=forged)
    idle = pr.base.run_like(median_ns=203_000, energy=_energy(150.0, 150.0, 200_000))  # nothing above idle
    for run in (honest, claimed, trials, idle):
        pr.add_record(run)
        pr.add_envelope(run, envelope(run))
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    messages = _codes(reviewed.document, "energy-contradicts-trials")
    by_check: dict[str, list[str]] = {}
    for message in messages:
        by_check.setdefault(message.split(":", 1)[0], []).append(message)
    assert sorted(by_check) == ["energyFromTrials", "energyPowerTimesTime", "energyTrials"], messages
    assert len(by_check["energyTrials"]) == 1  # only the run whose trials were edited
    assert "trial 1 joulesPerCall stated 1e-06 J, derived 0.09 J" in by_check["energyTrials"][0]
    assert len(by_check["energyFromTrials"]) == 2  # neither figure is the median of its trials' watts × time
    assert "joulesPerCall stated 1e-06 J, derived 0.09 J" in by_check["energyFromTrials"][0]
    assert len(by_check["energyPowerTimesTime"]) == 2  # both say 1 µJ where 450 W × 200 µs is 90 mJ
    assert all("derived 0.09 J" in message for message in by_check["energyPowerTimesTime"])
    # the derived figures of the three lie within the bounds; the run that drew no more than idle does not
    bounds = _codes(reviewed.document, "energy-out-of-bounds")
    assert [message.split(":", 1)[0] for message in bounds] == ["energyAboveFloor", "energyAboveIdle"], bounds
    assert bounds[1].startswith("energyAboveIdle: 0 J per call above idle"), bounds
    paths = {lint["path"] for lint in reviewed.document["lints"] if lint["code"] == "energy-out-of-bounds"}
    assert len(paths) == 1
