"""Energy per call on a GPU with `kictl bench --measure energy` (issues 31, 43): the tables in RESULTS.md.

Claim (README.md "Energy per call", docs/bench.md; RESULTS.md "Energy per call on the H100"): separate processes
agree within 5% on workloads of at least 50 µs, and a power-hungry variant of the FlashInfer wrapper, within 3% of
its latency, ranks below it on energy. Machine and command: the H100, `bash benchmarks/device.sh energy.py
--budget 480` (the FlashInfer cache carried).

Runs, one `kictl bench` process at a time (each a separate process, so three of them are three independent
measurements), sandboxed unless `--no-sandbox`, for each process number and each definition given:

- the definition's FlashInfer wrapper (`implementations/<definition>/flashinfer_wrapper`) and one power-hungry
  variant of it per `--hungry BLOCKS` (default 16 and 132), on the workloads where the wrapper took at least 50 µs
  on the H100 (`LONG_WORKLOADS`; `--workload` names others);
- in process 1 also the reference, unless `--no-reference`;

then prints per workload and implementation: joules per call (idle subtracted) of each process, their spread
(max - min) / median, the board's average watts, the idle watts, the cold-L2 latency, and each hungry variant's
energy and latency against the FlashInfer wrapper's in the same process, with its rank on the energy board (the
board's tie rule, `kictl.rank.energy.joules_tie`) and whether the claim holds there.

A power-hungry variant is the wrapper's entry file with `SPIN_BLOCKS`, `SPIN_SHARE`, `SPIN_KIND` and `SPIN_ORDER`
set and `tests/assets/energy/hungry_tail.py` appended: the same outputs, plus a Triton kernel of that many blocks on
a side stream spinning for `SPIN_SHARE` of the call's device time on fused multiply-adds (`fma`) or on float16
matrix products on the tensor cores (`mma`), launched after the wrapper's kernels from a fork taken before them
(`after`), so that it takes the SMs they leave idle and starts inside their time, or before them (`first`).
setup() calibrates it once per workload and shortens it until the variant's calls take at most 2% longer than the
wrapper's, measured there.

    python3 benchmarks/energy.py --out DIR [--budget SECONDS] [--definition NAME ...] [--hungry BLOCKS[mma][first] ...]
    python3 benchmarks/energy.py --out DIR --calibration [--definition NAME ...]   # each variant's setup(), printed

Writes each process's manifest under DIR/pN-<definition>/ and the raw counter readings under DIR/traces/, packed
into DIR/records.tgz at the end, and the tables to DIR/energy_table.md. Needs a CUDA GPU with NVML's energy
counter (exits 5 otherwise, as kictl does).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from catalogue import _install_aot  # benchmarks/ is this script's folder, first on sys.path

from kictl.policy import EnergyPolicy
from kictl.rank.energy import joules_tie, tie_allowance

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DEFINITIONS = ("gqa_paged_decode_h32_kv8_d128_ps1", "gqa_paged_prefill_causal_h20_kv4_d128_ps64")
HONEST = "flashinfer_wrapper"
HUNGRY = "flashinfer_hungry"
SPIN_SHARE = 0.6
#: issue 43: the variant's latency within this of the wrapper's (3%) while it ranks below it on energy
LATENCY_CLAIM = 0.03


#: the variants run by default: 16 and 132 blocks of the FMA spin, 132 of the tensor-core spin
DEFAULT_VARIANTS = ("16", "132", "132mma")


Variant = tuple[int, str, str]


def variant(text: str) -> Variant:
    """``--hungry`` BLOCKS[mma][first]: the spinning blocks, the spin's kind (``fma`` unless ``mma`` follows) and
    its order (``after``: launched after the wrapper's kernels, from a fork taken before them, so that it takes the
    SMs they leave and starts inside their time; ``first``: launched before them, as until stop 60)."""
    order = "first" if text.endswith("first") else "after"
    rest = text.removesuffix("first")
    kind = "mma" if rest.endswith("mma") else "fma"
    count = rest.removesuffix("mma")
    if not count.isdigit() or not 1 <= int(count) <= 4096:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a block count from 1 to 4096, 'mma' after it for tensor cores, 'first' last to launch the "
            "spin before the wrapper's kernels"
        )
    return int(count), kind, order


def hungry_files(definition: str, blocks: list[Variant], folder: Path) -> list[Path]:
    """The power-hungry variants of a definition's FlashInfer wrapper, one entry file per (blocks, kind, order)."""
    wrapper = ROOT / "implementations" / definition / HONEST
    entry = json.loads((wrapper / "implementation.json").read_text())["entryPoint"].split("::")[0]
    base = (wrapper / entry).read_text()
    tail = (ROOT / "tests" / "assets" / "energy" / "hungry_tail.py").read_text()
    paths = []
    for count, kind, order in blocks:
        suffix = ("_mma" if kind == "mma" else "") + ("_first" if order == "first" else "")
        path = folder / definition / f"{HUNGRY}_b{count}{suffix}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        settings = f"SPIN_BLOCKS = {count}\nSPIN_SHARE = {SPIN_SHARE}\nSPIN_KIND = {kind!r}\nSPIN_ORDER = {order!r}\n"
        path.write_text(f"{base}\n\n{settings}\n{tail}")
        paths.append(path)
    return paths


