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
import itertools
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for folder in (ROOT, ROOT / "benchmarks"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from address_effect import Spy, call_kernels, short  # noqa: E402
from rebuild_effect import load_wrapper  # noqa: E402

DEFINITION = "gqa_paged_prefill_causal_h24_kv4_d128_ps1"
WORKLOADS = ("q154_kv154", "b4x_q64_kv256", "q1_kv1")
MODES = ("kictl", "1 ms spin", "no flush", "flush by read")
LONG_GAP_NS = 1_500


class ReadFlush:
    """Stands in for the timer's flush buffer: ``zero_()`` reads the buffer instead of writing it."""

    def __init__(self, buffer: Any) -> None:
        import torch

        self.words = buffer.view(torch.int32)
        self.sink: Any = None

    def zero_(self) -> None:
        self.sink = self.words.sum()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls per workload and mode")
    args = parser.parse_args()
    if args.calls < 10:
        parser.error("--calls must be at least 10")
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
    definition = registry.resolve(DEFINITION, ["Definition"])
    spec = definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    order = signature(spec, source=DEFINITION).inputs
    wrapper = load_wrapper(DEFINITION)
    print("| workload | mode | span µs | kernels µs | gap µs | gaps over 1.5 µs | gap below, above µs |")
    print("| --- | --- | ---: | --- | ---: | ---: | --- |")
    for workload in select_workloads(registry, definition, list(WORKLOADS)):
        inputs = list(materialize(plan_inputs(spec, workload, order, registry.read_blob), device))
        wrapper.setup(*inputs)

        def call(inputs: list[Any] = inputs) -> Any:
            return wrapper.run(*inputs)

        spy = Spy(collector)
        timer = timing.CuptiTimer(device, flush, spy)
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
                rows[mode].append((int(measured.ns or 0), call_kernels(spy.last)))
        for mode in MODES:
            spans = [ns for ns, _ in rows[mode]]
            kernels: dict[str, list[int]] = {}
            gaps: list[int] = []
            for _, found in rows[mode]:
                for kernel in found:
                    kernels.setdefault(short(kernel.name), []).append(kernel.duration_ns)
                gaps.extend(b.start_ns - a.end_ns for a, b in itertools.pairwise(found))
            below = [g for g in gaps if g <= LONG_GAP_NS]
            above = [g for g in gaps if g > LONG_GAP_NS]

            def m(values: list[int]) -> str:
                return f"{statistics.median(values) / 1000:.2f}" if values else "-"

            print(
                f"| {workload.name} | {mode} | {m(spans)} | "
                + ", ".join(f"{k} {m(v)}" for k, v in kernels.items())
                + f" | {m(gaps)} | {len(above) / max(1, len(gaps)):.0%} | {m(below)}, {m(above)} |",
                flush=True,
            )
        print(f"<!-- {workload.name}: calibrated spin {calibrated} ns -->")
    collector.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
