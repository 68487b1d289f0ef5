"""How a suite's wall time scales with the number of workers (issue 16, DESIGN §12).

Claim (docs/scale-out.md; RESULTS.md "Scale-out on CPU workers"): a suite's jobs spread over CPU workers, largest
first; the longest job caps the speed-up near 3x. Machine and command: any machine (figures: the 2-core dev VM),
`python benchmarks/scaling.py --measure 1,2`.

``scaling.py records`` (formerly ``scale_gpu_check.py``) checks that ``--devices all`` and ``--executor ray``
give the records of a plain run, digest for digest, timings aside. Claim (README.md, docs/scale-out.md;
RESULTS.md "Scale-out on a GPU node"): on the H200 both executors give the plain run's records. Command: `bash
benchmarks/device.sh scaling.py records --definition gqa_paged_prefill_causal_h24_kv4_d128_ps1` (the Ray leg needs
`ray==2.60.0`); `python benchmarks/scaling.py records --smoke --out DIR` on any CPU.

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

``records``: for each bundled attention definition (or ``--definition``), with its FlashInfer wrapper and its
reference, three runs of the whole suite on the default CUDA protocol:

1. plain: ``kictl.bench.judge.session.run_bench`` (what ``kictl bench`` does);
2. local pool: ``kictl.executors.run_bench_jobs(..., devices="all")``;
3. Ray: ``run_bench_jobs(..., executor="ray")`` on a local Ray instance
   (skipped, and said so, when Ray is not installed).

Each leg's wall time, and whether its records are the plain run's (the same Definition, Workload,
Implementation, BenchmarkProtocol and ExecutionEnvironment records, and runs naming the same digests: only
timings and ``observedAt`` may differ).  Writes ``scale.json`` and ``summary.txt`` to ``--out``.
``--smoke`` does the same on the CPU with one small workload per definition and the torch implementations
(to test this part without a GPU).
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kictl.bench.judge.session import BenchOptions, run_bench  # noqa: E402
from kictl.executors import run_bench_jobs  # noqa: E402
from kictl.records import StoredRecord  # noqa: E402
from kictl.store.registry import Registry  # noqa: E402


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


DEFINITIONS = (
    "gqa_paged_prefill_causal_h24_kv4_d128_ps1",
    "gqa_paged_prefill_causal_h20_kv4_d128_ps64",
    "gqa_paged_decode_h32_kv8_d128_ps1",
)
SMOKE = {
    "gqa_paged_prefill_causal_h24_kv4_d128_ps1": ("q1_kv1", "torch_sdpa"),
    "gqa_paged_prefill_causal_h20_kv4_d128_ps64": ("q16_p1", "torch_sdpa"),
    "gqa_paged_decode_h32_kv8_d128_ps1": ("b1_kv73", "torch_batched"),
}
#: What a run names that must not depend on the executor (timings and observedAt may).
KEYS = ("definitionDigest", "workloadDigest", "implementationDigest", "protocolDigest", "environmentDigest", "status")


def identity(records: list[StoredRecord]) -> dict[str, Any]:
    runs = sorted(tuple(r.raw["spec"].get(key) for key in KEYS) for r in records if r.kind == "BenchmarkRun")
    return {"runs": runs, "others": sorted((r.kind, r.digest) for r in records if r.kind != "BenchmarkRun")}


def _plain(found: Any) -> Any:
    """``identity``'s answer as JSON gives it back (lists, not tuples), to compare with a saved one."""
    return json.loads(json.dumps(found))


def _skipped(report: Any) -> str:
    """What a leg's report skipped (jobs that failed twice, workloads not judged), briefly."""
    if not report.skipped:
        return ""
    first = report.skipped[0]
    return f"; {len(report.skipped)} skipped, e.g. {first[0]}: {first[1][:160]}"


def _difference(found: Any, expected: Any) -> str:
    """Which members of the runs differ from the plain run's, and how many runs each leg has."""
    columns = [
        key
        for index, key in enumerate(KEYS)
        if {r[index] for r in found["runs"]} != {r[index] for r in expected["runs"]}
    ]
    others = found["others"] != expected["others"]
    counts = f"{len(found['runs'])} runs against {len(expected['runs'])}"
    return f"; {counts}, differing: {columns}, other records differ: {others}"