#: the workloads on which the FlashInfer wrapper took at least 50 µs on the H100 (its latency records of
#: 2026-12-06 in the registry; RESULTS.md "The catalogue on the H100"): shorter calls cannot be told apart by the
#: energy counter's 100 ms steps within a loop of a second
LONG_WORKLOADS = {
    "gqa_paged_decode_h32_kv8_d128_ps1": ["b128x_kv1024", "b64x_kv512", "b8x_kv8192"],
    "gqa_paged_prefill_causal_h20_kv4_d128_ps64": ["b4x_q1024_p128", "b8x_q128_p64", "q1117_p1117", "q2048_p32"],
}


def bench(
    definition: str, impls: list[str], workloads: list[str], out: Path, args: argparse.Namespace, env: dict[str, str]
) -> float:
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
        "--out",
        str(out),
        "--json",
        *[part for workload in workloads for part in ("--workload", workload)],
    ]
    if args.loop is not None:
        command += ["--energy-loop", str(args.loop)]
    if args.trials is not None:
        command += ["--energy-trials", str(args.trials)]
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


def warm(definition: str, workloads: list[str], out: Path, env: dict[str, str]) -> None:
    """Build the wrapper's FlashInfer modules outside the sandbox (one call), as benchmarks/catalogue.py does."""
    wrapper = str(ROOT / "implementations" / definition / HONEST)
    command = [sys.executable, "-m", "kictl", "bench", definition, "--impl", wrapper]
    command += ["--workload", workloads[0]] if workloads else []
    command += ["--no-sandbox", "--warmup", "1", "--iterations", "1", "--trials", "1", "--rounds", "1"]
    started = time.perf_counter()
    done = subprocess.run([*command, "--out", str(out / "warm")], cwd=ROOT, env=env, capture_output=True, text=True)
    print(f"warm {definition}: exit {done.returncode} in {time.perf_counter() - started:.0f} s", flush=True)
    shutil.rmtree(out / "warm", ignore_errors=True)  # one call's records, not for the registry


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


