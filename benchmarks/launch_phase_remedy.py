#!/usr/bin/env python
"""Can the harness make a small call's figure independent of its process? (issue 11: three processes)

``benchmarks/launch_alignment.py`` (call BD) found the gap between a small FlashInfer prefill call's two kernels
long (~2 µs against ~1.1 µs) in every fourth call, set by how many kernels had been launched before (one more
kernel per call moved the share of long gaps to 50% or 0%, period four; event records moved nothing), and in some
processes long in 80-95% of the calls of a workload whatever the padding.  ``kictl bench`` launches about the
same kernels before every call, so one run can sit on one phase of that cycle and another run on another.  Here,
in one process, each mode is timed after several rebuilds of the timer and the plan (a new flush buffer at
another address, ``setup()`` again: what a new process redraws), consecutive calls as ``kictl bench`` makes them,
kictl's ``CuptiTimer`` otherwise unchanged:

- ``unpadded``: as ``kictl bench`` timed before it padded (call BE named this mode ``kictl``);
- ``padded``: before each call's L2 flush, 0-7 one-element fills drawn at random (the launch phase uniform);
- ``padded, read flush``: the same, and the L2 flushed by a read of twice its size instead of a write (no
  dirty lines left for the call's misses to write back).

Run on a CUDA machine with flashinfer and cupti-python (``. benchmarks/h200_setup.sh``), from the repository
root::

    python3 benchmarks/launch_phase_remedy.py [--calls 200] [--rebuilds 6]

Prints per workload and mode each rebuild's median (and share of long gaps), their spread and the pooled median;
run it in several processes to compare the pooled medians across processes.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

from small_calls import LONG_GAP_NS, ReadFlush, call_kernels, gaps, load_wrapper, start  # noqa: E402

WORKLOADS = (
    ("gqa_paged_prefill_causal_h24_kv4_d128_ps1", "q1_kv1"),
    ("gqa_paged_prefill_causal_h24_kv4_d128_ps1", "q154_kv154"),
    ("gqa_paged_prefill_causal_h24_kv4_d128_ps1", "b4x_q64_kv256"),
    ("gqa_paged_prefill_causal_h20_kv4_d128_ps64", "q16_p1"),
    ("gqa_paged_decode_h32_kv8_d128_ps1", "b1_kv73"),
)
MODES = ("unpadded", "padded", "padded, read flush")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="consecutive timed calls per rebuild")
    parser.add_argument("--rebuilds", type=int, default=6, help="rebuilds per workload and mode")
    args = parser.parse_args()
    import torch

    harness = start()
    if harness is None:
        return 2
    device, collector = harness.device, harness.collector
    chooser = random.Random()
    tiny = torch.zeros(1, device=device)
    kept: list[Any] = []
    padding = {"on": False}

    def pad() -> None:
        if padding["on"]:
            for _ in range(chooser.randrange(8)):
                tiny.zero_()

    for definition_name, label in WORKLOADS:
        inputs = harness.inputs(definition_name, label)
        wrapper = load_wrapper(definition_name)

        def call(wrapper: Any = wrapper, inputs: list[Any] = inputs) -> Any:
            return wrapper.run(*inputs)

        for mode in MODES:
            padding["on"] = mode != "unpadded"
            medians, shares, pooled = [], [], []
            for _ in range(args.rebuilds):
                kept.append(torch.empty(chooser.randrange(1, 64) << 20, dtype=torch.uint8, device=device))
                wrapper.setup(*inputs)
                timer = harness.timer(1)  # the modes pad (or not) themselves
                kept.append(timer)
                timer.cold_translations = pad
                if mode.endswith("read flush"):
                    timer.flush = ReadFlush(timer.flush)
                timer.prepare(call)
                for _ in range(10):
                    timer.measure(call)
                spans: list[int] = []
                between: list[int] = []
                for _ in range(args.calls):
                    spans.append(int(timer.measure(call).ns or 0))
                    between.extend(gaps(call_kernels(collector.last)))
                medians.append(statistics.median(spans) / 1000)
                shares.append(sum(g > LONG_GAP_NS for g in between) / len(between) if between else None)
                pooled.extend(spans)
            spread = (max(medians) - min(medians)) / statistics.median(medians)
            print(
                f"{label} | {mode} | " + ", ".join(f"{m:.2f}" for m in medians) + f" | spread {spread:.1%} | "
                f"pooled {statistics.median(pooled) / 1000:.2f} | long gaps "
                + ", ".join("-" if s is None else f"{s:.0%}" for s in shares),
                flush=True,
            )
    collector.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
