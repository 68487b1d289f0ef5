#!/usr/bin/env python
"""Measure the catalogue on the lent GPU: every definition's implementations, latency and energy (issue 43).

Claim (README "A tour of the bundled registry"; RESULTS.md "The catalogue on the H100"): each bundled definition
with implementations under ``implementations/<definition>/`` has a leaderboard on the GPU product this ran on,
holding the reference, the FlashInfer baseline where one exists and a torch alternative, every run measured by
``kictl bench`` (sandboxed, CUPTI device time) and signed afterwards, off the GPU machine. Machine and command: the
H100, ``bash benchmarks/device.sh catalogue.py``.

Run from the repository root on the GPU machine, in one call (``bash benchmarks/device.sh catalogue.py``)::

    python benchmarks/catalogue.py --out "$OUT/catalogue" [--definition NAME ...] [--energy]

What it does, in order:

1. FlashInfer's kernels are JIT-built outside the sandbox, once: each FlashInfer implementation runs unsandboxed
   on its definition's smallest workload (one call, results thrown away), then the built modules are installed as
   FlashInfer AOT kernels, which a sandboxed worker loads without ninja (a private rebuild in every worker took
   85 s on the H200: HISTORY, device call F).
2. ``kictl bench DEFINITION --impl reference --impl … --out DIR`` per definition (every workload), the real
   command line with its defaults; with ``--energy``, ``--measure energy`` for the attention and GEMM families
   of each implementation but the reference, on the workloads where it took at least 50 µs (shorter calls cannot
   be told apart by the 100 ms energy counter within a loop of seconds); ``--energy-processes 3`` measures the
   FlashInfer runs in three separate processes (the spread claim); ``--energy-from DIR`` chooses from the
   latency manifests of an earlier call.
3. Prints one row per run (definition, workload, implementation, status, primary statistic) and packs the
   manifests into ``records.tgz`` for the trip back.

Nothing is signed here: the machine that runs submitted code holds no key.  Back on the development machine:
``kictl submit`` the manifests with the bench submitter key (docs/submitting.md), or ``kictl add`` then
``kictl sign``.  ``--smoke`` runs the same path on a CPU (one workload of the RMSNorm definition, ``--device cpu``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ENERGY_FAMILIES = ("gqa-paged-attention", "gqa-ragged-attention", "mla-paged-attention", "gemm", "moe")
ENERGY_MIN_NS = 50_000


def _kictl(*args: str, log: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "kictl", *args]
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    with log.open("a") as handle:
        handle.write(f"$ kictl {' '.join(args)}  # exit {done.returncode}, {time.monotonic() - started:.1f} s\n")
        handle.write(done.stderr)
    return done


def _implementations(definition: str) -> list[Path]:
    folder = ROOT / "implementations" / definition
    if not folder.is_dir():
        return []
    found = sorted(path for path in folder.iterdir() if (path / "implementation.json").is_file())
    return sorted(found, key=lambda path: path.name != "reference")  # the reference first, as kictl bench wants


def _uses_flashinfer(implementation: Path) -> bool:
    spec = json.loads((implementation / "implementation.json").read_text())
    return any(name.startswith("flashinfer") for name in spec.get("dependencies", {}))


def _definitions(registry_root: Path, wanted: list[str]) -> list[tuple[str, str, list[str]]]:
    """(name, family, workload labels) of each bundled definition with implementations, in name order."""
    from kictl.store.registry import Registry

    registry = Registry(registry_root)
    out = []
    for record in sorted(registry.iter_records(["Definition"]), key=lambda r: r.name):
        if wanted and record.name not in wanted:
            continue
        if not _implementations(record.name):
            continue
        labels = sorted(
            w.name for w in registry.iter_records(["Workload"]) if w.raw["spec"]["definitionDigest"] == record.digest
        )
        out.append((record.name, record.raw["spec"]["family"], labels))
    return out


def _install_aot() -> int:
    """Copy FlashInfer's JIT-built modules to where it loads AOT kernels from (h200_setup.sh does this for a cache)."""
    try:
        import flashinfer
    except ImportError:
        return 0
    aot = Path(flashinfer.__file__).parent / "data" / "aot"
    count = 0
    for so in (Path.home() / ".cache" / "flashinfer").glob("*/*/cached_ops/*/*.so"):
        target = aot / so.parent.name
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(so, target / so.name)
        count += 1
    return count