def hungry_lines(processes: list[list[dict[str, Any]]], tolerance: float | None = None) -> list[str]:
    """Each hungry variant against the honest FlashInfer wrapper, per workload and process. "ranks below" is the
    energy board's own rule (``kictl.rank.energy.joules_tie``): more joules than the wrapper by more than the
    policy's energy tie tolerance and either run's trial spread; "tied" within them. The claim also needs the
    latency within ``LATENCY_CLAIM`` of the wrapper's."""
    tolerance = EnergyPolicy().tie_tolerance if tolerance is None else tolerance
    lines = [
        "",
        "| workload | process | variant | FlashInfer J/call | hungry J/call | energy ratio | latency ratio "
        "| energy rank against the wrapper | the claim |",
        "|---|---:|---|---:|---:|---:|---:|---|---|",
    ]
    for number, process in enumerate(processes, start=1):
        by = {(r["workload"], r["implementation"]): r for r in process if r["status"] == "passed" and r["energy"]}
        for workload, impl in sorted(by):
            if not impl.startswith(HUNGRY):
                continue
            hungry = by[workload, impl]
            honest = next((r for (w, i), r in by.items() if w == workload and i.startswith(HONEST)), None)
            if honest is None:
                continue
            mine, theirs = hungry["energy"], honest["energy"]
            e_ratio = mine["joulesPerCall"] / theirs["joulesPerCall"]
            l_ratio = hungry["latencyNs"] / honest["latencyNs"]
            tied = joules_tie(
                theirs["joulesPerCall"], theirs["spread"], mine["joulesPerCall"], mine["spread"], tolerance
            )
            rank = "tied" if tied else "below" if e_ratio > 1 else "above"
            holds = rank == "below" and l_ratio <= 1 + LATENCY_CLAIM
            allowed = tie_allowance(tolerance, theirs["spread"], mine["spread"])
            lines.append(
                f"| {workload} | {number} | {impl} | {joules(theirs['joulesPerCall'])} | "
                f"{joules(mine['joulesPerCall'])} | {e_ratio:.2f} | {l_ratio:.3f} | "
                f"{rank} (ties within {100 * allowed:.1f}%) | {'holds' if holds else 'no'} |"
            )
    return lines


