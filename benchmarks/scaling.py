"""How a suite's wall time scales with the number of workers (issue 16, DESIGN §12).

Claim (docs/scale-out.md; RESULTS.md "Scale-out on CPU workers"): a suite's jobs spread over CPU workers, largest
first; the longest job caps the speed-up near 3x. Machine and command: any machine (figures: the 2-core dev VM),
`python benchmarks/scaling.py --measure 1,2`.

Measures, then simulates:

1. runs a definition's suite (every workload × the implementations given)
   with ``kictl.executors.run_bench_jobs`` on a local pool of N CPU workers,
   for each N of ``--measure``: the wall time to start the workers, the wall
   time of the jobs, and every job's own wall time as the driver saw it;
2. replays the job times of the one-worker run through the scheduler's own
   rule (the next job in plan order goes to the first worker that is free)
   for each N of ``--workers``, plus the measured start-up: the wall time the
   suite would take on N workers that each ran a job as fast as the single
   worker did (N GPUs of one product, or N uncontended CPU cores).

Measured rows beyond the machine's cores share cores and are slower than
the simulation; on GPUs each worker has its own device.  Run with
``python benchmarks/scaling.py`` from the repository root (the registry is
the repository's own, read only); ``--device cuda`` with ``--measure
1,2,4,8`` on a GPU node.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kictl.bench.session import BenchOptions  # noqa: E402
from kictl.executors import run_bench_jobs  # noqa: E402
from kictl.store import Registry  # noqa: E402


def makespan(durations: list[float], workers: int) -> float:
    """Wall time of jobs in order, each to the first free of ``workers`` (greedy list scheduling)."""
    free = [0.0] * workers
    heapq.heapify(free)
    end = 0.0
    for seconds in durations:
        start = heapq.heappop(free)
        finish = start + seconds
        end = max(end, finish)
        heapq.heappush(free, finish)
    return end


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--definition", default="rmsnorm_h4096")
    parser.add_argument(
        "--impl",
        action="append",
        help="implementation (repeatable); default: the definition's bundled implementations",
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda (workers: N CPU workers or the first N GPUs)")
    parser.add_argument("--measure", default="1,2", help="worker counts to run for real")
    parser.add_argument("--workers", default="1,2,4,8,16", help="worker counts to simulate")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--save", type=Path, help="write the measurements (job wall times) to this JSON file")
    parser.add_argument("--replay", type=Path, help="simulate from a file --save wrote instead of measuring")
    args = parser.parse_args()

    impls = args.impl or sorted(str(p) for p in (ROOT / "implementations" / args.definition).iterdir() if p.is_dir())
    options = BenchOptions(device=args.device, warmup=1, iterations=args.iterations, trials=1, rounds=args.rounds)
    registry = Registry(ROOT)
    measured: dict[int, tuple[float, float, list[float]]] = {}
    if args.replay is not None:
        saved = json.loads(args.replay.read_text())
        measured = {int(count): (row[0], row[1], row[2]) for count, row in saved.items()}
    for count in [int(text) for text in args.measure.split(",") if text and args.replay is None]:
        begun = time.perf_counter()
        report, outcome = run_bench_jobs(registry, args.definition, impls, options, devices=str(count))
        wall = time.perf_counter() - begun
        # each job's wall time, in planned order (the report's order; jobs are handed out largest first)
        seconds = {result.run.digest: result.seconds for result in outcome.results if result.run is not None}
        durations = [seconds[summary.run.digest] for summary in report.runs if summary.run is not None]
        failed = sum(1 for r in report.runs if r.status != "passed") + len(report.skipped)
        measured[count] = (wall, outcome.startup_s, durations)
        print(
            f"measured {count} worker(s): {len(outcome.results)} jobs, {failed} not passed, wall {wall:.1f} s "
            f"(start-up {outcome.startup_s:.1f} s, jobs {outcome.run_s:.1f} s)",
            file=sys.stderr,
        )
    if args.save is not None:
        args.save.write_text(json.dumps({str(count): list(row) for count, row in measured.items()}, indent=1) + "\n")
    if 1 not in measured:
        print("the simulation replays the one-worker run: include 1 in --measure", file=sys.stderr)
        return 2
    _, startup, durations = measured[1]
    print(
        f"# {args.definition}: {len(durations)} jobs ({len(impls)} implementations x workloads), device {args.device}"
    )
    print(f"# machine: {os.cpu_count()} CPU cores; job wall times on 1 worker: sum {sum(durations):.1f} s,")
    print(f"#   min {min(durations):.2f} s, max {max(durations):.2f} s; worker start-up {startup:.1f} s")
    print(f"#   the longest job bounds any number of workers: {startup + max(durations):.1f} s")
    print("| workers | measured wall (s) | simulated, plan order (s) | speed-up | longest first (s) | speed-up |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    single = startup + makespan(durations, 1)
    longest_first = sorted(durations, reverse=True)
    counts = sorted({int(text) for text in args.workers.split(",") if text} | set(measured))
    for count in counts:
        simulated = startup + makespan(durations, count)
        lpt = startup + makespan(longest_first, count)
        real = f"{measured[count][0]:.1f}" if count in measured else "-"
        print(f"| {count} | {real} | {simulated:.1f} | {single / simulated:.2f}x | {lpt:.1f} | {single / lpt:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
