#!/usr/bin/env python
"""The walls of issues 10 and 27: what they cost on the CPU, and that on a GPU honest code passes and cheats fail.

Claim (README.md's walls, docs/bench.md "What runs where"; RESULTS.md "The walls' cost and the hardened sandbox",
RESULTS.md "The walls on a GPU"): the hardened sandbox adds under 0.1 s to a worker's start (0.5 s under load)
and a foreign-hook check about 2 µs, three a call; on a GPU, in the sandbox, honest implementations pass and
every class of cheat fails. Machine and command: any CPU with bubblewrap, run as root, `python
benchmarks/walls.py cost --repeat 3`; the H200, `bash benchmarks/device.sh walls.py gpu`.

    python benchmarks/walls.py cost [--repeat 3] [--calls 2000]
    python benchmarks/walls.py neighbour [--repeat 3] [--iterations 60] [--workload b64]
    KICTL_BWRAP=/path/to/usr/bin/bwrap python benchmarks/walls.py gpu --out "$OUT" [--part honest|cheats|runs]

``cost`` prints one table (docs/bench.md, "What runs where"):
- a worker's start to ``Ready`` in the hardened sandbox (user namespace, no capabilities, seccomp, the
  package copy) against the same worker unsandboxed (``--no-sandbox``), median of ``--repeat``;
- building the seccomp filter (once per worker);
- the worker's check for foreign hooks (``integrity.foreign_hooks``: at every request, when a call returns
  and before every answer), per check;
- the parent's staging of one timed call's inputs (``staging.Stager.stage``) for ``rmsnorm_h4096`` b64 and
  b1024, and reading them back (``Stager.changed``, after audited calls and the last);
- one whole ``kictl bench`` session (reference and torch_rmsnorm on b64, 1 warm-up, 200 timed calls each),
  sandboxed, and its per-request means (the parent's wall from sending to the answer).

``neighbour`` (issue 40) prints torch_rmsnorm's median, session by session, alone, beside
``tests/assets/cheats/lim_neighbour_spins_in_allowance.py`` (a neighbour that burns 0.8 ms of CPU just after each
of its own calls, inside the next worker's call, within its allowance), and beside it with the neighbours'
quieting turned off in this process (the control: what the quieting removes), as root with cgroups.

``gpu`` runs from the repository root on the GPU machine (FlashInfer installed), with bubblewrap reachable (on
the lent H200, which has no network: ``apt-get download bubblewrap`` here, carry the .deb; ``device.sh`` unpacks
it and sets ``KICTL_BWRAP``):

1. Honest, sandboxed: ``kictl bench`` of the FlashInfer wrapper (``plan()`` in ``setup()``), torch SDPA and
   the reference on ``gqa_paged_prefill_causal_h24_kv4_d128_ps1 / q154_kv154`` and of the FlashInfer decode
   wrapper on ``gqa_paged_decode_h32_kv8_d128_ps1 / b16x_kv1024``: every run must pass and the protocol must
   record bubblewrap.  The same FlashInfer runs with ``--no-sandbox`` give the sandbox's cost in wall time
   and whether the medians move.
2. Cheats on CUDA: rmsnorm cheats of every class that exists on a GPU, and the attention cheats (a cache
   keyed on the query tensor's identity, work on a side stream) next to the honest implementations; no
   cheat may pass; the side-stream cheat fails ``streamOrdered`` under the CUPTI timer's end marker.

3. ``--part runs`` (issue 40): every workload of ``rmsnorm_h4096`` (the reference, torch_rmsnorm and four honest
   corpus entries: float64 maths, a reused buffer, an offset view, a non-contiguous output), ``gemm_n4096_k4096``
   (reference, torch_matmul) and the decode definition (reference, FlashInfer wrapper, torch batched), sandboxed,
   one warm-up, 2 correctness rounds and one trial of 50 timed calls, under each timer of ``--timers``: 66 honest
   runs a timer, every one must pass (the parent takes every audited call's outputs through CUDA IPC handles).

It writes ``walls_gpu.json`` (every row, command, wall time) and ``walls_gpu.txt`` (the table) to ``--out``
and exits 1 when an expectation fails.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
IMPL = ROOT / "implementations"
CHEATS = ROOT / "tests" / "assets" / "cheats"


def _start(isolation: object, folder: Path) -> float:
    from kictl.bench.judge.runner import WorkerProcess

    worker = WorkerProcess("walls", "cpu", folder, isolation)  # type: ignore[arg-type]
    began = time.perf_counter()
    worker.start()
    took = time.perf_counter() - began
    worker.stop()
    return took


def _per_call(function: object, calls: int) -> float:
    began = time.perf_counter_ns()
    for _ in range(calls):
        function()  # type: ignore[operator]
    return (time.perf_counter_ns() - began) / calls


def _limits_costs(isolation: object, folder: Path, calls: int) -> list[tuple[str, str]]:
    """Issue 40's per-answer and per-call costs in the parent, on a live sandboxed worker."""
    from kictl.bench.judge import taken
    from kictl.bench.judge.runner import WorkerProcess

    worker = WorkerProcess("limits", "cpu", folder, isolation, cpus=(max(os.sched_getaffinity(0)),))  # type: ignore[arg-type]
    worker.start()
    try:
        given = worker.cpus
        pid, inode = worker.worker_pid, os.fstat(worker.inputs.fd).st_ino if worker.inputs is not None else 0
        assert pid is not None
        group = "a cgroup" if worker.group is not None else "no cgroup"
        return [
            (f"limits looked at, per answer ({group})", f"{_per_call(worker.breaches, calls) / 1e3:.0f} µs"),
            (
                "CPUs re-checked (affinity), per timed call",
                f"{_per_call(lambda: worker.cpus_outside(given), calls) / 1e3:.0f} µs",
            ),
            ("CPU time per CPU read, per timed call", f"{_per_call(worker.cpu_ns_per_cpu, calls) / 1e3:.0f} µs"),
            (
                "inputs region found in the worker's map (taken.mapped), per CPU timed call",
                f"{_per_call(lambda: taken.mapped(pid, inode), calls) / 1e3:.0f} µs",
            ),
            (
                "a neighbour quieted and back, per neighbour per timed call",
                f"{_per_call(lambda: (worker.quiet(True), worker.quiet(False)), calls) / 1e3:.0f} µs",
            ),
        ]
    finally:
        worker.stop()