def calibration_lines(
    definition: str, blocks: list[Variant], workloads: list[str], folder: Path, device: str = "cuda"
) -> list[str]:
    """Each variant's calibration (its setup()) on each workload, in this process, outside kictl: the wrapper's
    device time a call, every spin the closed loop tried (its time alone and the variant's time a call) and the one
    kept. kictl's workers keep no log a call can return, so this is where the figures behind a variant's energy
    and latency are read (issue 43)."""
    import importlib.util

    import torch

    from kictl.bench.judge.inputs import materialize_one, plan_inputs
    from kictl.definitions import signature
    from kictl.records import DefinitionSpec
    from kictl.store.registry import Registry

    registry = Registry(ROOT)
    record = registry.resolve(definition, ["Definition"])
    spec = record.model.spec
    assert isinstance(spec, DefinitionSpec)
    by_name = {
        w.name: w
        for w in registry.iter_records(["Workload"])
        if w.raw["spec"]["definitionDigest"] == record.digest and w.name in workloads
    }
    if missing := sorted(set(workloads) - set(by_name)):
        raise SystemExit(f"energy.py: {definition} has no workload {', '.join(missing)}")
    lines = [
        "",
        f"**{definition}: calibration**",
        "",
        "| variant | workload | wrapper ms/call | spins tried: iterations, ms alone → variant ms | kept | launch |",
        "|---|---|---:|---|---:|---|",
    ]
    for path in hungry_files(definition, blocks, folder):
        loaded = importlib.util.spec_from_file_location(f"calibrate_{path.stem}", path)
        assert loaded is not None
        assert loaded.loader is not None
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
        for name, workload in sorted(by_name.items()):
            plan = plan_inputs(spec, workload, signature(spec).inputs, None, offset=0)
            args = [materialize_one(source, device) for source in plan.sources]
            before = len(module._SPIN["log"])
            module.setup(*args)
            if len(module._SPIN["log"]) == before:  # CPU inputs (no spin there), or shapes calibrated already
                why = f"inputs on {device}" if device != "cuda" else "the shapes of a workload above"
                lines.append(f"| {path.stem} | {name} | - | not calibrated: {why} | - | - |")
            else:
                torch.cuda.synchronize()
                entry = module._SPIN["log"][-1]
                tried = "; ".join(f"{n}, {alone:.4f} → {ms:.4f}" for n, alone, ms in entry["tried"])
                cells = f"{entry['plain_ms']:.4f} | {tried} | {entry['kept']} | {entry['launch']}"
                lines.append(f"| {path.stem} | {name} | {cells} |")
            print(lines[-1], flush=True)
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget", type=float, default=480.0, help="seconds: no process is started after")
    parser.add_argument("--definition", action="append", default=None, help="a bundled attention definition")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument(
        "--hungry",
        type=variant,
        action="append",
        default=None,
        help="a variant: its spinning blocks, 'mma' after them for the tensor-core spin, 'first' last to launch the "
        "spin before the wrapper's kernels (default 16, 132, 132mma: launched after them)",
    )
    parser.add_argument("--loop", type=float, default=None, help="--energy-loop (kictl's default if not given)")
    parser.add_argument("--trials", type=int, default=None, help="--energy-trials (kictl's default if not given)")
    parser.add_argument("--no-sandbox", action="store_true")
    parser.add_argument("--workload", action="append", default=None, help="only these workloads (repeatable)")
    parser.add_argument("--no-reference", action="store_true", help="leave the reference out of process 1")
    parser.add_argument("--hungry-processes", type=int, default=1, help="the first N processes run the variants")
    parser.add_argument(
        "--calibration", action="store_true", help="only calibrate each variant on each workload, here, and print it"
    )
    args = parser.parse_args()
    definitions = args.definition or list(DEFAULT_DEFINITIONS)
    for definition in definitions:
        if not (ROOT / "implementations" / definition / HONEST / "implementation.json").is_file():
            parser.error(f"{definition}: no implementations/{definition}/{HONEST} (a bundled attention definition)")
    blocks = args.hungry or [variant(text) for text in DEFAULT_VARIANTS]
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "KICTL_ENERGY_TRACES": str(args.out / "traces")}
    began = time.perf_counter()
    for definition in definitions:
        warm(definition, args.workload or LONG_WORKLOADS.get(definition, []), args.out, env)
    print(f"flashinfer: {_install_aot()} module(s) installed as AOT", flush=True)
    if args.calibration:
        lines = []
        for definition in definitions:
            workloads = args.workload or LONG_WORKLOADS.get(definition, [])
            lines += calibration_lines(definition, blocks, workloads, args.out / "variants")
        (args.out / "calibration.md").write_text("\n".join(lines) + "\n")
        return 0
    results: dict[str, list[list[dict[str, Any]]]] = {}
    for number in range(1, args.processes + 1):
        for definition in definitions:
            if time.perf_counter() - began > args.budget:
                print(f"budget spent: process {number} of {definition} skipped", flush=True)
                continue
            folder = ROOT / "implementations" / definition
            impls = [str(folder / HONEST)]
            if number <= args.hungry_processes:
                impls += map(str, hungry_files(definition, blocks, args.out / "variants"))
            if number == 1 and not args.no_reference:
                impls.insert(0, str(folder / "reference"))
            workloads = args.workload or LONG_WORKLOADS.get(definition, [])
            out = args.out / f"p{number}-{definition}"
            bench(definition, impls, workloads, out, args, env)
            results.setdefault(definition, []).append(runs_of(out))
    lines = table(results)
    for definition, processes in results.items():
        lines += ["", f"**{definition}**", *hungry_lines(processes)]
    text = "\n".join(lines)
    (args.out / "energy_table.md").write_text(text + "\n")
    print(text)
    pack(args.out)
    return 0


def pack(out: Path) -> None:
    """Everything but the table into ``records.tgz``, the loose files removed: the device tool brings a few files
    back (the manifests, answers and counter traces of one call are dozens), and ``kictl submit`` reads the
    manifests once unpacked."""
    loose = sorted(path for path in out.rglob("*") if path.is_file() and path.name != "energy_table.md")
    with tarfile.open(out / "records.tgz", "w:gz") as archive:
        for path in loose:
            archive.add(path, arcname=str(path.relative_to(out)))
    for path in loose:
        path.unlink()
    for folder in sorted((p for p in out.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        folder.rmdir()


if __name__ == "__main__":
    sys.exit(main())
