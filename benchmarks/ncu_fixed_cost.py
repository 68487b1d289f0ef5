#!/usr/bin/env python
"""What Nsight Compute adds to each kernel's ``gpu__time_duration``: trivial kernels, ncu against CUPTI.

Run on the GPU machine from the repository root (the ``gpu`` extra importable; docs/bench.md)::

    python benchmarks/ncu_fixed_cost.py --cupti --out "$OUT"       # CUPTI's durations, to $OUT/cupti_fixed.json
    ncu --cache-control none --clock-control none --metrics gpu__time_duration.sum --csv \\
        python benchmarks/ncu_fixed_cost.py > "$OUT/ncu_fixed.csv"  # the profiler's, same kernels
    python benchmarks/ncu_fixed_cost.py --compare "$OUT"            # the table

Each kernel is launched ``--calls`` times alone, the device synchronised and left idle between launches (as
ncu runs kernels). The kernels go from nothing at all (ATen's spin kernel asked for 0 cycles, one thread)
to a few microseconds of memory traffic, so a difference that does not grow with the kernel is the
profiler's own cost per profiled kernel, not the kernel's time.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


#: (label, a fragment of the kernel's name) of each trivial kernel, in launch order
KERNELS = (
    ("spin, 0 cycles (1 thread)", "spin_kernel"),
    ("fill, 1 element", "FillFunctor"),
    ("fill, 4096 elements", "FillFunctor"),
    ("fill, 64 MiB", "FillFunctor"),
    ("add, 4096x4096 fp32", "CUDAFunctor_add"),
)


def kernels() -> list[tuple[str, str, Callable[[], Any]]]:
    """(label, name fragment, the launch) for each of :data:`KERNELS`."""
    import torch

    one = torch.empty(1, device="cuda")
    small = torch.empty(4096, device="cuda")
    large = torch.empty(16 * 1024 * 1024, device="cuda")  # 64 MiB: a few µs at HBM3e rates
    a, b = torch.randn(4096, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")
    launches = [
        lambda: torch.cuda._sleep(0),
        lambda: one.fill_(1.0),
        lambda: small.fill_(2.0),
        lambda: large.fill_(3.0),
        lambda: torch.add(a, b),
    ]
    return [(label, fragment, launch) for (label, fragment), launch in zip(KERNELS, launches, strict=True)]


def launch_all(calls: int, each: Callable[[str, int], None] | None = None) -> None:
    import torch

    for label, _, launch in kernels():
        for call in range(calls):
            torch.cuda.synchronize()
            time.sleep(0.002)
            launch()
            torch.cuda.synchronize()
            if each is not None:
                each(label, call)


def cupti_durations(calls: int) -> dict[str, list[int]]:
    """CUPTI's duration of each launch, by label (kictl's own collector)."""
    from kictl.bench.cupti_timer import KERNEL, CuptiCollector

    collector = CuptiCollector()
    collector.start()
    names = dict(KERNELS)
    found: dict[str, list[int]] = {label: [] for label in names}
    collector.drain()

    def each(label: str, call: int) -> None:
        activities = [a for a in collector.drain() if a.kind == KERNEL and names[label] in a.name]
        found[label].extend(a.duration_ns for a in activities)

    launch_all(calls, each)
    collector.stop()
    return found


def parse_ncu(text: str) -> dict[str, list[float]]:
    """ncu's ``gpu__time_duration.sum`` (ns) per launch, in launch order, by kernel name."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    by_name: dict[str, list[float]] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "nsecond")
        scale = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6}.get(unit, 1.0)
        by_name.setdefault(row["Kernel Name"], []).append(value * scale)
    return by_name


def compare(folder: Path, calls: int) -> str:
    """The table: per kernel, the medians of ncu's and CUPTI's durations (ncu's rows taken in launch order)."""
    cupti = json.loads((folder / "cupti_fixed.json").read_text())
    profiled = parse_ncu((folder / "ncu_fixed.csv").read_text())
    taken: dict[str, int] = {}  # launches of each kernel name already given to an earlier label
    rows = ["| kernel | ncu `gpu__time_duration` | CUPTI | ncu − CUPTI |", "| --- | ---: | ---: | ---: |"]
    for label, fragment in KERNELS:
        name = next((name for name in profiled if fragment in name), None)
        values: list[float] = []
        if name is not None:
            first = taken.get(name, 0)
            values, taken[name] = profiled[name][first : first + calls], first + calls
        if not values or not cupti.get(label):
            rows.append(f"| {label} | — | — | — |")
            continue
        ncu, mine = statistics.median(values), statistics.median(cupti[label])
        rows.append(f"| {label} | {ncu / 1e3:.2f} µs | {mine / 1e3:.2f} µs | {(ncu - mine) / 1e3:+.2f} µs |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--cupti", action="store_true", help="CUPTI's durations to --out/cupti_fixed.json")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--compare", type=Path, help="a folder with cupti_fixed.json and ncu_fixed.csv")
    args = parser.parse_args()
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    if args.compare is not None:
        missing = [f for f in ("cupti_fixed.json", "ncu_fixed.csv") if not (args.compare / f).is_file()]
        if missing:
            print(f"error: {args.compare} has no {' or '.join(missing)} (run --cupti and ncu first)", file=sys.stderr)
            return 2
        print(compare(args.compare, args.calls))
        return 0
    if args.cupti:
        if args.out is None:
            parser.error("--cupti needs --out")
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "cupti_fixed.json").write_text(json.dumps(cupti_durations(args.calls), indent=1))
        return 0
    launch_all(args.calls)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
