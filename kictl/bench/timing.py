"""Timing a call: every sample kept in integer nanoseconds, statistics derived once.

DESIGN §7 and issue 4.  Three timers:

``perf_counter_ns`` (CPU)
    the host clock read just before and just after each call.
``cuda_events`` (GPU, the default)
    a CUDA event recorded on the calling stream just before and just after
    each call, after an L2 flush (a write to a buffer of twice the L2 size).
    CUDA events around a Python call time the host's launch path when the
    GPU is idle: the start event fires at once and the kernel starts only
    when the host gets round to launching it (MEASURED.md: 50 µs read for a
    12.5 µs kernel).  So before each start event the GPU is kept busy: a
    device-side spin, calibrated to twice the host's enqueue time of one
    call, then the flush.  The host enqueues the whole call while the GPU
    is still spinning, the kernels run back to back behind the start event,
    and the sample is the device time of the call's work.  Whether that held
    is checked for every sample (the start event must not have completed
    when the call returned) and the count is recorded (``enqueuedAhead``);
    a call that waits for the GPU (``.tolist()``, ``.item()``) cannot be
    enqueued ahead and its samples include that host time, as they should.
``cuda_graph_replay`` (GPU, ``--cuda-graph``)
    the call captured once into a CUDA graph; each sample is one replay
    between two events, after the same flush and spin.

One call at an index drawn by the worker (``audit_index``, unknown to the
implementation) has its outputs copied after its end event, outside the
timed region, so that the outputs of timed calls are checked too.

``bind_originals`` captures the timer's functions before any implementation
is imported; the timers use those captured objects, so patching
``torch.cuda.Event.elapsed_time`` or ``time.perf_counter_ns`` later changes
nothing here (and ``integrity`` reports the patch).
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


@dataclass
class TimingResult:
    """All samples of one measurement, in integer nanoseconds, and what was seen while taking them."""

    samples_ns: list[int]
    audit_outputs: Any = None
    enqueued_ahead: int | None = None
    device_spin_ns: int | None = None


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


def _original(name: str) -> Any:
    if name not in _ORIGINALS:
        bind_originals()
    return _ORIGINALS[name]


# --------------------------------------------------------------------------- CPU


def time_cpu(
    call: Call, *, warmup: int, iterations: int, trials: int, audit_index: int, snapshot: Snapshot
) -> TimingResult:
    """``perf_counter_ns`` around each call; ``snapshot`` copies the audited call's outputs."""
    clock = _original("perf_counter_ns")
    for _ in range(warmup):
        call()
    samples: list[int] = []
    audit: Any = None
    index = 0
    for _ in range(trials):
        for _ in range(iterations):
            start = clock()
            outputs = call()
            stop = clock()
            samples.append(stop - start)
            if index == audit_index:
                audit = snapshot(outputs)
            outputs = None
            index += 1
    return TimingResult(samples_ns=samples, audit_outputs=audit)


# --------------------------------------------------------------------------- CUDA


def spin_cycles_per_ns(device: str) -> float | None:
    """Clock cycles of ``torch.cuda._sleep`` per nanosecond on ``device`` (``None`` without it), measured once."""
    import torch

    sleep = _original("sleep")
    if sleep is None:
        return None
    if device in _CYCLES_PER_NS:
        return _CYCLES_PER_NS[device]
    event = _original("Event")
    elapsed = _original("elapsed_time")
    cycles = 2_000_000
    measured = []
    with torch.cuda.device(device):
        for _ in range(3):
            start, stop = event(enable_timing=True), event(enable_timing=True)
            _original("record")(start)
            sleep(cycles)
            _original("record")(stop)
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


def time_cuda(
    call: Call,
    *,
    device: str,
    warmup: int,
    iterations: int,
    trials: int,
    audit_index: int,
    snapshot: Snapshot,
    flush_bytes: int,
    cuda_graph: bool,
    host_inclusive: bool = False,
) -> TimingResult:
    """CUDA events around each call (or each replay of a graph of one call), GPU kept busy before each.

    ``host_inclusive`` (used when setup is timed with the call): no spin, the
    device synchronised before each start event, so that the host's time in
    the call (a FlashInfer ``plan()``, the launch path) is inside the sample.

    Raises whatever the call raises, and ``RuntimeError`` from graph capture
    when the call cannot be captured.
    """
    import torch

    clock = _original("perf_counter_ns")
    event = _original("Event")
    elapsed = _original("elapsed_time")
    synchronize = _original("synchronize")
    sleep = _original("sleep")
    replay = _original("replay")
    record = _original("record")
    query = _original("query")
    cycles_per_ns = spin_cycles_per_ns(device)
    flush = torch.empty(flush_bytes, dtype=torch.uint8, device=device) if flush_bytes > 0 else None

    def busy(spin_ns: int) -> None:
        if cycles_per_ns is not None and sleep is not None and spin_ns > 0:
            sleep(int(spin_ns * cycles_per_ns))
        if flush is not None:
            flush.zero_()

    timed: Call = call
    graph_outputs: Any = None
    host_ns: list[int] = []
    if cuda_graph:
        side = torch.cuda.Stream(device=device)  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(max(warmup, 2)):
                call()
        torch.cuda.current_stream(device).wait_stream(side)
        synchronize(device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            graph_outputs = call()

        def timed() -> Any:
            replay(graph)
            return graph_outputs

        for _ in range(max(warmup, 3)):
            busy(SPIN_DEFAULT_NS)
            start = clock()
            timed()
            host_ns.append(clock() - start)
    else:
        for _ in range(warmup):
            busy(SPIN_DEFAULT_NS)
            start = clock()
            call()
            host_ns.append(clock() - start)
    synchronize(device)
    spin_ns = _spin_for(host_ns) if cycles_per_ns is not None and not host_inclusive else 0

    samples: list[int] = []
    ahead = 0
    audit: Any = None
    index = 0
    for _ in range(trials):
        starts = [event(enable_timing=True) for _ in range(iterations)]
        stops = [event(enable_timing=True) for _ in range(iterations)]
        synchronize(device)
        for position in range(iterations):
            busy(spin_ns)
            if host_inclusive:
                synchronize(device)
            record(starts[position])
            outputs = timed()
            record(stops[position])
            if not host_inclusive and not query(starts[position]):
                ahead += 1
            if index == audit_index:
                audit = snapshot(outputs)
            outputs = None
            index += 1
        synchronize(device)
        samples.extend(round(elapsed(start, stop) * 1e6) for start, stop in zip(starts, stops, strict=True))
    return TimingResult(
        samples_ns=samples,
        audit_outputs=audit,
        enqueued_ahead=None if host_inclusive else ahead,
        device_spin_ns=spin_ns if cycles_per_ns is not None and not host_inclusive else None,
    )