def cost_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="walls.py cost", description="what the walls cost on the CPU")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)

    from kictl.bench import wire
    from kictl.bench.judge import sandbox, seccomp, staging
    from kictl.bench.judge.session import BenchOptions, run_bench
    from kictl.bench.wire import regions
    from kictl.bench.worker import integrity
    from kictl.store.registry import Registry

    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="kictl-walls-") as scratch:
        folder = Path(scratch)
        hardened = sandbox.resolve(False)
        starts = [_start(hardened, folder / f"s{n}") for n in range(args.repeat)]
        bare = [_start(sandbox.Isolation(None), folder / f"n{n}") for n in range(args.repeat)]
        rows.append(("worker start to Ready, hardened sandbox (median)", f"{statistics.median(starts):.2f} s"))
        rows.append(("worker start to Ready, --no-sandbox (median)", f"{statistics.median(bare):.2f} s"))
        rows += _limits_costs(hardened, folder / "limits", args.calls)
    rows.append(("seccomp filter, built", f"{_per_call(seccomp.program, args.calls) / 1e3:.1f} µs"))
    hooks = _per_call(integrity.foreign_hooks, args.calls * 10)
    rows.append(("foreign-hook check (3 a call)", f"{hooks / 1e3:.2f} µs"))

    registry = Registry(ROOT)
    for label, batch in (("b64", 64), ("b1024", 1024)):
        spec_h = wire.InputSpec(name="hidden_states", kind="random", dtype="bfloat16", shape=(batch, 4096), seed=1)
        spec_w = wire.InputSpec(name="weight", kind="random", dtype="bfloat16", shape=(4096,), seed=2)
        plans = [
            wire.Plan(inputs=(wire.InputSpec(**{**_fields(spec_h), "seed": 10 + n}), spec_w), label=f"set {n}")
            for n in range(4)
        ]
        region = wire.SharedRegion.create("walls", parent_writes=True)
        assert region is not None
        offsets = regions.layout(plans[0], region.size)
        assert offsets is not None
        stager = staging.Stager(region, plans, offsets, plans[0].inputs)
        stage, back = _staging_costs(stager, max(50, args.calls // 20))
        rows.append(
            (f"parent stages one call, rmsnorm {label} ({batch * 4096 * 2 // 1024} KiB)", f"{stage / 1e3:.0f} µs")
        )
        rows.append((f"parent reads it back, rmsnorm {label}", f"{back / 1e3:.0f} µs"))
        del stager
        region.close()

    impls = [
        str(ROOT / "implementations/rmsnorm_h4096/reference"),
        str(ROOT / "implementations/rmsnorm_h4096/torch_rmsnorm"),
    ]
    options = BenchOptions(
        device="cpu", workloads=("b64",), warmup=1, iterations=200, trials=1, rounds=1, timeout_s=120
    )
    began = time.perf_counter()
    report = run_bench(registry, "rmsnorm_h4096", impls, options)
    wall = time.perf_counter() - began
    rows.append(("bench session, reference + torch_rmsnorm, b64, 200 calls each, sandboxed", f"{wall:.1f} s"))
    for run in report.runs:
        timing = run.run.raw["spec"]["timing"] if run.run else {}
        median = timing.get("latencyNs", {}).get("median")
        rows.append(
            (
                f"  {run.implementation}: status, median (parent's clock)",
                f"{run.status}, {median / 1e6:.2f} ms" if median else run.status,
            )
        )

    width = max(len(name) for name, _ in rows)
    print(f"{'measure'.ljust(width)}  value")
    print(f"{'-' * width}  -----")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    return 0


def _staging_costs(stager: object, calls: int) -> tuple[float, float]:
    """ns per ``stage`` (a random set and shift each time) and per ``changed``."""
    shifts = iter(range(1, 10**9, 7919))
    stage = _per_call(lambda: stager.stage(next(shifts) % 4, next(shifts)), calls)  # type: ignore[attr-defined]
    return stage, _per_call(stager.changed, calls)  # type: ignore[attr-defined]


def _fields(spec: object) -> dict[str, object]:
    import dataclasses

    return {field.name: getattr(spec, field.name) for field in dataclasses.fields(spec)}  # type: ignore[arg-type]


NEIGHBOUR = "lim_neighbour_spins_in_allowance"
NEIGHBOUR_MODES = ("alone", "beside the neighbour", "beside the neighbour, not quieted")


def neighbour_main(argv: list[str]) -> int:
    """Issue 40: an honest implementation's figure beside a neighbour that spends its between-call allowance inside
    the honest one's calls, against its figure alone, and with the neighbours' quieting (``cpu.idle`` while a call
    is timed) turned off in this process as the control."""
    parser = argparse.ArgumentParser(prog="walls.py neighbour", description="a neighbour's record, not moved")
    parser.add_argument("--repeat", type=int, default=3, help="sessions per mode (taken in turns)")
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--workload", default="b64")
    args = parser.parse_args(argv)

    from kictl.bench.judge.runner import WorkerProcess
    from kictl.bench.judge.session import BenchOptions, run_bench
    from kictl.store.registry import Registry

    registry = Registry(ROOT)
    honest = str(ROOT / "implementations/rmsnorm_h4096/torch_rmsnorm")
    options = BenchOptions(
        device="cpu", workloads=(args.workload,), warmup=1, iterations=args.iterations, trials=1, rounds=1
    )
    quiet = WorkerProcess.quiet
    found: dict[str, list[float]] = {mode: [] for mode in NEIGHBOUR_MODES}
    statuses: dict[str, set[str]] = {mode: set() for mode in NEIGHBOUR_MODES}
    for _ in range(args.repeat):
        for mode in NEIGHBOUR_MODES:
            impls = [honest] if mode == "alone" else [honest, str(CHEATS / f"{NEIGHBOUR}.py")]
            WorkerProcess.quiet = quiet if mode != NEIGHBOUR_MODES[2] else (lambda self, idle: None)  # type: ignore[method-assign]
            try:
                report = run_bench(registry, RMSNORM, impls, options)
            finally:
                WorkerProcess.quiet = quiet  # type: ignore[method-assign]
            for run in report.runs:
                statuses[mode].add(f"{run.implementation.rsplit('_', 1)[0]} {run.status}")
                if run.run is not None and run.implementation.startswith("torch_rmsnorm"):
                    found[mode].append(run.run.raw["spec"]["timing"]["latencyNs"]["median"] / 1e6)
    alone = found["alone"]
    print(f"torch_rmsnorm {args.workload}, {args.iterations} timed calls a session, {args.repeat} sessions a mode")
    print(f"load average after: {' '.join(f'{value:.1f}' for value in os.getloadavg())}, {os.cpu_count()} CPUs")
    print("mode                                 medians (ms)                 median of them  vs alone  statuses")
    for mode in NEIGHBOUR_MODES:
        values = found[mode]
        middle = statistics.median(values) if values else float("nan")
        ratio = middle / statistics.median(alone) if values and alone else float("nan")
        shown = ", ".join(f"{value:.3f}" for value in values)
        print(f"{mode.ljust(36)} {shown.ljust(28)} {middle:14.3f}  {ratio:7.2f}x  {'; '.join(sorted(statuses[mode]))}")
    return 0


PREFILL = "gqa_paged_prefill_causal_h24_kv4_d128_ps1"
DECODE = "gqa_paged_decode_h32_kv8_d128_ps1"
RMSNORM = "rmsnorm_h4096"
RMSNORM_CHEATS = [
    "wire_pickle_payload",
    "wire_forged_frame",
    "timer_forged_samples",
    "timer_reads_harness_frames",
    "values_cached_by_identity",
    "values_precomputed_in_setup",
    "values_from_public_seeds",
    "escape_lazy_subclass",
    "escape_raw_thread",
    "escape_daemon",
    "reach_parent_stdout",
    "reach_reference_worker",
    "drop_raising_iter",
    "drop_sigalrm",
    "drop_lone_surrogate",
    "rmsnorm_patches_timer",
    "rmsnorm_mutates_inputs",
    "rmsnorm_returns_input",
    "rmsnorm_partial_write",
]


def bench(definition: str, impls: list[Path], workload: str, *extra: str) -> dict[str, Any]:
    return bench_all(definition, impls, "--workload", workload, *extra)


def bench_all(definition: str, impls: list[Path], *extra: str) -> dict[str, Any]:
    """``kictl bench DEFINITION --impl … --device cuda`` with ``extra`` (every workload unless it names some)."""
    out = Path(tempfile.mkdtemp(prefix="walls-out-"))
    command = [
        sys.executable,
        "-m",
        "kictl",
        "bench",
        definition,
        *[arg for impl in impls for arg in ("--impl", str(impl))],
        "--device",
        "cuda",
        "--registry",
        str(ROOT),
        "--out",
        str(out),
        "--json",
        *extra,
    ]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    wall = time.monotonic() - started
    try:
        rows = json.loads(done.stdout)
    except json.JSONDecodeError:
        rows = []
    protocols = []
    for manifest in out.glob("*.json"):
        protocols += [
            r["spec"]["measurement"]
            for r in json.loads(manifest.read_text()).values()
            if r["kind"] == "BenchmarkProtocol"
        ]
    return {
        "command": " ".join(command),
        "exit": done.returncode,
        "wall_s": round(wall, 1),
        "rows": rows,
        "isolation": sorted({p.get("isolation", "") for p in protocols}),
        "stderr_tail": done.stderr.strip().splitlines()[-15:],
    }


def short(row: dict[str, Any]) -> str:
    return row["implementation"].rsplit("_", 1)[0]


def gpu_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="walls.py gpu", description="the walls on a GPU")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--part", choices=("all", "honest", "cheats", "runs"), default="all")
    parser.add_argument("--timers", default="cupti,events", help="runs part: the timers, each a session set")
    parser.add_argument("--modes", default="sandbox,no-sandbox", help="honest part: sandbox, no-sandbox or both")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"bwrap": os.environ.get("KICTL_BWRAP", "(PATH)")}
    problems: list[str] = []
    lines: list[str] = []

    honest = {
        "prefill": (
            PREFILL,
            [IMPL / PREFILL / n for n in ("reference", "flashinfer_wrapper", "torch_sdpa")],
            "q154_kv154",
        ),
        "decode": (
            DECODE,
            [IMPL / DECODE / n for n in ("reference", "flashinfer_wrapper", "torch_batched")],
            "b16x_kv1024",
        ),
    }
    if args.part == "runs":
        return _honest_runs(args.out, [t for t in args.timers.split(",") if t], results, lines, problems)
    modes = [(m, () if m == "sandbox" else ("--no-sandbox",)) for m in args.modes.split(",") if m]
    for key, (definition, impls, workload) in honest.items() if args.part in ("all", "honest") else ():
        for mode, extra in modes:
            found = bench(definition, impls, workload, *extra)
            print(f"{key}/{mode}: exit {found['exit']} in {found['wall_s']} s", flush=True)
            if found["exit"] not in (0, 1):
                print("\n".join(found["stderr_tail"]), flush=True)
            results[f"{key}/{mode}"] = found
            for row in found["rows"]:
                lines.append(
                    f"{key:8} {mode:10} {short(row):22} {row['status']:14} {row['latencyNs'] or '-':>10} ns  "
                    f"wall {found['wall_s']} s"
                )
                if row["status"] != "passed":
                    problems.append(f"{key}/{mode}: {short(row)} {row['status']}: {row['statusDetail']}")
            if not found["rows"]:
                problems.append(f"{key}/{mode}: no rows; stderr: {found['stderr_tail']}")
            if mode == "sandbox" and not all(i.startswith("bubblewrap") for i in found["isolation"]):
                problems.append(f"{key}/sandbox: protocol isolation {found['isolation']}")

    if args.part == "honest":
        return _finish(args.out, results, lines, problems)
    cheats = bench(
        RMSNORM,
        [IMPL / RMSNORM / "reference", IMPL / RMSNORM / "torch_rmsnorm", *[CHEATS / f"{n}.py" for n in RMSNORM_CHEATS]],
        "b64",
        "--timeout",
        "60",
    )
    results["rmsnorm-cheats"] = cheats
    print(f"rmsnorm cheats: exit {cheats['exit']} in {cheats['wall_s']} s", flush=True)
    attention = bench(
        DECODE,
        [
            IMPL / DECODE / "flashinfer_wrapper",
            CHEATS / "attention_cached_by_identity.py",
            CHEATS / "attention_side_stream.py",
        ],
        "b16x_kv1024",
    )
    results["attention-cheats"] = attention
    for found in (cheats, attention):
        if not found["rows"]:
            problems.append(f"cheats: no rows; stderr: {found['stderr_tail']}")
        for row in found["rows"]:
            name = short(row)
            lines.append(f"cheats   {name:34} {row['status']:14} {(row['statusDetail'] or '')[:90]}")
            fair = name in ("reference", "torch_rmsnorm", "flashinfer_wrapper")
            if fair and row["status"] != "passed":
                problems.append(f"honest {name} did not pass: {row['statusDetail']}")
            if not fair and row["status"] == "passed":
                problems.append(f"cheat {name} passed")
    return _finish(args.out, results, lines, problems)


