#!/usr/bin/env python
"""Does the GPU's temperature move a small kernel's figure? (issue 11: three processes)

Separate ``kictl bench`` processes read the decode kernel of ``b1_kv73`` (one kernel, about 6.4 µs, bound by
memory latency) up to 0.45 µs apart, and the gap between FlashInfer prefill's two kernels stays long in 70-95% of
the calls of some runs for minutes at a time (RESULTS.md, calls BB-BF), while each process's rebuilds of its
buffers agree better than the processes do.  The three processes of a check run one after the other, on a GPU
whose temperature the runs before them set.  This times the bundled FlashInfer wrapper in rounds in one process,
with kictl's ``CuptiTimer``, reading NVML's GPU and memory temperatures after each round, the GPU first idle, then
heated by bf16 GEMMs between rounds, then left to cool.

Run on a CUDA machine with flashinfer and cupti-python (``. benchmarks/h200_setup.sh``), from the repository
root::

    python3 benchmarks/thermal_effect.py [--calls 150] [--heat-s 8] [--rounds 4]

Prints a row per round: the temperatures, the SM clock, each workload's median and the share of long gaps of the
two-kernel call; nothing is written.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

from small_calls import LONG_GAP_NS, call_kernels, gaps, start  # noqa: E402

WORKLOADS = (
    ("gqa_paged_decode_h32_kv8_d128_ps1", "b1_kv73"),
    ("gqa_paged_decode_h32_kv8_d128_ps1", "b1_kv4096"),
    ("gqa_paged_prefill_causal_h24_kv4_d128_ps1", "q154_kv154"),
    ("gqa_paged_prefill_causal_h24_kv4_d128_ps1", "b4x_q64_kv256"),
)


def temperatures(nvml: Any, handle: Any) -> tuple[int, int | None, int, int]:
    """GPU and memory temperature (°C; memory ``None`` where NVML has no such field), SM clock, power (W)."""
    gpu = int(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))
    memory = None
    field = getattr(nvml, "NVML_FI_DEV_MEMORY_TEMP", None)
    if field is not None:
        try:
            (value,) = nvml.nvmlDeviceGetFieldValues(handle, [field])
            if value.nvmlReturn == 0:
                memory = int(value.value.uiVal)
        except Exception:  # a field this driver does not have
            memory = None
    clock = int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
    power = round(int(nvml.nvmlDeviceGetPowerUsage(handle)) / 1000)
    return gpu, memory, clock, power


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=150, help="timed calls per workload and round")
    parser.add_argument("--heat-s", type=float, default=8.0, help="seconds of GEMMs before each hot round")
    parser.add_argument("--rounds", type=int, default=4, help="rounds idle, hot and cooling each")
    args = parser.parse_args()
    import torch

    harness = start()
    if harness is None:
        return 2
    device, collector = harness.device, harness.collector
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    timer = harness.timer()
    calls: list[tuple[str, Any]] = []
    for definition_name, label in WORKLOADS:
        inputs, wrapper = harness.workload(definition_name, label)

        def call(wrapper: Any = wrapper, inputs: list[Any] = inputs) -> Any:
            return wrapper.run(*inputs)

        calls.append((label, call))
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    timer.prepare(calls[0][1])
    for _, call in calls:
        for _ in range(10):
            timer.measure(call)
    print(
        "| round | GPU °C | memory °C | SM MHz | W | "
        + " | ".join(f"{label} µs" for label, _ in calls)
        + " | long gaps (prefill) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in calls) + " | --- |")
    plan = [("idle", n) for n in range(args.rounds)]
    plan += [("hot", n) for n in range(args.rounds)]
    plan += [("cooling", n) for n in range(args.rounds)]
    for phase, n in plan:
        if phase == "hot":
            ends = time.monotonic() + args.heat_s
            while time.monotonic() < ends:
                for _ in range(20):
                    a @ a
                torch.cuda.synchronize()
        elif phase == "cooling":
            time.sleep(args.heat_s)
        gpu, memory, clock, power = temperatures(pynvml, handle)
        medians, shares = [], []
        for label, call in calls:
            spans: list[int] = []
            between: list[int] = []
            for _ in range(args.calls):
                spans.append(int(timer.measure(call).ns or 0))
                between.extend(gaps(call_kernels(collector.last)))
            medians.append(statistics.median(spans) / 1000)
            if between and "kv4096" not in label:
                shares.append(f"{label} {sum(g > LONG_GAP_NS for g in between) / len(between):.0%}")
        print(
            f"| {phase} {n + 1} | {gpu} | {'-' if memory is None else memory} | {clock} | {power} | "
            + " | ".join(f"{m:.2f}" for m in medians)
            + f" | {', '.join(shares)} |",
            flush=True,
        )
    collector.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
