"""Timers keep every sample in integer ns; statistics are derived once, with known answers."""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch

from kictl.bench.worker import timing
from tests.bench.conftest import cuda_available


def test_quantile_interpolates_between_closest_ranks() -> None:
    ordered = [10.0, 20.0, 30.0, 40.0]
    assert timing.quantile(ordered, 0.0) == 10.0
    assert timing.quantile(ordered, 1.0) == 40.0
    assert timing.quantile(ordered, 0.5) == 25.0
    assert timing.quantile(ordered, 0.1) == pytest.approx(13.0)
    with pytest.raises(ValueError, match="no samples"):
        timing.quantile([], 0.5)


def test_summarize_known_answer() -> None:
    samples = [1200, 1000, 1100, 5000, 1050, 990, 1010, 1020, 1030, 1040]
    assert timing.summarize(samples) == {
        "mean": 1444,
        "median": 1035,
        "min": 990,
        "max": 5000,
        "p10": 999,
        "p90": 1580,
        "stdev": 1251,
    }
    assert timing.summarize([7]) == {"mean": 7, "median": 7, "min": 7, "max": 7, "p10": 7, "p90": 7, "stdev": 0}
    with pytest.raises(ValueError, match="no samples"):
        timing.summarize([])


def test_cpu_timer_measures_one_call_and_hands_back_its_outputs() -> None:
    calls: list[int] = []

    def call() -> list[int]:
        calls.append(len(calls))
        time.sleep(0.001)
        return [len(calls)]

    timer = timing.make_timer("perf_counter_ns", "cpu", 0)
    timer.prepare(call)
    measured = timer.measure(call)
    assert calls == [0]
    assert measured.outputs == [1]
    assert isinstance(measured.ns, int)
    assert measured.ns >= 1_000_000
    assert measured.enqueued_ahead is None
    with pytest.raises(ValueError, match="unknown timer"):
        timing.make_timer("sundial", "cpu", 0)


def test_cpu_timer_reads_the_clock_captured_before_patching(monkeypatch: pytest.MonkeyPatch) -> None:
    timing.bind_originals()
    timer = timing.make_timer("perf_counter_ns", "cpu", 0)
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)
    assert timer.measure(lambda: time.sleep(0.002)).ns >= 2_000_000


def test_median_relative_error_shrinks_with_samples_and_spread() -> None:
    assert timing.median_relative_error([100] * 4) is None
    assert timing.median_relative_error([100] * 50) == 0.0
    noisy = [100 + (n * 37) % 41 for n in range(20)]
    more = noisy * 10
    few = timing.median_relative_error(noisy)
    many = timing.median_relative_error(more)
    assert few is not None
    assert many is not None
    assert 0 < many < few < 0.5


def test_spin_is_twice_the_host_time_within_bounds() -> None:
    assert timing._spin_for([]) == timing.SPIN_DEFAULT_NS
    assert timing._spin_for([900_000, 30_000, 30_000, 40_000]) == 2 * 30_000 + timing.SPIN_MARGIN_NS
    assert timing._spin_for([1, 1, 1]) >= timing.SPIN_MIN_NS
    assert timing._spin_for([10**9, 10**9]) == timing.SPIN_MAX_NS


gpu = pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("name", ["cuda_events", "cuda_graph_replay"])
def test_cuda_timers_hide_launch_latency(name: str) -> None:
    timing.bind_originals()
    a = torch.randn(2048, 2048, device="cuda")
    timer = timing.make_timer(name, "cuda:0", 64 * 1024 * 1024)
    timer.prepare(lambda: a @ a)
    measured = [timer.measure(lambda: a @ a) for _ in range(60)]
    assert sum(bool(m.enqueued_ahead) for m in measured[10:]) >= 45
    assert torch.allclose(measured[-1].outputs, a @ a)


