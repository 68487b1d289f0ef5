#!/usr/bin/env python
"""Issue 10's walls on a GPU: the sandbox with /dev/nvidia* bound in, honest implementations pass, cheats fail.

Claim (README.md's walls, docs/bench.md; RESULTS.md "The walls on a GPU"): on a GPU, in the sandbox, honest
implementations pass and every class of cheat fails. Machine and command: the H200, `bash benchmarks/device.sh
walls_gpu_check.py`.

Run from the repository root on the GPU machine (FlashInfer installed), with bubblewrap reachable::

    KICTL_BWRAP=/path/to/usr/bin/bwrap python benchmarks/walls_gpu_check.py --out "$OUT"

(On the lent H200, which has no network: ``apt-get download bubblewrap`` here, carry the .deb,
``dpkg -x bubblewrap_*.deb DIR`` there and set ``KICTL_BWRAP=DIR/usr/bin/bwrap``.)

1. Honest, sandboxed: ``kictl bench`` of the FlashInfer wrapper (``plan()`` in ``setup()``), torch SDPA and
   the reference on ``gqa_paged_prefill_causal_h24_kv4_d128_ps1 / q154_kv154`` and of the FlashInfer decode
   wrapper on ``gqa_paged_decode_h32_kv8_d128_ps1 / b16x_kv1024``: every run must pass and the protocol must
   record bubblewrap.  The same FlashInfer runs with ``--no-sandbox`` give the sandbox's cost in wall time
   and whether the medians move.
2. Cheats on CUDA: rmsnorm cheats of every class that exists on a GPU, and the attention cheats (a cache
   keyed on the query tensor's identity, work on a side stream) next to the honest implementations; no
   cheat may pass; the side-stream cheat fails ``streamOrdered`` under the CUPTI timer's end marker.

Writes ``walls_gpu.json`` (every row, command, wall time) and ``walls_gpu.txt`` (the table) to ``--out``;
exits 1 when an expectation fails.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
IMPL = ROOT / "implementations"
CHEATS = ROOT / "tests" / "assets" / "cheats"
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
    out = Path(tempfile.mkdtemp(prefix="walls-out-"))
    command = [
        sys.executable,
        "-m",
        "kictl",
        "bench",
        definition,
        *[arg for impl in impls for arg in ("--impl", str(impl))],
        "--workload",
        workload,
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--part", choices=("all", "honest", "cheats"), default="all")
    parser.add_argument("--modes", default="sandbox,no-sandbox", help="honest part: sandbox, no-sandbox or both")
    args = parser.parse_args()
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


def _finish(out: Path, results: dict[str, Any], lines: list[str], problems: list[str]) -> int:
    results["problems"] = problems
    (out / "walls_gpu.json").write_text(json.dumps(results, indent=2))
    text = "\n".join([*lines, "", *(f"PROBLEM: {p}" for p in problems or ["none"])])
    (out / "walls_gpu.txt").write_text(text + "\n")
    print(text)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
