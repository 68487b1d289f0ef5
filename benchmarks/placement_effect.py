#!/usr/bin/env python
"""Does where a small kernel's tensors lie in device memory move its CUPTI figure? (issue 11: three processes)

Separate ``kictl bench`` processes agree within 2% on 16 of the 19 attention workloads; the three that do not
are the smallest calls (6-13 µs), whose medians differ by 0.2-0.5 µs from process to process (RESULTS.md). One
process allocates its tensors at addresses of its own.  This asks whether the addresses alone move the figure:
in one process, the bundled FlashInfer wrapper on h24 ps1 workloads is timed by kictl's own ``CuptiTimer``
(persisting-L2 reset, L2 flush, device spin, CUPTI span) on ``--placements`` copies of the same inputs, each
allocated after a spacer of a random size (so at other addresses), its ``plan()`` made on its own copy; then
the first copy again (the same addresses: the drift of the GPU over the run).

Run on a CUDA machine with flashinfer and cupti-python (``. benchmarks/h200_setup.sh``), from the repository
root::

    python3 benchmarks/placement_effect.py [--calls 150] [--placements 6] [--workload q1_kv1 ...]

Prints, per workload, each placement's median in µs, their spread ((max - min) / median) and the first
placement's median again at the end; nothing is written.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

from neighbour_effect import WORKLOADS, h24_session  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=150, help="timed calls per placement")
    parser.add_argument("--placements", type=int, default=6, help="copies of the inputs at other addresses")
    parser.add_argument("--workload", action="append", help=f"h24 ps1 workload label (default {WORKLOADS})")
    parser.add_argument("--seed", type=int, default=0, help="the spacers' sizes")
    args = parser.parse_args()
    if args.calls < 1 or args.placements < 1:
        parser.error("--calls and --placements must be at least 1")
    import torch

    from kictl.bench import timing

    session = h24_session()
    if session is None:
        return 2
    device, collector, flashinfer, flush = session.device, session.collector, session.flashinfer, session.flush_bytes
    chooser = random.Random(args.seed)
    spacers: list[Any] = []
    print("| workload | placement medians µs | spread | the first placement again µs |")
    print("| --- | --- | ---: | ---: |")
    for workload in session.workloads(args.workload):
        original = session.inputs(workload)
        copies = []
        for _ in range(args.placements):
            spacers.append(torch.empty(chooser.randrange(1, 64) << 20, dtype=torch.uint8, device=device))
            copies.append([t.clone() if isinstance(t, torch.Tensor) else t for t in original])
        timer = timing.CuptiTimer(device, flush, collector)

        def median(inputs: list[Any], timer: Any = timer) -> float:
            flashinfer.setup(*inputs)

            def call() -> Any:
                return flashinfer.run(*inputs)

            timer.prepare(call)
            for _ in range(10):
                timer.measure(call)
            samples = [timer.measure(call).ns for _ in range(args.calls)]
            return statistics.median(s for s in samples if s is not None) / 1000

        medians = [median(inputs) for inputs in copies]
        again = median(copies[0])
        spread = (max(medians) - min(medians)) / statistics.median(medians)
        print(
            f"| {workload.name} | {', '.join(f'{m:.2f}' for m in medians)} | {spread:.1%} | {again:.2f} |",
            flush=True,
        )
    collector.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
