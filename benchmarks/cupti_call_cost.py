#!/usr/bin/env python
"""What a CUPTI-timed call costs the harness on a GPU (issue 16: the harness's cost per call).

Claim (README.md "Performance", docs/bench.md, kictl/bench/worker/timing.py; RESULTS.md "The harness's cost per
CUPTI-timed call"): kictl's own host time per CUPTI-timed call of one kernel is 0.66-0.77 ms (1.72 ms with
cupti-python's record objects), and settling CUPTI's records 16 calls at a time takes a call's cost from 1.8 ms
to 0.43 ms median. Machine and command: the H200, `bash benchmarks/device.sh cupti_call_cost.py --calls 320`
and `bash benchmarks/device.sh cupti_call_cost.py steps`.

Run on a CUDA machine with cupti-python (``. benchmarks/h200_setup.sh``), from the repository root::

    python3 benchmarks/cupti_call_cost.py [--calls 320] [--kernels 1 --kernels 40] [--cupti-python-objects]
    python3 benchmarks/cupti_call_cost.py steps [--calls 300] [--buffer-bytes N] [--touch-bytes N]

The default part: for each ``--kernels K`` (a timed function of K small kernels: 1 is a library kernel's call,
40 a host-bound reference's), ``--calls`` timed calls go through ``kictl.bench.worker.timing.CuptiTimer`` as a
``kictl bench`` worker makes them (settled in batches of ``timing.SETTLE_EVERY``).  Printed per K: the host
time per call of the whole ``measure``, of the flushes (``CuptiCollector.drain_all``: CUPTI's forced flush with
kictl's buffer callback inside it), of kictl's callback alone, of settling (attribution and checks); the
records and buffers CUPTI delivered per call; then cProfile's ten costliest functions over the flushes.  The
records are read by kictl's direct reader (``cupti_records.DirectRecords``) where it attaches, by
cupti-python's objects with ``--cupti-python-objects``.

``steps``: times, on the host, each step ``CuptiTimer.measure`` and ``CudaEventTimer.measure`` take around one
call of a one-kernel function (``torch.add`` of two 4 KiB tensors): the device synchronisation, CUPTI's buffer
flush (``drain``), the persisting-L2 reset, the L2 flush, the spin, the read of the touch buffer
(``--touch-bytes``, default 8 GiB), and the whole ``measure``, settled call by call and in batches of
``timing.SETTLE_EVERY``.  Prints a table of medians, means and 90th percentiles in microseconds.  Nothing is
written by either part.  (Until this stop the parts were two scripts, ``cupti_flush_cost.py`` and
``gpu_call_cost.py``: RESULTS.md's figures were made with them.)
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def flush_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="cupti_call_cost.py", description="Where CUPTI's share of a timed call goes.")
    parser.add_argument("--calls", type=int, default=320)
    parser.add_argument("--kernels", type=int, action="append", help="kernels per timed call (default 1 and 40)")
    parser.add_argument(
        "--cupti-python-objects", action="store_true", help="read records through cupti-python's objects"
    )
    args = parser.parse_args(argv)
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    counts = args.kernels or [1, 40]
    if min(counts) < 1:
        parser.error("--kernels must be at least 1")
    import torch

    from kictl.bench.worker import timing
    from kictl.bench.worker.cupti_timer import CuptiCollector

    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    device = "cuda:0"
    collector = CuptiCollector()
    spent = {"callback_ns": 0, "records": 0, "buffers": 0}
    completed = collector._completed

    def timed_callback(activities: Any) -> None:
        began = time.perf_counter_ns()
        completed(activities)
        spent["callback_ns"] += time.perf_counter_ns() - began
        spent["records"] += len(activities)
        spent["buffers"] += 1

    collector._completed = timed_callback  # type: ignore[method-assign]
    if "--cupti-python-objects" in sys.argv:
        collector.direct_allowed = False
    collector.start()
    direct = collector.direct
    print(
        "records read by "
        + ("kictl's direct reader (ctypes, cupti-python's dtypes)" if direct else "cupti-python's objects")
        + (f"; direct reader refused: {collector.direct_error}" if collector.direct_error else "")
    )
    timing.bind_originals()
    flush_bytes = 2 * int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20))
    a = torch.ones(1024, device=device)
    drain_all = collector.drain_all
    profile = cProfile.Profile()
    flushing = {"ns": 0}

    def profiled_drain() -> Any:
        began = time.perf_counter_ns()
        profile.enable()
        try:
            return drain_all()
        finally:
            profile.disable()
            flushing["ns"] += time.perf_counter_ns() - began

    collector.drain_all = profiled_drain  # type: ignore[method-assign]
    print(
        "| kernels per call | calls | measure µs/call | flush µs/call | callback µs/call | settle µs/call | "
        "records/call | buffers/flush |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for kernels in counts:

        def call(kernels: int = kernels) -> torch.Tensor:
            out = a
            for _ in range(kernels):
                out = out + 1
            return out

        timer = timing.CuptiTimer(device, flush_bytes, collector)
        for _ in range(20):
            timer.measure(call)
        spent.update(callback_ns=0, records=0, buffers=0)
        flushing["ns"] = 0
        settle = timer.settle
        settling = {"ns": 0, "flushes": 0}

        def timed_settle(settle: Any = settle, settling: dict[str, int] = settling) -> Any:
            began = time.perf_counter_ns()
            try:
                return settle()
            finally:
                settling["ns"] += time.perf_counter_ns() - began
                settling["flushes"] += 1

        timer.settle = timed_settle  # type: ignore[method-assign]
        began = time.perf_counter_ns()
        for n in range(args.calls):
            timer.measure(call, settle=(n + 1) % timing.SETTLE_EVERY == 0)
        timer.settle()
        whole = time.perf_counter_ns() - began
        per = 1000 * args.calls
        print(
            f"| {kernels} | {args.calls} | {whole / per:.1f} | {flushing['ns'] / per:.1f} | "
            f"{spent['callback_ns'] / per:.1f} | {(settling['ns'] - flushing['ns']) / per:.1f} | "
            f"{spent['records'] / args.calls:.1f} | {spent['buffers'] / max(1, settling['flushes']):.1f} |",
            flush=True,
        )
    if direct is not None:
        print(f"cross-checked records: {sum(direct.reader.checked.values())}; mismatch: {direct.reader.mismatch}")
        print(f"reader error: {direct.error}")
    collector.stop()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(10)
    print("cProfile over the flushes (all K), by own time:")
    print("\n".join(line for line in text.getvalue().splitlines() if line.strip())[:4000])
    return 0


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


def steps_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="cupti_call_cost.py steps", description="What one timed call costs, step by step."
    )
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--buffer-bytes", type=int, help="the size of CUPTI's activity buffers (default: kictl's)")
    parser.add_argument("--touch-bytes", type=int, default=8 << 30, help="the touch buffer (default 8 GiB)")
    args = parser.parse_args(argv)
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    if args.buffer_bytes is not None and args.buffer_bytes < 4096:
        parser.error("--buffer-bytes must be at least 4096")
    if args.touch_bytes < 0:
        parser.error("--touch-bytes must be 0 or more")
    import torch

    from kictl.bench.worker import timing
    from kictl.bench.worker.cupti_timer import CuptiCollector
    from kictl.bench.worker.gpu_state import reset_persisting_l2

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


def main() -> int:
    argv = sys.argv[1:]
    if "--out" in argv:  # benchmarks/device.sh passes one; neither part writes anything
        at = argv.index("--out")
        del argv[at : at + 2]
    if "steps" in argv:
        argv.remove("steps")
        return steps_main(argv)
    return flush_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
