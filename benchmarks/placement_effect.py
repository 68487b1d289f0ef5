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
import importlib.util
import random
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFINITION = "gqa_paged_prefill_causal_h24_kv4_d128_ps1"
WORKLOADS = ("q1_kv1", "q154_kv154", "b4x_q64_kv256")


def _load_flashinfer() -> Any:
    path = ROOT / "implementations" / DEFINITION / "flashinfer_wrapper" / "flashinfer_prefill.py"
    spec = importlib.util.spec_from_file_location("flashinfer_prefill", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    from kictl.bench.cupti_timer import CuptiCollector
    from kictl.bench.inputs import materialize, plan_inputs
    from kictl.bench.options import flush_bytes
    from kictl.bench.session import select_workloads
    from kictl.definitions import signature
    from kictl.records import DefinitionSpec
    from kictl.store import Registry

    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    device = "cuda:0"
    collector = CuptiCollector()
    collector.start()
    timing.bind_originals()
    registry = Registry(ROOT)
    definition = registry.resolve(DEFINITION, ["Definition"])
    spec = definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    order = signature(spec, source=DEFINITION).inputs
    flashinfer = _load_flashinfer()
    l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0))
    flush = flush_bytes(device, {"l2CacheBytes": l2})
    chooser = random.Random(args.seed)
    spacers: list[Any] = []
    print("| workload | placement medians µs | spread | the first placement again µs |")
    print("| --- | --- | ---: | ---: |")
    for workload in select_workloads(registry, definition, args.workload or list(WORKLOADS)):
        original = materialize(plan_inputs(spec, workload, order, registry.read_blob), device)
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
