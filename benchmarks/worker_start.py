#!/usr/bin/env python
"""Where a bench worker's start goes, step by step (issue 16: a suite's ``start`` phase).

Run from the repository root, on the machine that benches (the lent H200: after ``. benchmarks/h200_setup.sh``)::

    python benchmarks/worker_start.py [--device cuda:0] [--processes 1 6] [--repeats 2]

Each measurement starts fresh Python processes that do what ``kictl.bench.worker.main`` does before it says
``Ready``, in its order, and time each step: import torch; kictl's modules; bind the timer's originals and
pin; on a GPU, set the device and initialise CUDA, attach CUPTI (``worker._attach_cupti``; not kictl's
reference workers, ``--no-cupti``), and the probe that loads cuBLAS; capture the environment; take the
integrity baseline. ``--processes 6`` starts six at once, as a session of two implementations and four
reference workers does (unsandboxed: bubblewrap's own start is not in these figures). Prints the median of
each step over all processes and repeats, in seconds; nothing is written.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
marks = [("begin", time.perf_counter())]
def mark(name):
    marks.append((name, time.perf_counter()))
import torch
mark("import torch")
from kictl.bench import environment, integrity, timing, worker
mark("import kictl")
timing.bind_originals()
worker._pin([], 1)
mark("bind, pin")
device, cupti = sys.argv[1], sys.argv[2] == "1"
if device.startswith("cuda"):
    torch.cuda.set_device(torch.device(device))
    torch.cuda.init()
    mark("CUDA init")
    collector = None
    if cupti:
        collector, error = worker._attach_cupti()
        mark("attach CUPTI")
    probe = torch.randn(64, 64, device=device)
    (probe @ probe).sum().item()
    if collector is not None:
        collector.drain()
    mark("probe (cuBLAS)")
environment.capture(device)
mark("environment")
integrity.take_baseline()
mark("baseline")
print(json.dumps([[name, t - marks[0][1]] for name, t in marks]))
"""


def run(device: str, processes: int, cupti: bool) -> list[dict[str, float]]:
    """One start of ``processes`` processes at once; each one's step durations."""
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, device, "1" if cupti else "0"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    found = []
    for child in children:
        out, _ = child.communicate(timeout=300)
        marks = json.loads(out.strip().splitlines()[-1])
        steps = {name: marks[n][1] - marks[n - 1][1] for n, (name, _) in enumerate(marks) if n}
        steps["total"] = marks[-1][1]
        found.append(steps)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 6])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-cupti", action="store_true", help="as kictl's reference workers start")
    args = parser.parse_args()
    print("| processes at once | step | median s | max s |")
    print("| ---: | --- | ---: | ---: |")
    for count in args.processes:
        rows = [steps for _ in range(args.repeats) for steps in run(args.device, count, not args.no_cupti)]
        for name in rows[0]:
            values = [row[name] for row in rows]
            print(f"| {count} | {name} | {statistics.median(values):.3f} | {max(values):.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
