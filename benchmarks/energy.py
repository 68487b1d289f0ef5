"""Energy per call on a GPU with `kictl bench --measure energy` (issue 31): the table in RESULTS.md.

Claim (README.md "Energy per call", docs/bench.md; RESULTS.md "Energy per call"): separate processes agree
within 5% on workloads that draw clearly above idle, and a power-hungry variant ranks below the honest kernel.
Machine and command: the H200 (after `. benchmarks/h200_setup.sh`), `python3 benchmarks/energy.py --out $OUT/e
--budget 250 --no-sandbox --definition gqa_paged_prefill_causal_h24_kv4_d128_ps1`.

Runs, one `kictl bench` process at a time (each a separate process, so three of them are three independent
measurements), for each definition given:

- process 1: the definition's reference, its bundled torch implementation and (for the h24 ps1 prefill
  definition) the power-hungry variant, on every workload;
- processes 2 and 3: the torch implementation and the hungry variant again;

then prints per workload and implementation: joules per call (idle subtracted) of each process, their spread
(max - min) / median, the board's average watts, the idle watts, the cold-L2 latency, and the hungry variant's
energy and latency against the honest kernel's.

The power-hungry variant is the bundled torch_sdpa implementation with `tests/assets/energy/hungry_tail.py`
appended: the same outputs, plus a Triton kernel of 16 blocks on a side stream spinning on fused multiply-adds
(16 of the 132 SMs) for ~70% of the call's device time (calibrated in setup()).

    python3 benchmarks/energy.py --out DIR [--budget SECONDS] [--definition NAME ...]

Writes each process's manifest under DIR/pN-<definition>/, the raw counter readings under DIR/traces/ and the
table to DIR/energy_table.md. Needs a CUDA GPU with NVML's energy counter (exits 5 otherwise, as kictl does).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PREFILL = "gqa_paged_prefill_causal_h24_kv4_d128_ps1"
TORCH_IMPL = {
    "gqa_paged_prefill_causal_h24_kv4_d128_ps1": "torch_sdpa",
    "gqa_paged_prefill_causal_h20_kv4_d128_ps64": "torch_sdpa",
    "gqa_paged_decode_h32_kv8_d128_ps1": "torch_batched",
}
HUNGRY = "torch_sdpa_hungry"


def hungry_file(folder: Path) -> Path:
    """The power-hungry variant: the bundled torch_sdpa source with the hungry tail appended."""
    base = (ROOT / "implementations" / PREFILL / "torch_sdpa" / "attention.py").read_text()
    tail = (ROOT / "tests" / "assets" / "energy" / "hungry_tail.py").read_text()
    path = folder / f"{HUNGRY}.py"
    path.write_text(base + tail)
    return path


def bench(definition: str, impls: list[str], out: Path, args: argparse.Namespace, env: dict[str, str]) -> float:
    command = [
        sys.executable,
        "-m",
        "kictl",
        "bench",
        definition,
        *[part for impl in impls for part in ("--impl", impl)],
        "--measure",
        "energy",
        "--device",
        "cuda",
        "--energy-loop",
        str(args.loop),
        "--energy-trials",
        str(args.trials),
        "--rounds",
        "1",
        "--out",
        str(out),
        "--json",
        *[part for workload in args.workload or () for part in ("--workload", workload)],
    ]
    if args.no_sandbox:
        command.append("--no-sandbox")
    started = time.perf_counter()
    print("$", " ".join(command[2:]), flush=True)
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    (out.parent / f"{out.name}.stdout.json").write_text(done.stdout)
    (out.parent / f"{out.name}.stderr.txt").write_text(done.stderr)
    print(f"  exit {done.returncode} in {time.perf_counter() - started:.0f} s", flush=True)
    if done.returncode not in (0, 1):
        print(done.stderr[-3000:], flush=True)
    return time.perf_counter() - started


def runs_of(out: Path) -> list[dict[str, Any]]:
    """The runs of one process, from `kictl bench --json` (its stdout, kept beside the manifest)."""
    path = out.parent / f"{out.name}.stdout.json"
    try:
        rows: list[dict[str, Any]] = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    for row in rows:
        row["detail"] = row.get("statusDetail")
    return rows


def joules(value: float | None) -> str:
    if value is None:
        return "-"
    for scale, unit in ((1.0, "J"), (1e-3, "mJ"), (1e-6, "µJ")):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value * 1e9:.3g} nJ"


def table(results: dict[str, list[list[dict[str, Any]]]]) -> list[str]:
    lines = [
        "| definition | workload | implementation | J/call per process | spread | board W | idle W | "
        "latency (cold L2) | loop time/call | trial spread |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for definition, processes in results.items():
        keyed: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for process in processes:
            for row in process:
                keyed.setdefault((row["workload"], row["implementation"]), []).append(row)
        for (workload, impl), rows in sorted(keyed.items()):
            good = [r for r in rows if r["status"] == "passed" and r["energy"]]
            if not good:
                why = "; ".join(sorted({f"{r['status']}: {(r['detail'] or '')[:80]}" for r in rows}))
                lines.append(f"| {definition} | {workload} | {impl} | {why} | | | | | | |")
                continue
            values = [r["energy"]["joulesPerCall"] for r in good]
            middle = statistics.median(values)
            spread = (max(values) - min(values)) / middle if middle > 0 and len(values) > 1 else None
            watts = statistics.median(r["energy"]["averageWatts"] for r in good)
            idle = statistics.median(r["energy"]["idleWatts"] for r in good)
            latency = statistics.median(r["latencyNs"] for r in good if r["latencyNs"]) / 1e3
            per_call = statistics.median(r["energy"]["nsPerCall"] for r in good) / 1e3
            trial_spread = max(r["energy"]["spread"] for r in good)
            lines.append(
                f"| {definition} | {workload} | {impl} | {', '.join(joules(v) for v in values)} | "
                f"{'-' if spread is None else f'{100 * spread:.1f}%'} | {watts:.0f} | {idle:.1f} | "
                f"{latency:.1f} µs | {per_call:.1f} µs | {100 * trial_spread:.1f}% |"
            )
    return lines


def hungry_lines(processes: list[list[dict[str, Any]]]) -> list[str]:
    """The hungry variant against the honest torch_sdpa, per workload and process."""
    lines = [
        "",
        "| workload | process | torch_sdpa J/call | hungry J/call | energy ratio | latency ratio | ranks below |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for number, process in enumerate(processes, start=1):
        by = {(r["workload"], r["implementation"]): r for r in process if r["status"] == "passed" and r["energy"]}
        for workload in sorted({w for w, _ in by}):
            honest = next(
                (r for (w, i), r in by.items() if w == workload and i.startswith("torch_sdpa") and HUNGRY not in i),
                None,
            )
            hungry = next((r for (w, i), r in by.items() if w == workload and i.startswith(HUNGRY)), None)
            if honest is None or hungry is None:
                continue
            e_ratio = hungry["energy"]["joulesPerCall"] / honest["energy"]["joulesPerCall"]
            l_ratio = hungry["latencyNs"] / honest["latencyNs"]
            lines.append(
                f"| {workload} | {number} | {joules(honest['energy']['joulesPerCall'])} | "
                f"{joules(hungry['energy']['joulesPerCall'])} | {e_ratio:.2f} | {l_ratio:.3f} | "
                f"{'yes' if e_ratio > 1 else 'no'} |"
            )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget", type=float, default=420.0, help="seconds: later processes are skipped after")
    parser.add_argument("--definition", action="append", default=None)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--loop", type=float, default=1.0)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--no-sandbox", action="store_true")
    parser.add_argument("--workload", action="append", default=None, help="only these workloads (repeatable)")
    parser.add_argument("--no-reference", action="store_true", help="leave the reference out of process 1")
    args = parser.parse_args()
    definitions = args.definition or [PREFILL]
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "KICTL_ENERGY_TRACES": str(args.out / "traces")}
    variant = hungry_file(args.out)
    began = time.perf_counter()
    results: dict[str, list[list[dict[str, Any]]]] = {}
    # the prefill definition in every process first (the three-process agreement and the hungry variant),
    # then the other definitions once each, while the budget lasts
    jobs = [(n, PREFILL) for n in range(1, args.processes + 1) if PREFILL in definitions]
    jobs += [(1, d) for d in definitions if d != PREFILL]
    for number, definition in jobs:
        if time.perf_counter() - began > args.budget:
            print(f"budget spent: process {number} of {definition} skipped", flush=True)
            continue
        impl_dir = ROOT / "implementations" / definition
        impls = [str(impl_dir / TORCH_IMPL[definition])]
        if number == 1 and definition == PREFILL and not args.no_reference:
            impls.insert(0, str(impl_dir / "reference"))
        if definition == PREFILL:
            impls.append(str(variant))
        out = args.out / f"p{number}-{definition}"
        bench(definition, impls, out, args, env)
        results.setdefault(definition, []).append(runs_of(out))
    lines = table(results)
    if PREFILL in results:
        lines += hungry_lines(results[PREFILL])
    text = "\n".join(lines)
    (args.out / "energy_table.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
