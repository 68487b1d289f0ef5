#!/usr/bin/env python
"""How long kictl takes to compare an output with the reference's (issue 16: a suite's records phase).

Run from the repository root (any machine; the comparison is on the CPU)::

    python benchmarks/compare_speed.py [--repeats 5] [--threads 1]

Times ``kictl.bench.correctness.compare_output`` on outputs of the sizes the
bundled attention workloads give (bfloat16 ``output`` and float32 ``lse``),
near but not equal to the reference (an audit of an honest run), and with one
NaN in every chunk (every chunk takes the general rule: the slow path's cost).
Prints a table of the median of ``--repeats`` in milliseconds and elements per
second; nothing is written.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: (what, elements, dtype): h24 b8x_q512_kv2048's output (4096 queries x 24 heads x 128), its lse, a small one
CASES = [
    ("output 4096x24x128 bf16", 4096 * 24 * 128, "bfloat16"),
    ("lse 4096x24 fp32", 4096 * 24, "float32"),
    ("output 154x24x128 bf16", 154 * 24 * 128, "bfloat16"),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch's intra-op threads")
    parser.add_argument("--chunk", type=int, help="elements per chunk and torch thread (correctness._CHUNK)")
    args = parser.parse_args()
    if args.repeats < 1 or args.threads < 1 or (args.chunk is not None and args.chunk < 1):
        parser.error("--repeats, --threads and --chunk must be at least 1")
    import torch

    from kictl.bench import correctness

    torch.set_num_threads(args.threads)
    if args.chunk is not None:
        correctness._CHUNK = args.chunk
    print(f"torch threads {torch.get_num_threads()}, chunks of {correctness.chunk_elements()} elements")
    tolerance = correctness.Tolerance()
    print("| output | elements | path | median ms | M elements/s |")
    print("| --- | ---: | --- | ---: | ---: |")
    for what, count, dtype_name in CASES:
        dtype = getattr(torch, dtype_name)
        generator = torch.Generator().manual_seed(count)
        want = torch.randn(count, generator=generator).to(dtype)
        near = (want.float() + 1e-3 * torch.randn(count, generator=generator)).to(dtype)
        spoiled = near.clone()
        spoiled[:: correctness.chunk_elements()] = float("nan")
        for path, got in (("finite (an honest audit)", near), ("a NaN in every chunk", spoiled)):
            took = []
            for _ in range(args.repeats):
                began = time.perf_counter()
                correctness.compare_output("o", got, want, shape=(count,), dtype=dtype_name, tolerance=tolerance)
                took.append(time.perf_counter() - began)
            median = statistics.median(took)
            print(f"| {what} | {count} | {path} | {median * 1e3:.1f} | {count / median / 1e6:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
