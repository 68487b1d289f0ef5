#!/usr/bin/env python
"""Does what runs between a small kernel's calls move its CUPTI figure? (issue 11: reproducibility)

In the h24 suites of the fifth session, FlashInfer's smallest workloads read 0.2-1.4 µs higher, and spread more
across processes, when the reference's timed calls took turns with FlashInfer's than in sessions of FlashInfer
alone (RESULTS.md).  This separates the candidate causes in one process, without kictl's sandbox or wire: the
bundled FlashInfer wrapper on h24 ps1 workloads, each call timed by kictl's own ``CuptiTimer`` (persisting-L2
reset, L2 flush, device spin, CUPTI span), the modes taking turns call by call:

- ``alone``: nothing between two timed calls but the harness;
- ``after reference``: the definition's reference on the same inputs, untimed and synchronised, before each call
  (a host-bound call of several milliseconds with many small kernels, as in the suite);
- ``after reference, 1 ms spin``: the same, with a device spin of 1 ms before the call instead of the calibrated
  one (if the GPU's clocks dropped during the neighbour's host-bound call, a longer busy spin restores them);
- ``after idle``: the host sleeps as long as a reference call took, the device idle (the GPU's clocks alone);
- ``after traffic``: a device-wide read of 1 GiB before the call (address translation and memory state alone);
- with ``--touch``: ``after touch``, one byte of every 64 KiB of an 8 GiB buffer read before the call (address
  translation alone: 128 K bytes read), and ``after reference, then touch``;
- with ``--timer-touch``: the timer reads its own touch buffer before every call, as ``kictl bench`` does by
  default since the sixth session (``alone``, ``after reference``, ``after traffic``): the modes should agree.

Run on a CUDA machine with flashinfer and cupti-python (``. benchmarks/h200_setup.sh``), from the repository
root::

    python3 benchmarks/neighbour_effect.py [--calls 200] [--workload q154_kv154 ...]

Prints, per workload and mode, the median and the 10th-90th percentiles of CUPTI's figure in µs, and the SM clock
NVML reads after the runs; nothing is written.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFINITION = "gqa_paged_prefill_causal_h24_kv4_d128_ps1"
WORKLOADS = ("q1_kv1", "q154_kv154", "b4x_q64_kv256")
MODES = ("alone", "after reference", "after reference, 1 ms spin", "after idle", "after traffic")
#: ``--touch``: whether touching every 64 KiB of an 8 GiB buffer (address translation only, next to no bytes)
#: moves the figure as the neighbour does, and whether it makes the two alike
TOUCH_MODES = ("alone", "after reference", "after traffic", "after touch", "after reference, then touch")
TOUCH_BYTES = 8 << 30
TOUCH_STRIDE = 64 << 10
TIMER_TOUCH_MODES = ("alone", "after reference", "after traffic")


def load_flashinfer() -> Any:
    """The bundled FlashInfer wrapper of the h24 ps1 definition, as a module."""
    path = ROOT / "implementations" / DEFINITION / "flashinfer_wrapper" / "flashinfer_prefill.py"
    spec = importlib.util.spec_from_file_location("flashinfer_prefill", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class H24:
    """What both experiments on the h24 ps1 workloads start from (``h24_session``)."""

    device: str
    collector: Any
    registry: Any
    definition: Any
    spec: Any
    order: Any
    flashinfer: Any
    flush_bytes: int

    def workloads(self, labels: list[str] | None) -> list[Any]:
        from kictl.bench.session import select_workloads

        return list(select_workloads(self.registry, self.definition, labels or list(WORKLOADS)))

    def inputs(self, workload: Any) -> list[Any]:
        from kictl.bench.inputs import materialize, plan_inputs

        return list(materialize(plan_inputs(self.spec, workload, self.order, self.registry.read_blob), self.device))


def h24_session() -> H24 | None:
    """CUPTI attached, kictl's timer functions bound, the h24 ps1 definition and FlashInfer loaded (``None``:
    no CUDA device)."""
    import torch

    from kictl.bench import timing
    from kictl.bench.cupti_timer import CuptiCollector
    from kictl.bench.options import flush_bytes
    from kictl.definitions import signature
    from kictl.records import DefinitionSpec
    from kictl.store import Registry

    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return None
    device = "cuda:0"
    collector = CuptiCollector()
    collector.start()
    timing.bind_originals()
    registry = Registry(ROOT)
    definition = registry.resolve(DEFINITION, ["Definition"])
    spec = definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0))
    return H24(
        device,
        collector,
        registry,
        definition,
        spec,
        signature(spec, source=DEFINITION).inputs,
        load_flashinfer(),
        flush_bytes(device, {"l2CacheBytes": l2}),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="timed calls per workload and mode")
    parser.add_argument("--workload", action="append", help=f"h24 ps1 workload label (default {WORKLOADS})")
    parser.add_argument("--touch", action="store_true", help=f"the modes {TOUCH_MODES} instead")
    parser.add_argument(
        "--timer-touch", action="store_true", help=f"the timer reads its touch buffer; the modes {TIMER_TOUCH_MODES}"
    )
    args = parser.parse_args()
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    if args.touch and args.timer_touch:
        parser.error("--touch and --timer-touch are two different experiments: give one")
    modes = TOUCH_MODES if args.touch else TIMER_TOUCH_MODES if args.timer_touch else MODES
    import torch

    from kictl.bench import timing
    from kictl.bench.gpu_state import Nvml
    from kictl.errors import EnvError

    session = h24_session()
    if session is None:
        return 2
    device, collector, flashinfer, flush_bytes = (
        session.device,
        session.collector,
        session.flashinfer,
        session.flush_bytes,
    )
    reference: dict[str, Any] = {}
    exec(compile(session.spec.reference, "reference.py", "exec"), reference)  # kictl's copy of the definition's text
    traffic = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    touched = torch.zeros(TOUCH_BYTES, dtype=torch.uint8, device=device)[::TOUCH_STRIDE] if args.touch else None
    try:
        nvml: Any = Nvml(0)
    except EnvError:  # NVML is optional here: the clock column then says so
        nvml = None
    print("| workload | mode | median µs | p10 µs | p90 µs | SM MHz after |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for workload in session.workloads(args.workload):
        inputs = session.inputs(workload)
        flashinfer.setup(*inputs)

        def call(inputs: list[Any] = inputs) -> Any:
            return flashinfer.run(*inputs)

        timer = timing.CuptiTimer(device, flush_bytes, collector, TOUCH_BYTES if args.timer_touch else 0)
        timer.prepare(call)
        for _ in range(10):  # the warm-up: the spin is calibrated from these calls' host time
            timer.measure(call)
        calibrated = timer.spin_ns
        began = time.perf_counter()
        reference["run"](*inputs)
        torch.cuda.synchronize(device)
        reference_s = time.perf_counter() - began
        samples: dict[str, list[float]] = {mode: [] for mode in modes}
        clocks: dict[str, int | None] = {}
        for _ in range(args.calls):
            for mode in modes:
                if mode.startswith("after reference"):
                    reference["run"](*inputs)
                    torch.cuda.synchronize(device)
                elif mode == "after idle":
                    torch.cuda.synchronize(device)
                    time.sleep(reference_s)
                elif mode == "after traffic":
                    traffic.sum(dtype=torch.int64)
                    torch.cuda.synchronize(device)
                if mode.endswith("touch") and touched is not None:
                    touched.sum(dtype=torch.int64)
                    torch.cuda.synchronize(device)
                timer.spin_ns = 1_000_000 if mode.endswith("1 ms spin") else calibrated
                samples[mode].append(timer.measure(call).ns / 1000)
                if nvml is not None:
                    clocks[mode] = nvml.read().sm_clock_mhz
        for mode in modes:
            values = sorted(samples[mode])
            p10, p90 = values[len(values) // 10], values[(9 * len(values)) // 10]
            clock = clocks.get(mode)
            print(
                f"| {workload.name} | {mode} | {statistics.median(values):.2f} | {p10:.2f} | {p90:.2f} | "
                f"{'-' if clock is None else clock} |"
            )
        print(f"<!-- {workload.name}: calibrated spin {calibrated} ns, reference call {reference_s * 1e3:.1f} ms -->")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
