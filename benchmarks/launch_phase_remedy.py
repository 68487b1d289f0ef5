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

- ``kictl``: as ``kictl bench`` times today;
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
import itertools
import random
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for folder in (ROOT, ROOT / "benchmarks"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from address_effect import Spy, call_kernels  # noqa: E402
from gap_effect import ReadFlush  # noqa: E402
from rebuild_effect import load_wrapper  # noqa: E402

WORKLOADS = (
    ("gqa_paged_prefill_causal_h24_kv4_d128_ps1", "q1_kv1"),
    ("gqa_paged_prefill_causal_h24_kv4_d128_ps1", "q154_kv154"),
    ("gqa_paged_prefill_causal_h24_kv4_d128_ps1", "b4x_q64_kv256"),
    ("gqa_paged_prefill_causal_h20_kv4_d128_ps64", "q16_p1"),
    ("gqa_paged_decode_h32_kv8_d128_ps1", "b1_kv73"),
)
MODES = ("kictl", "padded", "padded, read flush")
LONG_GAP_NS = 1_500


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="consecutive timed calls per rebuild")
    parser.add_argument("--rebuilds", type=int, default=6, help="rebuilds per workload and mode")
    args = parser.parse_args()
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
    l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0))
    flush = flush_bytes(device, {"l2CacheBytes": l2})
    chooser = random.Random()
    tiny = torch.zeros(1, device=device)
    kept: list[Any] = []
    padding = {"on": False}

    def pad() -> None:
        if padding["on"]:
            for _ in range(chooser.randrange(8)):
                tiny.zero_()

    for definition_name, label in WORKLOADS:
        definition = registry.resolve(definition_name, ["Definition"])
        spec = definition.model.spec
        assert isinstance(spec, DefinitionSpec)
        order = signature(spec, source=definition_name).inputs
        (workload,) = select_workloads(registry, definition, [label])
        inputs = list(materialize(plan_inputs(spec, workload, order, registry.read_blob), device))
        wrapper = load_wrapper(definition_name)

        def call(wrapper: Any = wrapper, inputs: list[Any] = inputs) -> Any:
            return wrapper.run(*inputs)

        for mode in MODES:
            padding["on"] = mode != "kictl"
            medians, shares, pooled = [], [], []
            for _ in range(args.rebuilds):
                kept.append(torch.empty(chooser.randrange(1, 64) << 20, dtype=torch.uint8, device=device))
                wrapper.setup(*inputs)
                spy = Spy(collector)
                timer = timing.CuptiTimer(device, flush, spy)
                kept.append(timer)
                timer.cold_translations = pad  # type: ignore[method-assign]
                if mode.endswith("read flush"):
                    timer.flush = ReadFlush(timer.flush)  # type: ignore[assignment]
                timer.prepare(call)
                for _ in range(10):
                    timer.measure(call)
                spans: list[int] = []
                gaps: list[int] = []
                for _ in range(args.calls):
                    spans.append(int(timer.measure(call).ns or 0))
                    found = call_kernels(spy.last)
                    gaps.extend(b.start_ns - a.end_ns for a, b in itertools.pairwise(found))
                medians.append(statistics.median(spans) / 1000)
                shares.append(sum(g > LONG_GAP_NS for g in gaps) / len(gaps) if gaps else None)
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
