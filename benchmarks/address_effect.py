#!/usr/bin/env python
"""Which allocation flips a small FlashInfer call between two figures? (issue 11: three processes)

``benchmarks/rebuild_effect.py`` (call BA) found ``q154_kv154`` and ``b4x_q64_kv256`` reading one of two figures
0.5-0.6 µs apart, chosen when their state is rebuilt (even a new ``setup()`` on the same tensors) and kept for every
call after: a process then reads one or the other, and three processes spread 4-5%.  This times the bundled
FlashInfer wrapper call by call with kictl's ``CuptiTimer`` and keeps, per call, each kernel's CUPTI duration, the
gap between the call's kernels and the addresses of its outputs, in four phases of one process:

- ``fixed``: nothing changes between calls;
- ``outputs moved``: before each call a spacer of a random size is allocated (the last 32 kept), so the caching
  allocator hands FlashInfer's outputs other blocks;
- ``inputs moved``: each call takes one of 12 copies of the floating-point inputs at random (the index tensors,
  and so the plan, shared);
- ``re-planned``: ``setup()`` again on the same tensors every 25 calls.

Run on a CUDA machine with flashinfer and cupti-python (``. benchmarks/h200_setup.sh``), from the repository
root::

    python3 benchmarks/address_effect.py --out DIR [--calls 400]
    python3 benchmarks/address_effect.py --table DIR     # the summary again, from DIR/address-*.json

Prints per workload and phase the span's median and 10th-90th percentiles, and for the calls below and above
the phase's midpoint (between its 10th and 90th percentiles) the kernels' medians and the gap's: which part
of the call the second figure is in, and which addresses the slow calls had.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

from small_calls import call_kernels, gaps, short, start  # noqa: E402

WORKLOADS = (
    ("gqa_paged_prefill_causal_h24_kv4_d128_ps1", "q154_kv154"),
    ("gqa_paged_prefill_causal_h24_kv4_d128_ps1", "b4x_q64_kv256"),
    ("gqa_paged_prefill_causal_h24_kv4_d128_ps1", "q1_kv1"),
    ("gqa_paged_decode_h32_kv8_d128_ps1", "b1_kv73"),
)
PHASES = ("fixed", "outputs moved", "inputs moved", "re-planned")
PLACEMENTS = 12
REPLAN_EVERY = 25


def measure(args: argparse.Namespace) -> int:
    import torch

    harness = start()
    if harness is None:
        return 2
    device, collector = harness.device, harness.collector
    chooser = random.Random(args.seed if args.seed is not None else os.getpid())
    found: dict[str, Any] = {"pid": os.getpid(), "workloads": {}}
    for definition_name, label in WORKLOADS:
        inputs, wrapper = harness.workload(definition_name, label)
        copies = [
            [t.clone() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs]
            for _ in range(PLACEMENTS)
        ]
        timer = harness.timer(1 if args.no_padding else None)
        current = {"inputs": inputs}

        def call(wrapper: Any = wrapper, current: dict[str, Any] = current) -> Any:
            return wrapper.run(*current["inputs"])

        timer.prepare(call)
        for _ in range(10):
            timer.measure(call)
        rows: list[dict[str, Any]] = []
        ring: list[Any] = []
        for phase in PHASES:
            for n in range(args.calls):
                placement = -1
                current["inputs"] = inputs
                if phase == "outputs moved":
                    ring.append(torch.empty(chooser.randrange(1, 2048) << 9, dtype=torch.uint8, device=device))
                    del ring[:-32]
                elif phase == "inputs moved":
                    placement = chooser.randrange(PLACEMENTS)
                    current["inputs"] = copies[placement]
                elif phase == "re-planned" and n % REPLAN_EVERY == 0:
                    wrapper.setup(*inputs)
                measured = timer.measure(call)
                kernels = call_kernels(collector.last)
                outputs = measured.outputs if isinstance(measured.outputs, tuple | list) else (measured.outputs,)
                rows.append(
                    {
                        "phase": phase,
                        "ns": measured.ns,
                        "kernels": [[short(k.name), k.duration_ns] for k in kernels],
                        "gaps": gaps(kernels),
                        "outputs": [int(t.data_ptr()) for t in outputs if isinstance(t, torch.Tensor)],
                        "placement": placement,
                        "epoch": n // REPLAN_EVERY if phase == "re-planned" else -1,
                    }
                )
            ring.clear()
        found["workloads"][f"{definition_name}/{label}"] = rows
        summarize(f"{definition_name}/{label}", rows)
    collector.stop()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"address-{os.getpid()}.json").write_text(json.dumps(found))
    return 0


def _median(values: list[int]) -> str:
    return f"{statistics.median(values) / 1000:.2f}" if values else "-"


def summarize(name: str, rows: list[dict[str, Any]]) -> None:
    label = name.split("/")[1]
    for phase in PHASES:
        got = [r for r in rows if r["phase"] == phase and r["ns"] is not None]
        if not got:
            continue
        spans = sorted(r["ns"] for r in got)
        p10, p90 = spans[len(spans) // 10], spans[(9 * len(spans)) // 10]
        middle = (p10 + p90) / 2
        parts = []
        for side, chosen in (
            ("low", [r for r in got if r["ns"] <= middle]),
            ("high", [r for r in got if r["ns"] > middle]),
        ):
            kernels: dict[str, list[int]] = {}
            for r in chosen:
                for kernel, duration in r["kernels"]:
                    kernels.setdefault(kernel, []).append(duration)
            gaps = [g for r in chosen for g in r["gaps"]]
            parts.append(
                f"{side} {len(chosen)}: span {_median([r['ns'] for r in chosen])}, "
                + ", ".join(f"{k} {_median(v)}" for k, v in kernels.items())
                + f", gap {_median(gaps)}"
            )
        detail = ""
        if phase == "outputs moved":
            high = {r["outputs"][0] % (2 << 20) for r in got if r["ns"] > middle and r["outputs"]}
            low = {r["outputs"][0] % (2 << 20) for r in got if r["ns"] <= middle and r["outputs"]}
            detail = (
                f"; first output's offset in its 2 MiB page, distinct: low {len(low)}, high {len(high)}, "
                f"both {len(low & high)}"
            )
        elif phase in ("inputs moved", "re-planned"):
            key = "placement" if phase == "inputs moved" else "epoch"
            groups: dict[int, list[int]] = {}
            for r in got:
                groups.setdefault(r[key], []).append(r["ns"])
            detail = f"; per {key}: " + " ".join(f"{_median(v)}" for _, v in sorted(groups.items()))
        print(
            f"{label} | {phase} | median {_median(spans)} p10 {p10 / 1000:.2f} p90 {p90 / 1000:.2f} | "
            + " | ".join(parts)
            + detail,
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="folder for this process's address-<pid>.json")
    parser.add_argument("--table", type=Path, help="summarize the files in this folder instead")
    parser.add_argument("--calls", type=int, default=400, help="timed calls per phase")
    parser.add_argument("--seed", type=int, help="the spacers' sizes and the placements' order (default: the pid)")
    parser.add_argument(
        "--no-padding", action="store_true", help="time without kictl's launch padding (as call BB ran, before it)"
    )
    args = parser.parse_args()
    if args.table is not None:
        for path in sorted(args.table.glob("address-*.json")):
            print(f"## {path.name}")
            for name, rows in json.loads(path.read_text())["workloads"].items():
                summarize(name, rows)
        return 0
    if not args.out or args.calls < REPLAN_EVERY:
        parser.error(f"give --out and --calls of at least {REPLAN_EVERY} (or --table)")
    return measure(args)


if __name__ == "__main__":
    raise SystemExit(main())
