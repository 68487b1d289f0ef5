#!/usr/bin/env python
"""Where CUPTI's share of a timed call goes on a GPU (issue 16: the harness's cost per call).

Claim (README.md "Performance", docs/bench.md; RESULTS.md "The harness's cost per CUPTI-timed call"): kictl's own
host time per CUPTI-timed call of one kernel is 0.66-0.77 ms (1.72 ms with cupti-python's record objects). Machine
and command: the H200, `bash benchmarks/device.sh cupti_flush_cost.py --calls 320`.

Run on a CUDA machine with cupti-python (``. benchmarks/h200_setup.sh``), from the repository root::

    python3 benchmarks/cupti_flush_cost.py [--calls 320] [--kernels 1 --kernels 40]

For each ``--kernels K`` (a timed function of K small kernels: 1 is a library kernel's call, 40 a host-bound
reference's), ``--calls`` timed calls go through ``kictl.bench.timing.CuptiTimer`` as a ``kictl bench`` worker
makes them (settled in batches of ``timing.SETTLE_EVERY``).  Printed per K: the host time per call of the
whole ``measure``, of the flushes (``CuptiCollector.drain_all``: CUPTI's forced flush with kictl's buffer
callback inside it), of kictl's callback alone (turning CUPTI's records into kictl's), of settling
(attribution and checks); the records and buffers CUPTI delivered per call; then cProfile's ten costliest
functions over the flushes.  The records are read by kictl's direct reader
(``cupti_timer.DirectRecords``) where it attaches, by cupti-python's objects with
``--cupti-python-objects``.  Nothing is written.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=320)
    parser.add_argument("--kernels", type=int, action="append", help="kernels per timed call (default 1 and 40)")
    parser.add_argument(
        "--cupti-python-objects", action="store_true", help="read records through cupti-python's objects"
    )
    args = parser.parse_args()
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    counts = args.kernels or [1, 40]
    if min(counts) < 1:
        parser.error("--kernels must be at least 1")
    import torch

    from kictl.bench import timing
    from kictl.bench.cupti_timer import CuptiCollector

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


if __name__ == "__main__":
    raise SystemExit(main())
