"""Timers keep every sample in integer ns; statistics are derived once, with known answers."""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch

from kictl.bench import timing
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


def test_time_cpu_counts_calls_and_audits_the_chosen_one() -> None:
    calls: list[int] = []

    def call() -> list[int]:
        calls.append(len(calls))
        return [len(calls) - 1]

    seen: list[Any] = []
    result = timing.time_cpu(
        call, warmup=2, iterations=4, trials=3, audit_index=5, snapshot=lambda out: seen.append(out) or out
    )
    assert len(calls) == 2 + 4 * 3
    assert len(result.samples_ns) == 12
    assert all(isinstance(sample, int) and sample >= 0 for sample in result.samples_ns)
    assert seen == [[2 + 5]]
    assert result.audit_outputs == [7]
    assert result.enqueued_ahead is None


def test_time_cpu_reads_the_clock_captured_before_patching(monkeypatch: pytest.MonkeyPatch) -> None:
    timing.bind_originals()
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)

    def call() -> None:
        time.sleep(0.002)

    result = timing.time_cpu(call, warmup=0, iterations=3, trials=1, audit_index=-1, snapshot=lambda out: out)
    assert min(result.samples_ns) >= 2_000_000


def test_spin_is_twice_the_host_time_within_bounds() -> None:
    assert timing._spin_for([]) == timing.SPIN_DEFAULT_NS
    assert timing._spin_for([900_000, 30_000, 30_000, 40_000]) == 2 * 30_000 + timing.SPIN_MARGIN_NS
    assert timing._spin_for([1, 1, 1]) >= timing.SPIN_MIN_NS
    assert timing._spin_for([10**9, 10**9]) == timing.SPIN_MAX_NS


gpu = pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("graph", [False, True])
def test_time_cuda_hides_launch_latency(graph: bool) -> None:
    a = torch.randn(2048, 2048, device="cuda")
    result = timing.time_cuda(
        lambda: a @ a,
        device="cuda:0",
        warmup=5,
        iterations=50,
        trials=2,
        audit_index=7,
        snapshot=lambda out: out.clone(),
        flush_bytes=64 * 1024 * 1024,
        cuda_graph=graph,
    )
    assert len(result.samples_ns) == 100
    assert result.enqueued_ahead is not None
    assert result.enqueued_ahead >= 95
    assert torch.allclose(result.audit_outputs, a @ a)
