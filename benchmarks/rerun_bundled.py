#!/usr/bin/env python
"""Controlled reruns of the bundled H200 FlashInfer runs of one definition (issue 14).

Claim (docs/rerun.md; RESULTS.md "Controlled reruns on the H200"): `kictl rerun` of the bundled H200 FlashInfer
runs agrees with 15 of 15 (0.92-1.08x claimed). Machine and command: the H200, `bash benchmarks/device.sh
rerun_bundled.py --timeout 80`.

Run from the repository root on the H200 machine, with ``flashinfer-python``
installed, in one call::

    python benchmarks/rerun_bundled.py --out "$OUT"

It selects every passed BenchmarkRun of ``gqa_paged_prefill_causal_h24_kv4_d128_ps1``
(``--definition``) in the bundled registry whose implementation is the
FlashInfer wrapper, runs ``kictl rerun <digests> --out "$OUT/rerun" --json`` (the
real command line: each run's job rebuilt from the registry's records, its own
protocol's timer, warm-up, iterations, trials, rounds and tolerances, fresh
secret seeds for the correctness rounds), and prints one row per original run:
workload, timer, claimed and rerun latency of the primary statistic, the ratio
and the verdict at the bundled policy's ``rerunTolerance``.

Nothing is signed here: the machine that runs submitted code holds no key.
Sign elsewhere with ``kictl attest rerun "$OUT/rerun" --key VERIFIER_KEY
--require-verifier`` (the key must be a verifier of the registry's trust root).

``$OUT`` receives ``rerun/`` (``reruns.json`` and ``records.json``, unsigned),
``summary.txt`` (the table) and ``rerun.log`` (kictl's stderr).  ``--smoke``
exercises the same path on a CPU: it forces the rerun of one small workload
(``--device cpu --force``), whose verdict can then only be ``inconclusive``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFINITION = "gqa_paged_prefill_causal_h24_kv4_d128_ps1"
SMOKE_WORKLOAD = "q1_kv1"


def _select(registry_root: Path, definition: str, implementation_prefix: str, smoke: bool) -> list[dict[str, Any]]:
    from kictl.store.registry import Registry

    registry = Registry(registry_root)
    target = registry.resolve(definition, ["Definition"])
    names = {record.digest: record.name for record in registry.iter_records(["Implementation", "Workload"])}
    chosen = []
    for run in registry.iter_records(["BenchmarkRun"]):
        spec = run.raw["spec"]
        if spec.get("definitionDigest") != target.digest or spec["status"] != "passed":
            continue
        implementation = names.get(spec["implementationDigest"], "?")
        workload = names.get(spec["workloadDigest"], "?")
        if not implementation.startswith(implementation_prefix):
            continue
        if smoke and workload != SMOKE_WORKLOAD:
            continue
        protocol = registry.load(spec["protocolDigest"]).raw["spec"]["measurement"]
        chosen.append(
            {
                "run": run.digest,
                "implementation": implementation,
                "workload": workload,
                "timer": protocol["timer"] + (" +setup" if protocol.get("setupInTimedRegion") else ""),
                "observedAt": spec["observedAt"],
            }
        )
    chosen.sort(key=lambda row: (row["workload"], row["timer"], row["observedAt"]))
    return chosen[:1] if smoke else chosen


def _us(value: int | None) -> str:
    return "-" if value is None else f"{value / 1000:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for rerun/, summary.txt and rerun.log")
    parser.add_argument("--registry", type=Path, default=ROOT, help="registry root (default: this repository)")
    parser.add_argument("--definition", default=DEFINITION)
    parser.add_argument("--implementation", default="flashinfer_wrapper", help="implementation name prefix")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per implementation and workload")
    parser.add_argument("--smoke", action="store_true", help="CPU: one small workload, forced (inconclusive)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs = _select(args.registry, args.definition, args.implementation, args.smoke)
    if not runs:
        print(f"no passed {args.implementation} runs of {args.definition} in {args.registry}", file=sys.stderr)
        return 2
    command = [
        sys.executable, "-m", "kictl", "rerun", *(row["run"] for row in runs),
        "--registry", str(args.registry), "--out", str(args.out / "rerun"), "--json",
        "--timeout", str(args.timeout),
    ]  # fmt: skip
    if args.smoke:
        command += ["--device", "cpu", "--force"]
    print(f"rerunning {len(runs)} run(s) of {args.definition}: {' '.join(command[2:5])} ...", flush=True)
    started = time.monotonic()
    with (args.out / "rerun.log").open("w") as log:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=log, text=True, check=False, cwd=ROOT)
    seconds = time.monotonic() - started
    if done.returncode > 1:
        print((args.out / "rerun.log").read_text()[-3000:], file=sys.stderr)
        print(f"kictl rerun exited with {done.returncode}", file=sys.stderr)
        return done.returncode
    verdicts = {row["original"]: row for row in json.loads(done.stdout)}
    headers = ["workload", "timer", "stat", "claimed us", "rerun us", "ratio", "verdict", "run", "why"]
    rows = []
    for row in runs:
        verdict = verdicts[row["run"]]
        rows.append(
            [
                row["workload"],
                row["timer"],
                verdict["statistic"],
                _us(verdict["originalNs"]),
                _us(verdict.get("rerunNs")),
                "-" if verdict.get("ratio") is None else f"{verdict['ratio']:.3f}",
                verdict["verdict"],
                row["run"][:19],
                verdict["reason"][:70],
            ]
        )
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
             for line in [headers, ["-" * width for width in widths], *rows]]  # fmt: skip
    counts: dict[str, int] = {}
    for verdict in verdicts.values():
        counts[verdict["verdict"]] = counts.get(verdict["verdict"], 0) + 1
    tolerance = next(iter(verdicts.values()))["tolerance"]
    lines += [
        "",
        f"{len(runs)} run(s) of {args.definition} ({args.implementation}), rerunTolerance {tolerance}: "
        + ", ".join(f"{count} {verdict}" for verdict, count in sorted(counts.items()))
        + f"; {seconds:.0f} s; kictl rerun exit {done.returncode}",
        f"unsigned results in {args.out / 'rerun'}; sign elsewhere with: "
        f"kictl attest rerun {args.out / 'rerun'} --key VERIFIER_KEY --require-verifier",
    ]
    text = "\n".join(lines) + "\n"
    (args.out / "summary.txt").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
