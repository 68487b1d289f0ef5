"""Timing a call: every sample kept in integer nanoseconds, statistics derived once.

DESIGN §7, issues 4 and 10.  The loop lives in kictl's parent (``loop``):
it asks a worker for one timed call at a time, and the worker's timer
measures that one call and sends the sample back at once.  A timer is an
object with ``prepare(call)`` (once, after ``setup``), ``measure(call) ->
Measured`` (one timed call) and ``spin_ns``; ``make_timer`` picks it by the
protocol's timer name, so that another timer (CUPTI, issue 11) is one more
class here.  Three timers:

``perf_counter_ns`` (CPU)
    the host clock read just before and just after the call; kictl's parent
    checks each sample against its own wall time around the request.
``cuda_events`` (GPU, the default)
    a CUDA event recorded on the calling stream just before and just after
    the call, after an L2 flush (a write to a buffer of twice the L2 size).
    CUDA events around a Python call time the host's launch path when the
    GPU is idle (MEASURED.md: 50 µs read for a 12.5 µs kernel), so before
    each start event the GPU is kept busy: a device-side spin, calibrated to
    twice the host's enqueue time of one call, then the flush.  Whether the
    call was enqueued before the GPU reached the start event is reported
    per sample (``enqueuedAhead``).
``cuda_graph_replay`` (GPU, ``--cuda-graph``)
    the call captured once into a CUDA graph; each sample is one replay
    between two events, after the same flush and spin.

``bind_originals`` captures the timer's functions before any implementation
is imported; the timers use those captured objects, so patching
``time.perf_counter_ns`` later changes nothing here (and ``integrity``
reports the patch).  ``median_relative_error`` is the half-width of a 95%
distribution-free confidence interval of the median, over the median: the
adaptive repetition stops once it is below the target.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

STATISTICS = ("mean", "median", "min", "max", "p10", "p90", "stdev")
#: The spin before each start event: twice the host's enqueue time plus this, within these bounds.
SPIN_MARGIN_NS = 20_000
SPIN_MIN_NS = 20_000
SPIN_MAX_NS = 2_000_000
#: The spin before the host's enqueue time is known (warm-up).
SPIN_DEFAULT_NS = 200_000

_perf_counter_ns = time.perf_counter_ns
_ORIGINALS: dict[str, Any] = {}
_CYCLES_PER_NS: dict[str, float | None] = {}

Call = Callable[[], Any]
Snapshot = Callable[[Any], Any]


# --------------------------------------------------------------------------- statistics


def quantile(ordered: Sequence[float], fraction: float) -> float:
    """Linear interpolation between closest ranks (Hyndman & Fan type 7, numpy's default)."""
    if not ordered:
        raise ValueError("no samples")
    position = (len(ordered) - 1) * fraction
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (position - low) * (ordered[high] - ordered[low])


def summarize(samples: Sequence[int]) -> dict[str, int]:
    """mean, median, min, max, p10, p90 and (sample) stdev of ``samples``, rounded to integer ns."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    return {
        "mean": round(statistics.fmean(ordered)),
        "median": round(quantile(ordered, 0.5)),
        "min": ordered[0],
        "max": ordered[-1],
        "p10": round(quantile(ordered, 0.1)),
        "p90": round(quantile(ordered, 0.9)),
        "stdev": round(statistics.stdev(ordered)) if len(ordered) > 1 else 0,
    }


# --------------------------------------------------------------------------- originals


def bind_originals() -> dict[str, Any]:
    """Capture the timer's functions (call before importing an implementation)."""
    _ORIGINALS["perf_counter_ns"] = time.perf_counter_ns
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return _ORIGINALS
    _ORIGINALS["Event"] = torch.cuda.Event
    _ORIGINALS["elapsed_time"] = torch.cuda.Event.elapsed_time
    _ORIGINALS["record"] = torch.cuda.Event.record
    _ORIGINALS["query"] = torch.cuda.Event.query
    _ORIGINALS["synchronize"] = torch.cuda.synchronize
    _ORIGINALS["sleep"] = getattr(torch.cuda, "_sleep", None)
    _ORIGINALS["replay"] = torch.cuda.CUDAGraph.replay
    return _ORIGINALS


def original(name: str) -> Any:
    """The timer function ``name`` as it was before any implementation was imported."""
    if name not in _ORIGINALS:
        bind_originals()
    return _ORIGINALS[name]


# --------------------------------------------------------------------------- timers


@dataclass
class Measured:
    """One timed call: its time, its outputs (left to the worker to check) and whether it ran ahead (GPU)."""

    ns: int
    outputs: Any
    enqueued_ahead: bool | None = None


class CpuTimer:
    """``perf_counter_ns`` around the call."""

    name = "perf_counter_ns"
    spin_ns: int | None = None

    def __init__(self) -> None:
        self.clock = original("perf_counter_ns")

    def prepare(self, call: Call) -> None:
        return None

    def measure(self, call: Call) -> Measured:
        clock = self.clock
        start = clock()
        outputs = call()
        stop = clock()
        return Measured(stop - start, outputs)


def make_timer(name: str, device: str, flush_bytes: int) -> Any:
    """The timer called ``name`` (a protocol's ``measurement.timer``) for ``device``; raises ``ValueError``."""
    if name == CpuTimer.name:
        return CpuTimer()
    if name == CudaEventTimer.name:
        return CudaEventTimer(device, flush_bytes)
    if name == CudaGraphTimer.name:
        return CudaGraphTimer(device, flush_bytes)
    if name == HostInclusiveCudaTimer.name:
        return HostInclusiveCudaTimer(device, flush_bytes)
    raise ValueError(f"unknown timer {name!r}")


# --------------------------------------------------------------------------- CUDA


def spin_cycles_per_ns(device: str) -> float | None:
    """Clock cycles of ``torch.cuda._sleep`` per nanosecond on ``device`` (``None`` without it), measured once."""
    import torch

    sleep = original("sleep")
    if sleep is None:
        return None
    if device in _CYCLES_PER_NS:
        return _CYCLES_PER_NS[device]
    event = original("Event")
    elapsed = original("elapsed_time")
    cycles = 2_000_000
    measured = []
    with torch.cuda.device(device):
        for _ in range(3):
            start, stop = event(enable_timing=True), event(enable_timing=True)
            original("record")(start)
            sleep(cycles)
            original("record")(stop)
            stop.synchronize()
            measured.append(elapsed(start, stop) * 1e6)
    nanoseconds = sorted(measured)[1]
    _CYCLES_PER_NS[device] = cycles / nanoseconds if nanoseconds > 0 else None
    return _CYCLES_PER_NS[device]


def _spin_for(host_ns: Sequence[int]) -> int:
    if not host_ns:
        return SPIN_DEFAULT_NS
    typical = sorted(host_ns[1:] or host_ns)[len(host_ns[1:] or host_ns) // 2]
    return max(SPIN_MIN_NS, min(SPIN_MAX_NS, 2 * typical + SPIN_MARGIN_NS))


class CudaEventTimer:
    """CUDA events around each call, the GPU kept busy (spin, then L2 flush) before the start event."""

    name = "cuda_events"

    def __init__(self, device: str, flush_bytes: int) -> None:
        import torch

        self.device = device
        self.event = original("Event")
        self.record = original("record")
        self.query = original("query")
        self.elapsed = original("elapsed_time")
        self.synchronize = original("synchronize")
        self.sleep = original("sleep")
        self.clock = original("perf_counter_ns")
        self.cycles_per_ns = spin_cycles_per_ns(device)
        self.flush = torch.empty(flush_bytes, dtype=torch.uint8, device=device) if flush_bytes > 0 else None
        self.host_ns: list[int] = []
        self.spin_ns: int | None = SPIN_DEFAULT_NS if self.cycles_per_ns is not None else None

    def busy(self, spin_ns: int | None) -> None:
        if self.cycles_per_ns is not None and self.sleep is not None and spin_ns:
            self.sleep(int(spin_ns * self.cycles_per_ns))
        if self.flush is not None:
            self.flush.zero_()

    def prepare(self, call: Call) -> None:
        self.synchronize(self.device)

    def _timed(self, call: Call) -> Any:
        return call()

    def measure(self, call: Call) -> Measured:
        start, stop = self.event(enable_timing=True), self.event(enable_timing=True)
        self.synchronize(self.device)
        self.busy(self.spin_ns)
        host_start = self.clock()
        self.record(start)
        outputs = self._timed(call)
        self.record(stop)
        host = self.clock() - host_start
        ahead = not self.query(start)
        stop.synchronize()
        self.host_ns.append(host)
        if self.spin_ns is not None and len(self.host_ns) <= 8:
            self.spin_ns = _spin_for(self.host_ns)
        return Measured(round(self.elapsed(start, stop) * 1e6), outputs, ahead)


class HostInclusiveCudaTimer(CudaEventTimer):
    """CUDA events around setup() and run(), the device synchronised first: the host's time counts."""

    name = "cuda_events_host_inclusive"

    def __init__(self, device: str, flush_bytes: int) -> None:
        super().__init__(device, flush_bytes)
        self.spin_ns = None

    def measure(self, call: Call) -> Measured:
        start, stop = self.event(enable_timing=True), self.event(enable_timing=True)
        self.busy(None)
        self.synchronize(self.device)
        self.record(start)
        outputs = call()
        self.record(stop)
        stop.synchronize()
        return Measured(round(self.elapsed(start, stop) * 1e6), outputs, None)


class CudaGraphTimer(CudaEventTimer):
    """One call captured into a CUDA graph (after warm-up on a side stream); each sample is one replay."""

    name = "cuda_graph_replay"

    def prepare(self, call: Call) -> None:
        import torch

        side = torch.cuda.Stream(device=self.device)  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(2):
                call()
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.synchronize(self.device)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.graph_outputs = call()
        self.synchronize(self.device)
        self.replay = original("replay")

    def _timed(self, call: Call) -> Any:
        self.replay(self.graph)
        return self.graph_outputs


# --------------------------------------------------------------------------- adaptive repetition


def median_relative_error(samples: Sequence[int]) -> float | None:
    """Half the width of a ~95% confidence interval of the median, over the median (``None`` below 5 samples).

    Distribution-free: the interval runs between the order statistics
    ``n/2 ± 1.96·sqrt(n)/2`` (the binomial interval of the median's rank).
    """
    n = len(samples)
    if n < 5:
        return None
    ordered = sorted(samples)
    half = 1.96 * math.sqrt(n) / 2
    low = ordered[max(0, math.floor(n / 2 - half))]
    high = ordered[min(n - 1, math.ceil(n / 2 + half))]
    middle = quantile(ordered, 0.5)
    if middle <= 0:
        return None
    return (high - low) / 2 / middle