@pytest.mark.gpu
@gpu
def test_the_cupti_timer_settles_in_batches_and_leaves_the_touch_out() -> None:
    """The CUPTI timer's calls settled in one flush read as calls settled one by one, and the harness's read of
    the touch buffer (one kernel in the harness window) is no call's: each call is its one kernel."""
    from kictl.bench.worker.cupti_timer import CuptiCollector

    timing.bind_originals()
    collector = CuptiCollector()
    collector.start()
    try:
        a = torch.randn(4096, 4096, device="cuda")
        timer = timing.make_timer("cupti_device_time", "cuda:0", 64 * 2**20, collector, touch_bytes=256 * 2**20)
        assert timer.touch_view.stride() == (64 * 1024,)
        assert timer.touch_sink.numel() == 256 * 2**20 // (64 * 1024)
        timer.prepare(lambda: a + 1)
        alone = [timer.measure(lambda: a + 1) for _ in range(12)]
        waiting = [timer.measure(lambda: a + 1, settle=False) for _ in range(7)]
        last = timer.measure(lambda: a + 1)
        settled = timer.take_settled()
        assert [m.ns for m in waiting] == [None] * 7
        assert [number for number, _ in settled] == list(range(13, 20))
        assert timer.take_settled() == []
        for measured in [*alone, last, *(m for _, m in settled)]:
            assert measured.kernels == 1, measured
            assert (measured.outside, measured.unordered, measured.tampered) == (0, 0, ()), measured
        batched = sorted([last.ns or 0, *(m.ns or 0 for _, m in settled)])
        one_by_one = sorted(m.ns or 0 for m in alone[4:])
        assert abs(batched[len(batched) // 2] - one_by_one[len(one_by_one) // 2]) < 0.1 * one_by_one[0]
    finally:
        collector.stop()


@pytest.mark.gpu
@gpu
def test_the_gpu_timers_pad_each_call_with_a_random_count_of_launches() -> None:
    """Before each call's L2 flush the timers launch 0-7 one-element fills, the count drawn per call: CUPTI sees
    every one of them in the harness's window, none of them is the call's, and the counts vary from call to call."""
    from kictl.bench.worker.cupti_model import KERNEL
    from kictl.bench.worker.cupti_timer import CuptiCollector

    timing.bind_originals()
    collector = CuptiCollector()
    collector.start()
    try:
        a = torch.randn(1024, 1024, device="cuda")
        drained: list[Any] = []  # what the timer's last settle drained
        drain_all = collector.drain_all

        def keeping() -> Any:
            found = drain_all()
            drained[:] = found[0]
            return found

        collector.drain_all = keeping  # type: ignore[method-assign]
        timer = timing.make_timer("cupti_device_time", "cuda:0", 64 * 2**20, collector)
        timer.prepare(lambda: a + 1)
        timer.measure(lambda: a + 1)
        others = set()
        for _ in range(40):
            measured = timer.measure(lambda: a + 1)
            assert measured.kernels == 1, measured
            assert measured.busy_ns == measured.ns, measured  # one kernel: no gap
            assert (measured.outside, measured.unordered, measured.tampered) == (0, 0, ()), measured
            kernels = sum(activity.kind == KERNEL for activity in drained)
            others.add(kernels - timer.padded[-1])  # the flush, the spin, the call, the end marker: the same each time
        assert len(others) == 1, others
        assert len(timer.padded) == 41
        assert set(timer.padded) <= set(range(timing.LAUNCH_PHASES))
        assert len(set(timer.padded)) >= 4
        events = timing.make_timer("cuda_events", "cuda:0", 64 * 2**20)
        for _ in range(40):
            events.measure(lambda: a + 1)
        assert set(events.padded) <= set(range(timing.LAUNCH_PHASES))
        assert len(set(events.padded)) >= 4
        unpadded = timing.make_timer("cuda_events", "cuda:0", 64 * 2**20, launch_phases=1)
        unpadded.measure(lambda: a + 1)
        assert unpadded.phase_pad is None
        assert unpadded.padded == []
    finally:
        collector.stop()


def test_events_timer_names_anchor_and_lead_events_moved_from_inside_the_call() -> None:
    # honest: the anchor-to-lead time is the spin and the flush
    assert timing.events_tampering(spun_ns=260_000, spin_ns=200_000) == ()
    # every reachable event recorded again after the work: the anchor-to-lead time collapses
    (reason,) = timing.events_tampering(spun_ns=700, spin_ns=200_000)
    assert "around its 200000 ns device spin read 700 ns" in reason
    assert timing.events_tampering(spun_ns=0, spin_ns=None) == ()  # no spin: not judged


# the lead-to-start gaps of 1,000 honest H200 calls through the graph timer (benchmarks/RESULTS.md): 1.89-1.92 us,
# four of them at 2.02-2.08 us, one at 25.5 us
HONEST_GRAPH_GAPS = [1888] * 600 + [1920] * 390 + [1952] * 5 + [2016, 2048, 2080, 2080] + [25_504]


def test_a_few_wide_start_gaps_among_honest_calls_condemn_nothing() -> None:
    gaps = timing.StartGaps(limit_ns=timing.LEAD_GAP_NS)  # even at the floor, under the graph timer's 3.8 us
    assert [gaps.add(gap, ahead=True) for gap in HONEST_GRAPH_GAPS] == [None] * len(HONEST_GRAPH_GAPS)
    assert (gaps.ahead, len(gaps.over)) == (1000, 5)
    # the first calls alone decide nothing either, however they read
    early = timing.StartGaps(limit_ns=2_000)
    assert [early.add(40_000, ahead=True) for _ in range(timing.GAP_MIN_CALLS - 1)] == [None] * 7
    # a call the host fell behind on is not counted: a host delay may sit between the two records
    behind = timing.StartGaps(limit_ns=2_000)
    assert [behind.add(40_000, ahead=False) for _ in range(50)] == [None] * 50
    assert behind.ahead == 0


@pytest.mark.parametrize("every", [1, 2, 3])
def test_a_start_event_moved_on_many_calls_is_named_once(every: int) -> None:
    # a cheat that records the start event again after its own work on every call, every other or every third
    gaps = timing.StartGaps(limit_ns=3_840)
    reasons = [gaps.add(40_000 if n % every == 0 else 1_900, ahead=True) for n in range(200)]
    found = [reason for reason in reasons if reason is not None]
    assert len(found) == 1
    assert "more than 3840 ns after the event recorded just before it" in found[0]
    assert "re-recorded or moved from inside run()" in found[0]


def test_a_start_event_moved_on_few_calls_moves_the_median_little() -> None:
    # the most a cheat may move without being judged: a quarter of the calls
    honest = list(range(10_000, 10_000 + 400, 1))  # 400 honest figures, 10.0-10.4 us
    gaps = timing.StartGaps(limit_ns=2_000)
    figures, judged = [], []
    for n, figure in enumerate(honest):
        moved = n % timing.GAP_SHARE == timing.GAP_SHARE - 1  # one call in four hides 5 us of its work
        judged.append(gaps.add(7_000 if moved else 1_300, ahead=True))
        figures.append(figure - 5_000 if moved else figure)
    assert judged == [None] * len(honest)
    median = sorted(figures)[len(figures) // 2]
    assert median >= sorted(honest)[len(honest) // 3]
    # one more moved call than that, and the run is judged
    assert gaps.add(7_000, ahead=True) is not None
