"""Whether a bench job is practical on a device, from its family's bytes and FLOPs (an estimate).

``kictl bench`` warns before a job whose estimated time is out of reach: an
imported M=8192 GEMM on a CPU core takes minutes per call's worth of timed
calls, and a warning up front beats minutes of silence.  The estimate is a
lower bound on purpose (a warning must not cry wolf): the device's round peak
figures below are optimistic, and the calls counted are the fewest the bench
makes (warm-up, the correctness rounds and the shortest adaptive timing).

On a GPU the figures are its datasheet's (``kictl.families.floor``); on the
CPU a core is taken to sustain ``CPU_FLOPS_PER_THREAD`` and the memory
``CPU_BYTES_PER_S``, both above what torch reaches on one core of a current
server, so that the estimate stays below the truth.
"""

from __future__ import annotations

from dataclasses import dataclass

from kictl.families import Work, floor
from kictl.families.gpus import GPU
from kictl.render import peak as peak_text
from kictl.render import si, size

#: FLOP/s one CPU thread is assumed to sustain (fp32 matmul with AVX-512 FMA at ~3 GHz is ~100 GFLOP/s peak).
CPU_FLOPS_PER_THREAD = 1e11
#: Bytes/s the CPU's memory is assumed to move for one job (a socket's DDR5 bandwidth is of this order).
CPU_BYTES_PER_S = 1e11
#: A job (one implementation on one workload) estimated to take longer than this gets a warning.
LIMIT_S = 60.0
#: The fewest timed calls the bench makes (its adaptive count stops no sooner).
MIN_TIMED_CALLS = 20


@dataclass(frozen=True, slots=True)
class JobEstimate:
    """The least time one implementation needs on one workload."""

    workload: str
    bytes: int
    flops: int | None
    device: str  # "the CPU (1 thread)", "NVIDIA H200"
    assumed: str  # the peak figures the estimate used
    per_call_s: float
    calls: int

    @property
    def total_s(self) -> float:
        return self.per_call_s * self.calls

    @property
    def impractical(self) -> bool:
        return self.total_s > LIMIT_S

    def warning(self) -> str:
        flops = "no FLOP formula" if self.flops is None else si(self.flops, "FLOP")
        return (
            f"warning: workload {self.workload}: {flops} and {size(self.bytes)} per call; on {self.device} "
            f"at {self.assumed} (optimistic), at least {_duration(self.per_call_s)} a call, {self.calls} calls: "
            f"at least {_duration(self.total_s)} per implementation. Choose smaller workloads with --workload, "
            "or another device"
        )


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    if seconds >= 1:
        return f"{seconds:.1f} s"
    return f"{seconds * 1e3:.3g} ms"


def calls_per_job(*, warmup: int, rounds: int, iterations: int | None, trials: int) -> int:
    """The fewest calls of an implementation in one job: warm-up, correctness rounds, timed calls."""
    timed = iterations * trials if iterations is not None else MIN_TIMED_CALLS
    return max(0, warmup) + max(0, rounds) + max(1, timed)


def estimate_job(workload: str, amount: Work, *, gpu: GPU | None, threads: int, calls: int) -> JobEstimate:
    """The least time of one job: ``gpu``'s datasheet floor, or the CPU's assumed peaks when ``gpu`` is None."""
    if gpu is not None:
        bound = floor(amount, gpu)
        peak, dtype = gpu.peak_for(amount.compute_dtype)
        assumed = f"{peak_text(gpu.memory_bandwidth, 'B/s')} and {peak_text(peak, 'FLOP/s')} {dtype}"
        return JobEstimate(workload, amount.bytes, amount.flops, gpu.product, assumed, bound.floor_ns / 1e9, calls)
    rate = CPU_FLOPS_PER_THREAD * max(1, threads)
    seconds = amount.bytes / CPU_BYTES_PER_S
    if amount.flops is not None:
        seconds = max(seconds, amount.flops / rate)
    device = f"the CPU with {threads} thread{'s' if threads != 1 else ''}"
    assumed = f"{si(rate, 'FLOP/s')} and {si(CPU_BYTES_PER_S, 'B/s')}"
    return JobEstimate(workload, amount.bytes, amount.flops, device, assumed, seconds, calls)