def _rows(manifest_dir: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(manifest_dir.glob("*.json")):
        manifest = json.loads(path.read_text())  # {"<kind>/<hex>": record}, as kictl bench --out writes it
        for record in manifest.values():
            if not isinstance(record, dict) or record.get("kind") != "BenchmarkRun":
                continue
            spec = record["spec"]
            timing = spec.get("timing") or {}
            statistic = timing.get("primaryStatistic", "median")
            value = (timing.get("latencyNs") or {}).get(statistic)
            energy = (spec.get("energy") or {}).get("joulesPerCall")
            rows.append(
                {
                    "name": record["metadata"]["name"],
                    "status": spec["status"],
                    "latencyNs": value,
                    "joulesPerCall": energy,
                }
            )
    return rows


def _pack(out: Path) -> None:
    """The manifests so far, in one file (a device call brings back few files, and a killed call keeps this one)."""
    with tarfile.open(out / "records.tgz.part", "w:gz") as tar:
        for kind in ("latency", "energy"):
            if (out / kind).is_dir():
                tar.add(out / kind, arcname=kind)
    (out / "records.tgz.part").replace(out / "records.tgz")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--definition", action="append", default=[])
    parser.add_argument("--energy", action="store_true", help="also --measure energy (attention, GEMM, MoE)")
    parser.add_argument("--no-latency", action="store_true", help="skip the latency runs (energy only)")
    parser.add_argument(
        "--energy-from", type=Path, help="latency manifests (DIR/<definition>/) that choose energy runs"
    )
    parser.add_argument("--energy-processes", type=int, default=1, help="separate processes per FlashInfer run")
    parser.add_argument("--budget", type=float, default=480.0, help="seconds: no further energy process after")
    parser.add_argument("--smoke", action="store_true", help="a CPU check of this script's path")
    parser.add_argument("--registry", type=Path, default=ROOT)
    args = parser.parse_args()
    out: Path = args.out
    begun = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "kictl.log"
    device = ["--device", "cpu"] if args.smoke else []
    wanted = ["rmsnorm_h4096"] if args.smoke else args.definition
    definitions = _definitions(args.registry, wanted)
    summary: list[str] = []
    energy_jobs: list[tuple[int, str, Path, list[str]]] = []

    # 1. FlashInfer's kernels, built once outside the sandbox
    if not args.smoke and not args.no_latency:  # with --no-latency the kernels come from a carried cache
        started = time.monotonic()
        for name, _, labels in definitions:
            for implementation in _implementations(name):
                if _uses_flashinfer(implementation):
                    _kictl(
                        "bench", name, "--impl", str(implementation), "--workload", labels[0], "--no-sandbox",
                        "--warmup", "1", "--iterations", "1", "--trials", "1", "--rounds", "1",
                        "--out", str(out / "warm"), log=log,
                    )  # fmt: skip
        shutil.rmtree(out / "warm", ignore_errors=True)
        summary.append(f"flashinfer: {_install_aot()} module(s) installed as AOT in {time.monotonic() - started:.0f} s")

    # 2. kictl bench per definition
    for name, family, labels in definitions:
        impls = [arg for implementation in _implementations(name) for arg in ("--impl", str(implementation))]
        if args.smoke:
            impls += ["--workload", labels[0]]
        if not args.no_latency:
            started = time.monotonic()
            done = _kictl("bench", name, *impls, *device, "--out", str(out / "latency" / name), log=log)
            summary.append(f"{name}: latency exit {done.returncode} in {time.monotonic() - started:.0f} s")
        if args.energy and family in ENERGY_FAMILIES:
            source = (args.energy_from or out / "latency") / name
            picks: dict[str, set[str]] = {}
            for row in _rows(source):
                implementation, label = row["name"].split(".")[:2]
                if row["status"] == "passed" and (row["latencyNs"] or 0) >= ENERGY_MIN_NS:
                    picks.setdefault(implementation.rsplit("_", 1)[0], set()).add(label)
            for implementation in _implementations(name):
                labels = sorted(picks.get(implementation.name, ()))
                if implementation.name == "reference" or not labels:
                    continue  # the reference is measured for latency; its energy says little about a kernel
                repeats = args.energy_processes if _uses_flashinfer(implementation) else 1
                energy_jobs.extend((process, name, implementation, labels) for process in range(1, repeats + 1))
        _pack(out)
        if summary:
            print(summary[-1], flush=True)
    # every first energy process before any repeat, so that a budget cuts repeats, never a board
    for process, name, implementation, labels in sorted(energy_jobs, key=lambda job: job[0]):
        if process > 1 and time.monotonic() - begun > args.budget:
            summary.append(f"{name}: {implementation.name} energy process {process} skipped (budget)")
            continue
        started = time.monotonic()
        done = _kictl(
            "bench", name, "--impl", str(implementation),
            *(arg for label in labels for arg in ("--workload", label)),
            "--measure", "energy", "--out", str(out / "energy" / f"p{process}-{name}"), log=log,
        )  # fmt: skip
        summary.append(
            f"{name}: {implementation.name} energy process {process} on {len(labels)} workload(s), "
            f"exit {done.returncode} in {time.monotonic() - started:.0f} s"
        )
        _pack(out)
        print(summary[-1], flush=True)

    # 3. the table, and the manifests packed for the trip back
    lines = ["run                                                                    status     median        J/call"]
    for kind in ("latency", "energy"):
        for folder in sorted((out / kind).glob("*")) if (out / kind).is_dir() else []:
            for row in _rows(folder):
                latency = f"{row['latencyNs'] / 1000:10.2f} µs" if row["latencyNs"] else "         -   "
                energy = f"{row['joulesPerCall']:.4g}" if row["joulesPerCall"] else "-"
                lines.append(f"{row['name'][:70]:70s} {row['status']:10s} {latency} {energy}")
    _pack(out)
    (out / "summary.txt").write_text("\n".join([*summary, *lines]) + "\n")
    print("\n".join([*summary, *lines]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