def records_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scaling.py records", description="the executors give a plain run's records")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--definition", action="append")
    parser.add_argument("--smoke", action="store_true", help="CPU, one small workload per definition")
    parser.add_argument("--workload", action="append", help="only these workloads (default: all)")
    parser.add_argument("--legs", default="plain,devices,ray", help="which legs to run (comma-separated)")
    parser.add_argument(
        "--expected",
        type=Path,
        help="a folder where an earlier call of this script ran the plain leg (its identity-DEF.json): compare "
        "with that instead of running the plain leg again (a device call is 10 minutes at most)",
    )
    args = parser.parse_args(argv)
    wanted = set(args.legs.split(","))
    if not wanted <= {"plain", "devices", "ray"} or ("plain" not in wanted and args.expected is None):
        parser.error("--legs takes plain, devices and ray; without plain, --expected is needed")
    if "plain" not in wanted:
        missing = [n for n in args.definition or DEFINITIONS if not (args.expected / f"identity-{n}.json").is_file()]
        if missing:
            parser.error(f"--expected {args.expected}: no identity-{missing[0]}.json (run the plain leg there first)")
    args.out.mkdir(parents=True, exist_ok=True)
    registry = Registry(ROOT)
    rows: list[dict[str, Any]] = []
    for name in args.definition or DEFINITIONS:
        folder = ROOT / "implementations" / name
        if args.smoke:
            workload, impl = SMOKE[name]
            impls = [str(folder / impl), str(folder / "reference")]
            options = BenchOptions(
                device="cpu", warmup=0, iterations=1, trials=1, rounds=1, workloads=(workload,), timeout_s=900
            )
        else:
            impls = [str(folder / "flashinfer_wrapper"), str(folder / "reference")]
            options = BenchOptions(device="cuda", workloads=tuple(args.workload or ()))
        legs: dict[str, Any] = {}
        if "plain" in wanted:
            begun = time.perf_counter()
            plain = run_bench(registry, name, impls, options)
            legs["plain"] = (time.perf_counter() - begun, plain.records, "")
            expected = _plain(identity(plain.records))
            (args.out / f"identity-{name}.json").write_text(json.dumps(expected) + "\n")
        else:
            expected = json.loads((args.expected / f"identity-{name}.json").read_text())
        if "devices" in wanted:
            begun = time.perf_counter()
            pooled, outcome = run_bench_jobs(registry, name, impls, options, devices="1" if args.smoke else "all")
            legs["devices"] = (
                time.perf_counter() - begun,
                pooled.records,
                f"start-up {outcome.startup_s:.1f} s{_skipped(pooled)}",
            )
        if "ray" in wanted:
            try:
                import ray  # noqa: F401

                begun = time.perf_counter()
                rayed, ray_outcome = run_bench_jobs(registry, name, impls, options, executor="ray")
                legs["ray"] = (
                    time.perf_counter() - begun,
                    rayed.records,
                    f"start-up {ray_outcome.startup_s:.1f} s{_skipped(rayed)}",
                )
            except ImportError:
                legs["ray"] = (None, None, "ray not installed")
        for leg, (wall, records, note) in legs.items():
            same = None if records is None else _plain(identity(records)) == expected
            if records is not None:
                (args.out / f"identity-{name}-{leg}.json").write_text(json.dumps(_plain(identity(records))) + "\n")
                protocols = [r.raw["spec"] for r in records if r.kind == "BenchmarkProtocol"]
                (args.out / f"protocols-{name}-{leg}.json").write_text(json.dumps(protocols, indent=1) + "\n")
            if same is False:
                note += _difference(_plain(identity(records)), expected)
            rows.append({"definition": name, "leg": leg, "wall_s": wall, "same_records": same, "note": note})
            print(f"{name} {leg}: wall {wall if wall is None else round(wall, 1)} s, same records: {same} {note}")
    lines = ["| definition | leg | wall (s) | same records as plain | note |", "| --- | --- | ---: | --- | --- |"]
    for row in rows:
        wall = "-" if row["wall_s"] is None else f"{row['wall_s']:.1f}"
        lines.append(f"| {row['definition']} | {row['leg']} | {wall} | {row['same_records']} | {row['note']} |")
    (args.out / "summary.txt").write_text("\n".join(lines) + "\n")
    (args.out / "scale.json").write_text(json.dumps(rows, indent=2) + "\n")
    print("\n".join(lines))
    return 0 if all(row["same_records"] in (True, None) for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(records_main(sys.argv[2:]) if sys.argv[1:2] == ["records"] else main())