#: Honest implementations on every workload of three definitions: 66 runs a timer (issue 40's "50 honest runs per
#: timer pass"), sandboxed, one warm-up, 2 correctness rounds, one trial of 50 timed calls.
HONEST_RUNS = {
    RMSNORM: [
        IMPL / RMSNORM / "reference",
        IMPL / RMSNORM / "torch_rmsnorm",
        *[CHEATS / f"honest_{n}.py" for n in ("float64_math", "reused_buffer", "offset_view", "noncontiguous_output")],
    ],
    "gemm_n4096_k4096": [IMPL / "gemm_n4096_k4096" / n for n in ("reference", "torch_matmul")],
    DECODE: [IMPL / DECODE / n for n in ("reference", "flashinfer_wrapper", "torch_batched")],
}


def _honest_runs(out: Path, timers: list[str], results: dict[str, Any], lines: list[str], problems: list[str]) -> int:
    """Every honest run of ``HONEST_RUNS`` under each timer: each must pass (``walls.py gpu --part runs``)."""
    for timer in timers:
        passed = total = 0
        for definition, impls in HONEST_RUNS.items():
            found = bench_all(
                definition,
                impls,
                "--timer",
                timer,
                "--rounds",
                "2",
                "--trials",
                "1",
                "--iterations",
                "50",
                "--warmup",
                "1",
            )
            results[f"runs/{timer}/{definition}"] = found
            print(f"runs {timer} {definition}: exit {found['exit']} in {found['wall_s']} s", flush=True)
            if not found["rows"]:
                problems.append(f"runs/{timer}/{definition}: no rows; stderr: {found['stderr_tail']}")
            for row in found["rows"]:
                total += 1
                if row["status"] == "passed":
                    passed += 1
                else:
                    problems.append(
                        f"{timer} {definition} {row['workload']} {short(row)}: {row['status']}: {row['statusDetail']}"
                    )
        lines.append(f"runs     {timer:8} {passed} of {total} honest runs passed")
    return _finish(out, results, lines, problems)


def _finish(out: Path, results: dict[str, Any], lines: list[str], problems: list[str]) -> int:
    results["problems"] = problems
    (out / "walls_gpu.json").write_text(json.dumps(results, indent=2))
    text = "\n".join([*lines, "", *(f"PROBLEM: {p}" for p in problems or ["none"])])
    (out / "walls_gpu.txt").write_text(text + "\n")
    print(text)
    return 1 if problems else 0


def main(argv: list[str]) -> int:
    parts = {"cost": cost_main, "gpu": gpu_main, "neighbour": neighbour_main}
    if not argv or argv[0] not in parts:
        print(
            "usage: python benchmarks/walls.py cost|gpu|neighbour [ARGS...] (--help after the part for its options)",
            file=sys.stderr,
        )
        return 2
    return parts[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
