#!/usr/bin/env python
"""What of a process makes separate ``kictl bench`` processes disagree on a small kernel? (issue 11)

Three ``kictl bench`` processes agree within 2% on 16 of the 19 attention workloads; the smallest calls (6-13 µs)
spread 2.8-4.6% (RESULTS.md, calls AK and AX), and in one process eight placements of the same inputs spread
0.9-2.0% while a second process read every placement 0.3-0.4 µs higher (call AN).  A run times one set of
tensors, one L2-flush buffer and one FlashInfer workspace, all allocated once in its process.  This rebuilds
them in one process, each rebuild after spacers (large and small allocations kept alive, so that nothing reuses
a freed block), and times the bundled FlashInfer wrapper with kictl's own ``CuptiTimer`` after each:

- ``full``: new input tensors, a new FlashInfer wrapper and workspace (``setup()`` again), a new timer (its own
  flush buffer): a process's whole placement, redrawn;
- ``flush``: a new timer only (the first rebuild's inputs and plan);
- ``inputs``: new input tensors and a new wrapper, the first rebuild's timer.

If ``full`` rebuilds spread in one process as much as separate processes do, the process's placement is what
moves the figure, and a run that rotates its timed calls over several placements would average it out: the
``pooled`` column is the median over every ``full`` rebuild's samples, what such a run would report, to be
compared across processes (run the script three times, then ``--table``).

Run on a CUDA machine with flashinfer and cupti-python (``. benchmarks/h200_setup.sh``), from the repository
root::

    python3 benchmarks/rebuild_effect.py --out DIR [--calls 120] [--rebuilds 6]
    python3 benchmarks/rebuild_effect.py --table DIR     # every process's file in DIR side by side

Each process writes ``DIR/rebuild-<pid>.json``: per workload and mode, each rebuild's median (ns) and, for
``full``, the pooled median.
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

from small_calls import load_wrapper, start  # noqa: E402

#: the smallest calls of each attention definition (calls AK, AX: the ones outside 2%, and their neighbours)
SMALL = (
    ("gqa_paged_decode_h32_kv8_d128_ps1", "b1_kv73"),
    ("gqa_paged_decode_h32_kv8_d128_ps1", "b1_kv4096"),
    ("gqa_paged_prefill_causal_h20_kv4_d128_ps64", "q16_p1"),
    ("gqa_paged_prefill_causal_h24_kv4_d128_ps1", "q1_kv1"),
    ("gqa_paged_prefill_causal_h24_kv4_d128_ps1", "q154_kv154"),
    ("gqa_paged_prefill_causal_h24_kv4_d128_ps1", "b4x_q64_kv256"),
)
MODES = ("full", "flush", "inputs")


def measure(args: argparse.Namespace) -> int:
    import torch

    harness = start()
    if harness is None:
        return 2
    device = harness.device
    launch_phases = 1 if args.no_padding else None
    chooser = random.Random(args.seed if args.seed is not None else os.getpid())
    kept: list[Any] = []  # spacers, old timers, old wrappers: nothing freed, so nothing reused

    def spacers() -> None:
        kept.append(torch.empty(chooser.randrange(1, 64) << 20, dtype=torch.uint8, device=device))
        for _ in range(chooser.randrange(1, 6)):
            kept.append(torch.empty(chooser.randrange(1, 1024) << 10, dtype=torch.uint8, device=device))

    found: dict[str, Any] = {"pid": os.getpid(), "calls": args.calls, "rebuilds": args.rebuilds, "workloads": {}}
    for definition_name, label in SMALL:
        if args.workload and label not in args.workload:
            continue
        base = harness.inputs(definition_name, label)
        wrapper = load_wrapper(definition_name)

        def fresh_inputs(wrapper: Any = wrapper, base: list[Any] = base) -> list[Any]:
            kept.append(list(wrapper._SLOTS))
            wrapper._SLOTS.clear()  # a new wrapper and workspace at setup()
            inputs = [t.clone() if isinstance(t, torch.Tensor) else t for t in base]
            wrapper.setup(*inputs)
            return inputs

        def new_timer() -> Any:
            timer = harness.timer(launch_phases)
            kept.append(timer)
            return timer

        def samples(timer: Any, inputs: list[Any], wrapper: Any = wrapper) -> list[int]:
            wrapper.setup(*inputs)  # the plan for these inputs' index tensors (setup() again is idempotent)

            def call() -> Any:
                return wrapper.run(*inputs)

            timer.prepare(call)
            for _ in range(10):  # warm-up: the timer's spin is calibrated from these calls' host time
                timer.measure(call)
            return [int(timer.measure(call).ns) for _ in range(args.calls)]

        spacers()
        first_inputs, first_timer = fresh_inputs(), new_timer()
        first_slots = list(wrapper._SLOTS)  # the first rebuild's wrapper and workspace, for `flush` and at the end
        result: dict[str, Any] = {}
        pooled: list[int] = []
        for mode in MODES:
            medians = []
            if mode == "flush":
                wrapper._SLOTS[:] = first_slots
            for n in range(args.rebuilds):
                if n > 0 or mode != "full":
                    spacers()
                if mode == "full":
                    inputs, timer = (first_inputs, first_timer) if n == 0 else (fresh_inputs(), new_timer())
                elif mode == "flush":
                    inputs, timer = first_inputs, new_timer()
                else:
                    inputs, timer = fresh_inputs(), first_timer
                got = samples(timer, inputs)
                medians.append(round(statistics.median(got)))
                if mode == "full":
                    pooled.extend(got)
            result[mode] = medians
        result["pooled"] = round(statistics.median(pooled))
        wrapper._SLOTS[:] = first_slots
        again = samples(first_timer, first_inputs)
        result["first again"] = round(statistics.median(again))
        found["workloads"][f"{definition_name}/{label}"] = result
        print(
            f"{label}: "
            + "; ".join(f"{m} {', '.join(f'{v / 1000:.2f}' for v in result[m])}" for m in MODES)
            + f"; pooled {result['pooled'] / 1000:.2f}; first again {result['first again'] / 1000:.2f} µs",
            flush=True,
        )
    harness.collector.stop()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rebuild-{os.getpid()}.json").write_text(json.dumps(found, indent=1))
    return 0


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def short(name: str) -> str:
    definition, label = name.split("/")
    return f"{'decode' if 'decode' in definition else 'ps64' if 'ps64' in definition else 'h24'} `{label}`"


def table(folder: Path) -> int:
    """Every process's figures side by side: the spread of the rebuilds within each, and across processes."""
    runs = [json.loads(p.read_text()) for p in sorted(folder.glob("rebuild-*.json"))]
    if not runs:
        print(f"no rebuild-*.json in {folder}", file=sys.stderr)
        return 2
    print(
        "| workload | first rebuild, per process µs | spread | `full` rebuilds' spread in each process | "
        "`flush` | `inputs` | pooled, per process µs | spread |"
    )
    print("| --- | --- | ---: | --- | --- | --- | --- | ---: |")
    for name in runs[0]["workloads"]:
        got = [run["workloads"][name] for run in runs if name in run["workloads"]]
        first = [g["full"][0] / 1000 for g in got]
        pooled = [g["pooled"] / 1000 for g in got]

        def within(mode: str, got: list[Any] = got) -> str:
            return ", ".join(f"{spread(g[mode]):.1%}" for g in got)

        print(
            f"| {short(name)} | {', '.join(f'{v:.2f}' for v in first)} | "
            f"{spread(first):.1%} | {within('full')} | {within('flush')} | {within('inputs')} | "
            f"{', '.join(f'{v:.2f}' for v in pooled)} | {spread(pooled):.1%} |"
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="folder for this process's rebuild-<pid>.json")
    parser.add_argument("--table", type=Path, help="print the table of the files in this folder instead")
    parser.add_argument("--calls", type=int, default=120, help="timed calls per rebuild")
    parser.add_argument("--rebuilds", type=int, default=6, help="rebuilds per mode")
    parser.add_argument("--workload", action="append", help="only these workload labels")
    parser.add_argument("--seed", type=int, help="the spacers' sizes (default: the process id)")
    parser.add_argument(
        "--no-padding", action="store_true", help="time without kictl's launch padding (as call BA ran, before it)"
    )
    args = parser.parse_args()
    if args.table is not None:
        return table(args.table)
    if not args.out or args.calls < 1 or args.rebuilds < 2:
        parser.error("give --out, --calls of at least 1 and --rebuilds of at least 2 (or --table)")
    return measure(args)


if __name__ == "__main__":
    raise SystemExit(main())
