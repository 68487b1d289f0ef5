#!/usr/bin/env python
"""What sets the gap between a small FlashInfer call's two kernels? (issue 11: three processes)

``benchmarks/address_effect.py`` (call BB) found that a small prefill call's CUPTI span takes one of two figures
about 0.9 µs apart because the gap between FlashInfer's two kernels (a fill, then the prefill kernel) is either
about 1.1 µs or about 2.0 µs, in about 3 calls of 10, while each kernel's own duration holds within 0.1 µs; the
gap's two levels also differed by process.  This asks whether kictl's harness sets it, the modes taking turns call
by call in one process, the bundled FlashInfer wrapper timed by kictl's ``CuptiTimer``:

- ``kictl``: the timer as ``kictl bench`` runs it (spin calibrated to the host's enqueue time, L2 flushed by a
  write of twice its size);
- ``1 ms spin``: a device spin of 1 ms before the call instead (the launches queued long before the device
  reaches them);
- ``no flush``: no L2 flush (the call's code, parameters and data may still be in L2);
- ``flush by read``: the L2 flushed by a read of the same size instead of a write (no dirty lines left for the
  call's misses to write back).

Run on a CUDA machine with flashinfer and cupti-python (``. benchmarks/h200_setup.sh``), from the repository
root::

    python3 benchmarks/gap_effect.py [--calls 300]

Prints per workload and mode the span's median, each kernel's median, the gap's median, the share of calls with
a gap over 1.5 µs and the gap's median below and above that; nothing is written.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

from small_calls import LONG_GAP_NS, ReadFlush, call_kernels, gaps, short, start  # noqa: E402

DEFINITION = "gqa_paged_prefill_causal_h24_kv4_d128_ps1"
WORKLOADS = ("q154_kv154", "b4x_q64_kv256", "q1_kv1")
MODES = ("kictl", "1 ms spin", "no flush", "flush by read")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls per workload and mode")
    parser.add_argument(
        "--no-padding", action="store_true", help="time without kictl's launch padding (as call BC ran, before it)"
    )
    args = parser.parse_args()
    if args.calls < 10:
        parser.error("--calls must be at least 10")
    harness = start()
    if harness is None:
        return 2
    print("| workload | mode | span µs | kernels µs | gap µs | gaps over 1.5 µs | gap below, above µs |")
    print("| --- | --- | ---: | --- | ---: | ---: | --- |")
    for label in WORKLOADS:
        inputs, wrapper = harness.workload(DEFINITION, label)

        def call(inputs: list[Any] = inputs, wrapper: Any = wrapper) -> Any:
            return wrapper.run(*inputs)

        timer = harness.timer(1 if args.no_padding else None)
        written = timer.flush
        read: Any = ReadFlush(written)
        timer.prepare(call)
        for _ in range(10):
            timer.measure(call)
        calibrated = timer.spin_ns
        rows: dict[str, list[tuple[int, list[Any]]]] = {mode: [] for mode in MODES}
        for _ in range(args.calls):
            for mode in MODES:
                timer.spin_ns = 1_000_000 if mode == "1 ms spin" else calibrated
                timer.flush = None if mode == "no flush" else read if mode == "flush by read" else written
                measured = timer.measure(call)
                rows[mode].append((int(measured.ns or 0), call_kernels(harness.collector.last)))
        for mode in MODES:
            spans = [ns for ns, _ in rows[mode]]
            kernels: dict[str, list[int]] = {}
            between: list[int] = []
            for _, found in rows[mode]:
                for kernel in found:
                    kernels.setdefault(short(kernel.name), []).append(kernel.duration_ns)
                between.extend(gaps(found))
            below = [g for g in between if g <= LONG_GAP_NS]
            above = [g for g in between if g > LONG_GAP_NS]

            def m(values: list[int]) -> str:
                return f"{statistics.median(values) / 1000:.2f}" if values else "-"

            print(
                f"| {label} | {mode} | {m(spans)} | "
                + ", ".join(f"{k} {m(v)}" for k, v in kernels.items())
                + f" | {m(between)} | {len(above) / max(1, len(between)):.0%} | {m(below)}, {m(above)} |",
                flush=True,
            )
        print(f"<!-- {label}: calibrated spin {calibrated} ns -->")
    harness.collector.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
