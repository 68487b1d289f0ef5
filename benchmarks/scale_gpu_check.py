#!/usr/bin/env python
"""Issue 16 on a GPU node: ``--devices all`` and ``--executor ray`` give the records of a plain run.

Claim (README.md, docs/scale-out.md; RESULTS.md "Scale-out on a GPU node"): `--devices all` and `--executor ray`
give the records of a plain run, digest for digest, timings aside. Machine and command: the H200, `bash
benchmarks/device.sh scale_gpu_check.py --definition gqa_paged_prefill_causal_h24_kv4_d128_ps1` (the Ray leg needs
`ray==2.60.0`).

Run from the repository root on the GPU machine (after ``benchmarks/h200_setup.sh``, and with
``ray==2.60.0`` installed for the Ray leg)::

    python benchmarks/scale_gpu_check.py --out "$OUT"

For each bundled attention definition (or ``--definition``), with its
FlashInfer wrapper and its reference, three runs of the whole suite on the
default CUDA protocol:

1. plain: ``kictl.bench.session.run_bench`` (what ``kictl bench`` does today);
2. local pool: ``kictl.executors.run_bench_jobs(..., devices="all")``;
3. Ray: ``run_bench_jobs(..., executor="ray")`` on a local Ray instance
   (skipped, and said so, when Ray is not installed).

Each leg's wall time, and whether its records are the plain run's (the same
Definition, Workload, Implementation, BenchmarkProtocol and
ExecutionEnvironment records, and runs naming the same digests: only
timings and ``observedAt`` may differ).  Writes ``scale.json`` and
``summary.txt`` to ``--out``.  ``--smoke`` does the same on the CPU with one
small workload per definition and the torch implementations (to test this
script without a GPU).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kictl.bench.session import BenchOptions, run_bench  # noqa: E402
from kictl.executors import run_bench_jobs  # noqa: E402
from kictl.records import StoredRecord  # noqa: E402
from kictl.store import Registry  # noqa: E402

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
    args = parser.parse_args()
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
    raise SystemExit(main())
