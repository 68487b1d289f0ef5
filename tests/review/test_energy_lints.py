"""``kictl review`` rejects an energy run outside its physical bounds, with the check named (issue 31)."""

from __future__ import annotations

from typing import Any

from tests.conftest import RunCli
from tests.review.conftest import Pr, envelope, run_review


def _energy(joules: float, board: float, ns_per_call: int) -> dict[str, Any]:
    """An energy member whose figures agree with one another (kictl.derived): the idle draw is what the board drew
    beyond ``joules`` per call."""
    watts, idle = board / ns_per_call * 1e9, (board - joules) / ns_per_call * 1e9
    joules = max(0.0, watts - idle) * (ns_per_call * 100 / 100) / 1e9  # as kictl bench computes it
    board = watts * (ns_per_call * 100 / 100) / 1e9
    trial = {
        "calls": 100, "loopNs": ns_per_call * 100, "joulesPerCall": joules, "boardJoulesPerCall": board,
        "boardWatts": watts, "idleWatts": idle, "windowMs": 700.0, "counterSteps": 8, "uncertainty": 0.004,
    }  # fmt: skip
    return {
        "counter": "nvmlDeviceGetTotalEnergyConsumption", "joulesPerCall": joules, "boardJoulesPerCall": board,
        "averageWatts": watts, "idleWatts": idle, "nsPerCall": ns_per_call, "spread": 0.0,
        "counterPeriodMs": 100.0, "counterPeriodRangeMs": [97.0, 103.0], "counterUnitMillijoules": 1,
        "uncertainty": 0.004, "powerLimitMilliwatts": 700_000, "callsPerJoule": 1 / joules,
        "trials": [trial, trial, trial],
    }  # fmt: skip


def test_energy_runs_outside_their_bounds_fail_review_with_the_check_named(cli: RunCli, pr: Pr) -> None:
    # m128 of gemm_n4096_k4096: 35.7 MB and 4.3 GFLOP of bf16 at least 0.5 mJ; at 50 µs a call a 700 W board
    # draws at most 35 mJ
    honest = pr.base.run_like(median_ns=60_000, energy=_energy(0.012, 0.018, 50_000))
    forged = pr.base.run_like(median_ns=61_000, energy=_energy(1e-7, 0.006, 50_000))
    greedy = pr.base.run_like(median_ns=62_000, energy=_energy(0.030, 0.050, 50_000))
    for run in (honest, forged, greedy):
        pr.add_record(run)
        pr.add_envelope(run, envelope(run))
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    lints = [lint for lint in reviewed.document["lints"] if lint["code"] == "energy-out-of-bounds"]
    messages = sorted(lint["message"] for lint in lints)
    assert len(messages) == 2, messages
    assert messages[0].startswith("energyAboveFloor: 1e-07 J per call is below the floor of ")
    assert messages[1].startswith("energyBelowCeiling: 0.05 J per call on the board is above the power limit")
