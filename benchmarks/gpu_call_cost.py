#!/usr/bin/env python
"""What one timed call costs the harness on a GPU, step by step (issue 16: a suite's speed).

Claim (kictl/bench/timing.py and cupti_timer.py (settling in batches, buffer sizes); RESULTS.md "The harness's cost
per CUPTI-timed call"): settling CUPTI's records 16 calls at a time takes a call's harness cost from 1.8 ms to 0.43
ms median. Machine and command: the H200, `bash benchmarks/device.sh gpu_call_cost.py`.

Run on a CUDA machine from the repository root (after ``benchmarks/h200_setup.sh`` for CUPTI)::

    python3 benchmarks/gpu_call_cost.py [--calls 300]

Times, on the host, each step ``kictl.bench.timing.CuptiTimer.measure`` and
``CudaEventTimer.measure`` take around one call of a one-kernel function
(``torch.add`` of two 4 KiB tensors): the device synchronisation, CUPTI's
buffer flush (``drain``), the persisting-L2 reset, the L2 flush, the spin,
the read of the touch buffer (``--touch-bytes``, kictl's default 8 GiB), and
the whole ``measure``, settled call by call and in batches of
``timing.SETTLE_EVERY`` (one CUPTI flush per batch: the mean then carries the
flush's share).  Prints a table of medians, means and 90th percentiles in
microseconds; nothing is written.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _cost(step: Callable[[], object], calls: int, sync: Callable[[], None]) -> tuple[float, float, float]:
    samples = []
    for _ in range(calls):
        sync()
        begun = time.perf_counter_ns()
        step()
        sync()
        samples.append((time.perf_counter_ns() - begun) / 1000)
    samples.sort()
    return statistics.median(samples), statistics.fmean(samples), samples[int(0.9 * (len(samples) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--buffer-bytes", type=int, help="the size of CUPTI's activity buffers (default: kictl's)")
    parser.add_argument("--touch-bytes", type=int, default=8 << 30, help="the touch buffer (default 8 GiB)")
    args = parser.parse_args()
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    if args.buffer_bytes is not None and args.buffer_bytes < 4096:
        parser.error("--buffer-bytes must be at least 4096")
    if args.touch_bytes < 0:
        parser.error("--touch-bytes must be 0 or more")
    import torch

    from kictl.bench import timing
    from kictl.bench.cupti_timer import CuptiCollector
    from kictl.bench.gpu_state import reset_persisting_l2

    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    device = "cuda:0"
    collector = CuptiCollector() if args.buffer_bytes is None else CuptiCollector(buffer_bytes=args.buffer_bytes)
    print(f"CUPTI buffers of {collector.buffer_bytes} bytes")
    collector.start()
    timing.bind_originals()
    flush_bytes = 2 * int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20))
    a = torch.ones(1024, device=device)
    b = torch.ones(1024, device=device)

    def call() -> torch.Tensor:
        return torch.add(a, b)

    def sync() -> None:
        torch.cuda.synchronize(device)

    def add_then_drain() -> None:
        call()
        sync()
        collector.drain()

    cupti = timing.CuptiTimer(device, flush_bytes, collector)
    touched = timing.CuptiTimer(device, flush_bytes, collector, args.touch_bytes)
    events = timing.CudaEventTimer(device, flush_bytes)
    flush = torch.empty(flush_bytes, dtype=torch.uint8, device=device)
    for timer in (cupti, touched, events):
        for _ in range(10):
            timer.measure(call)
    rows = [
        ("torch.cuda.synchronize", lambda: None),
        ("one torch.add", call),
        ("collector.drain() (nothing pending)", collector.drain),
        ("torch.add, then collector.drain()", add_then_drain),
        ("reset_persisting_l2()", reset_persisting_l2),
        (f"L2 flush ({flush_bytes >> 20} MiB zero_)", flush.zero_),
        ("spin of 200 µs", lambda: cupti.sleep(int(200_000 * (cupti.cycles_per_ns or 1)))),
        (f"touch ({args.touch_bytes >> 20} MiB, one byte every 64 KiB)", touched.cold_translations),
        ("CuptiTimer.measure(torch.add), settled each call", lambda: cupti.measure(call)),
        (
            f"CuptiTimer.measure(torch.add), settled {timing.SETTLE_EVERY} at a time",
            lambda: cupti.measure(call, settle=False),
        ),
        (
            f"the same with the touch, settled {timing.SETTLE_EVERY} at a time",
            lambda: touched.measure(call, settle=False),
        ),
        ("CudaEventTimer.measure(torch.add)", lambda: events.measure(call)),
    ]
    print(f"| step ({args.calls} calls each) | median µs | mean µs | p90 µs |")
    print("| --- | ---: | ---: | ---: |")
    for label, step in rows:
        median, mean, p90 = _cost(step, args.calls, sync)
        print(f"| {label} | {median:.1f} | {mean:.1f} | {p90:.1f} |", flush=True)
        cupti.settle()
        touched.settle()
    print(f"spin after warm-up: CUPTI {cupti.spin_ns} ns, events {events.spin_ns} ns")
    collector.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
