"""The energy method's arithmetic (kictl/bench/judge/energy.py) and its physical bounds (kictl/families/energy.py).

``tests/assets/energy/h200/`` holds NVML counter traces recorded on the lent H200 by ``benchmarks/energy.py``
(2026-12-02, device call 1 and 2: the raw readings of the idle window and the three loops of one run each),
with the ``energy`` member that ``kictl bench --measure energy`` published for the same run
(``expected.json``).  Recomputing that member from the trace is the known-answer test; the same traces,
re-encoded, test the counter's wrap, a reset and a jump.  ``synthetic_trace`` builds a trace with
MEASURED.md's figures (steps every 97-103 ms, idle 85.6 W, a 35 µs kernel at 562 W).
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest

from kictl.bench.judge import energy
from kictl.families import Work
from kictl.families.energy import CEILING_CHECK, FLOOR_CHECK, bounds, check_record, energy_floor

TRACES = Path(__file__).resolve().parents[1] / "assets" / "energy" / "h200"
EXPECTED: dict[str, Any] = json.loads((TRACES / "expected.json").read_text())
RECORDED = sorted(EXPECTED)


def _polls(pairs: list[list[int]]) -> list[energy.Poll]:
    return [energy.Poll(t, mj) for t, mj in pairs]


def _recompute(document: dict[str, Any], modulus: int = energy.COUNTER_MODULUS) -> energy.Figure:
    idle_trace = _polls(document["idle"])
    idle = energy.power_between(
        energy.steps(idle_trace, modulus), idle_trace[0].t_ns, idle_trace[-1].t_ns, "idle window"
    )
    trials = []
    steps = list(energy.steps(idle_trace, modulus))
    for loop, (start, end) in zip(document["loops"], document["loopSpans"], strict=True):
        trace = _polls(loop)
        trials.append(
            energy.trial_from_trace(trace, idle, start, end, document["calls"], int(energy.SETTLE_S * 1e9), modulus)
        )
        steps += energy.steps(trace, modulus)
    return energy.summarize(trials, sorted(steps, key=lambda step: step.t_ns), 700_000)


@pytest.mark.parametrize("name", RECORDED)
def test_a_recorded_h200_run_is_recomputed_from_its_trace(name: str) -> None:
    expected = EXPECTED[name]["energy"]
    figure = _recompute(json.loads((TRACES / name).read_text()))
    assert figure.joules_per_call == pytest.approx(expected["joulesPerCall"], rel=1e-12)
    assert figure.board_joules_per_call == pytest.approx(expected["boardJoulesPerCall"], rel=1e-12)
    assert figure.idle_watts == pytest.approx(expected["idleWatts"], rel=1e-12)
    assert figure.average_watts == pytest.approx(expected["averageWatts"], rel=1e-12)
    assert figure.spread == pytest.approx(expected["spread"], rel=1e-9, abs=1e-12)
    published = energy.figure_json(figure)
    for trial, want in zip(published["trials"], expected["trials"], strict=True):
        assert trial["joulesPerCall"] == pytest.approx(want["joulesPerCall"], rel=1e-12)
        assert trial["counterSteps"] == want["counterSteps"]


@pytest.mark.parametrize("name", RECORDED)
def test_the_h200_counter_steps_every_100_ms(name: str) -> None:
    document = json.loads((TRACES / name).read_text())
    steps = energy.steps(_polls(document["idle"]))
    period = energy.update_period(steps)
    assert 97 <= period.median_ms <= 103  # MEASURED.md: 97-103 ms
    # an idle window's steps are each ~100 ms of the idle draw: about 12 J at 120-125 W
    sizes = [b.mj - a.mj for a, b in itertools.pairwise(steps)]
    assert all(8_000 < size < 16_000 for size in sizes), sizes


def _wrapped(document: dict[str, Any], modulus: int) -> dict[str, Any]:
    """The same readings on a counter of ``modulus`` that wraps in the middle of the second loop."""
    middle = document["loops"][1][len(document["loops"][1]) // 2][1]
    offset = modulus - middle  # the reading at the middle of the second loop becomes 0: the counter wrapped
    shifted = {**document}
    shifted["idle"] = [[t, (mj + offset) % modulus] for t, mj in document["idle"]]
    shifted["loops"] = [[[t, (mj + offset) % modulus] for t, mj in loop] for loop in document["loops"]]
    return shifted


def test_a_counter_that_wraps_mid_loop_gives_the_same_figure() -> None:
    name = RECORDED[0]
    document = json.loads((TRACES / name).read_text())
    modulus = 1 << 32
    wrapped = _wrapped(document, modulus)
    values = [mj for loop in wrapped["loops"] for _, mj in loop]
    assert values != sorted(values)  # the encoded counter really goes round
    assert _recompute(wrapped, modulus).joules_per_call == pytest.approx(
        _recompute(document).joules_per_call, rel=1e-12
    )


def test_a_counter_that_goes_back_is_a_reset_not_a_wrap() -> None:
    document = json.loads((TRACES / RECORDED[0]).read_text())
    loop = document["loops"][0]
    broken = [[t, mj if n < len(loop) // 2 else mj - 5_000_000] for n, (t, mj) in enumerate(loop)]
    with pytest.raises(energy.EnergyError, match="went back"):
        energy.steps(_polls(broken))


def test_a_jump_no_board_could_draw_is_refused() -> None:
    document = json.loads((TRACES / RECORDED[0]).read_text())
    loop = document["loops"][0]
    jumped = [[t, mj if n < len(loop) // 2 else mj + 50_000_000] for n, (t, mj) in enumerate(loop)]
    with pytest.raises(energy.EnergyError, match="jumped"):
        energy.steps(_polls(jumped))


def synthetic_trace(
    segments: list[tuple[float, float]], poll_s: float = 0.003, seed: int = 7, start_mj: int = 10**9
) -> list[energy.Poll]:
    """Readings of a counter that steps every 97-103 ms through ``segments`` of (seconds, watts)."""
    rng = random.Random(seed)
    boundaries: list[float] = []
    t = rng.uniform(0, 0.1)
    total = sum(seconds for seconds, _ in segments)
    while t < total:
        boundaries.append(t)
        t += rng.uniform(0.097, 0.103)

    def joules_until(moment: float) -> float:
        done, clock = 0.0, 0.0
        for seconds, watts in segments:
            part = min(seconds, max(0.0, moment - clock))
            done += part * watts
            clock += seconds
        return done

    polls = []
    moment = 0.0
    while moment < total:
        last = max((b for b in boundaries if b <= moment), default=None)
        value = start_mj + (round(joules_until(last) * 1000) if last is not None else 0)
        polls.append(energy.Poll(round(moment * 1e9), value))
        moment += poll_s
    return polls


def test_idle_subtraction_with_measureds_figures() -> None:
    # MEASURED.md: idle 85.6 W; a ~35 us elementwise kernel back to back for 2 s read 19.8 mJ per call at 562 W
    trace = synthetic_trace([(1.2, 85.6), (2.0, 562.0)])
    found = energy.steps(trace)
    idle = energy.power_between(found, 0, int(1.2e9), "idle window")
    calls = round(2.0 / 35.2e-6)
    trial = energy.trial_from_trace(trace, idle, int(1.2e9), int(3.2e9), calls)
    assert idle.watts == pytest.approx(85.6, rel=0.01)
    assert trial.loop.watts == pytest.approx(562.0, rel=0.01)
    assert trial.board_joules_per_call == pytest.approx(19.8e-3, rel=0.01)
    assert trial.joules_per_call == pytest.approx((562.0 - 85.6) * 35.2e-6 * 2.0 / 2.0, rel=0.015)
    assert energy.update_period(found).median_ms == pytest.approx(100, abs=3)
    assert trial.loop.uncertainty < 0.01  # polls every 3 ms over a 1.7 s window


def test_a_loop_below_idle_is_zero_never_negative() -> None:
    trace = synthetic_trace([(1.2, 120.0), (1.5, 110.0)])
    found = energy.steps(trace)
    idle = energy.power_between(found, 0, int(1.2e9))
    trial = energy.trial_from_trace(trace, idle, int(1.2e9), int(2.7e9), 1000)
    assert trial.joules_per_call == 0.0
    assert trial.board_joules_per_call > 0


def test_a_window_shorter_than_the_counters_period_is_refused() -> None:
    trace = synthetic_trace([(1.2, 85.6), (0.35, 562.0)])
    found = energy.steps(trace)
    idle = energy.power_between(found, 0, int(1.2e9))
    with pytest.raises(energy.EnergyError, match="too short for the counter's update period"):
        energy.trial_from_trace(trace, idle, int(1.2e9), int(1.55e9), 1000)
    with pytest.raises(energy.EnergyError, match="too few"):
        energy.update_period(found[:2])


# --------------------------------------------------------------------------- bounds


def test_the_floor_adds_bytes_and_flops_at_the_published_energies() -> None:
    # MEASURED.md's ps64 workload: 811 GFLOP of bf16 attention, 146 MB of K/V
    work = Work(bytes=146_000_000, flops=811_000_000_000, compute_dtype="bfloat16")
    floor, text = energy_floor(work)
    assert floor == pytest.approx(146e6 * 8e-12 + 811e9 * 0.05e-12)
    assert "pJ" in text
    # the board at its 700 W limit for the 1.92 ms call could spend at most 1.34 J; the floor is far below
    assert floor < 0.1 * 700 * 1.92e-3


def test_bounds_name_the_check_that_fails() -> None:
    work = Work(bytes=10_000_000, flops=10_000_000_000, compute_dtype="bfloat16")
    found = bounds(work, 700_000, ns_per_call=100_000)  # 100 us per call: at most 70 mJ on the board
    ok = found.checks(joules_per_call=0.01, board_joules_per_call=0.02)
    assert {ok[FLOOR_CHECK]["result"], ok[CEILING_CHECK]["result"]} == {"passed"}
    too_low = found.checks(joules_per_call=1e-6, board_joules_per_call=0.02)
    assert too_low[FLOOR_CHECK]["result"] == "failed"
    assert "below the floor" in too_low[FLOOR_CHECK]["detail"]
    too_high = found.checks(joules_per_call=0.05, board_joules_per_call=0.08)
    assert too_high[CEILING_CHECK]["result"] == "failed"
    assert "power limit" in too_high[CEILING_CHECK]["detail"]
    unknown = bounds(work, None, 100_000).checks(0.01, 0.02)
    assert unknown[CEILING_CHECK]["result"] == "skipped"


@pytest.mark.parametrize("name", RECORDED)
def test_the_recorded_runs_lie_within_their_bounds(name: str) -> None:
    # the prefill h24 workloads move at most ~0.5 GB and do at most ~0.2 TFLOP: a generous stand-in
    work = Work(bytes=500_000_000, flops=200_000_000_000, compute_dtype="bfloat16")
    checks = check_record(EXPECTED[name]["energy"], work)
    assert all(check["result"] == "passed" for check in checks.values()), checks


def test_a_loop_ten_times_faster_than_its_timed_calls_did_less_work() -> None:
    from kictl.bench.judge.energy_loop import loop_pace

    # the H200's torch_sdpa on b16x_q32_kv1024: 6.4 ms a call in the loop, 11.0 ms timed (cold L2)
    assert loop_pace(6.4e6, [11_000_000, 11_900_000, 10_900_000])[0]
    ok, detail = loop_pace(0.9e6, [11_000_000, 11_900_000, 10_900_000])
    assert not ok
    assert "did less work" in detail
    assert loop_pace(1.0, [])[0]  # nothing to compare with
