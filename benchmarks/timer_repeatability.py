#!/usr/bin/env python
"""Issue 11 on the H200: `kictl bench`'s timers against Nsight Compute on every bundled attention workload.

Claim (README.md "Performance"; RESULTS.md "Timer truth: three separate `kictl bench` processes"): three separate
`kictl bench` processes agree within 2% on 15 of 19 attention workloads; the four calls of 6-13 us spread 2.0-7.1%
(0.16-0.45 us). Machine and command: the H200, `bash benchmarks/device.sh timer_repeatability.py --passes
cupti,cupti,cupti`.

Run from the repository root on the GPU machine after ``. benchmarks/h200_setup.sh``::

    python benchmarks/timer_repeatability.py --out "$OUT" --passes cupti           # one process per pass
    python benchmarks/timer_repeatability.py --out "$OUT" --passes cupti,cupti,events,graph
    python benchmarks/timer_repeatability.py --table "$OUT"                         # the table, from what is there

Each pass is one ``kictl bench`` process per attention definition, with the FlashInfer wrapper
(``plan()`` in ``setup()``) on every workload, in kictl's sandbox, with ``--timer`` as named (``cupti``
is the default timer). Its medians go to ``$OUT/passes.json`` (appended, so several calls add up).
``--table`` sets them beside ``benchmarks/timer_vs_ncu.py``'s figures (``timers.json``,
``ncu.csv`` in the same folder): the profiler's ``gpu__time_duration`` summed over the call's kernels,
and the spread of the CUPTI medians over separate processes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFINITIONS = (
    "gqa_paged_prefill_causal_h24_kv4_d128_ps1",
    "gqa_paged_prefill_causal_h20_kv4_d128_ps64",
    "gqa_paged_decode_h32_kv8_d128_ps1",
)


def one_pass(timer: str, extra: list[str], definitions: tuple[str, ...] = DEFINITIONS) -> dict[str, Any]:
    """One ``kictl bench`` process per definition; per workload the run's median, events median, status."""
    found: dict[str, Any] = {}
    for definition in definitions:
        out = Path(tempfile.mkdtemp(prefix="timer-check-"))
        command = [
            sys.executable,
            "-m",
            "kictl",
            "bench",
            definition,
            "--impl",
            str(ROOT / "implementations" / definition / "flashinfer_wrapper"),
            "--device",
            "cuda",
            "--timer",
            timer,
            "--registry",
            str(ROOT),
            "--out",
            str(out),
            *extra,
        ]
        started = time.monotonic()
        try:
            done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False, timeout=240)
        except subprocess.TimeoutExpired:
            print(f"{timer} {definition}: no result in 240 s", file=sys.stderr, flush=True)
            continue
        wall = time.monotonic() - started
        print(f"{timer} {definition}: exit {done.returncode} in {wall:.0f} s", file=sys.stderr, flush=True)
        if done.returncode not in (0, 1):
            print("\n".join(done.stderr.splitlines()[-12:]), file=sys.stderr)
        records: dict[str, Any] = {}
        for manifest in out.glob("*.json"):
            records.update(json.loads(manifest.read_text()))
        names = {digest: r["metadata"]["name"] for digest, r in records.items() if r["kind"] == "Workload"}
        protocols = {digest: r["spec"] for digest, r in records.items() if r["kind"] == "BenchmarkProtocol"}
        for record in records.values():
            if record["kind"] != "BenchmarkRun":
                continue
            spec = record["spec"]
            timing = spec.get("timing") or {}
            protocol = protocols.get(spec["protocolDigest"], {})
            failed = sorted(k for k, v in (spec.get("integrity") or {}).items() if v.get("result") == "failed")
            found[f"{definition}/{names.get(spec['workloadDigest'], spec['workloadDigest'][:15])}"] = {
                "status": spec["status"],
                "medianNs": (timing.get("latencyNs") or {}).get("median"),
                "eventsMedianNs": timing.get("eventsMedianNs"),
                "kernelsPerCall": timing.get("kernelsPerCall"),
                "busyMedianNs": timing.get("busyMedianNs"),
                "clocksSteady": timing.get("clocksSteady"),
                "timer": protocol.get("measurement", {}).get("timer"),
                "isolation": protocol.get("measurement", {}).get("isolation"),
                "failedChecks": failed,
                "wallS": round(wall, 1),
            }
    return found


def table(folder: Path) -> str:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from timer_vs_ncu import parse_ncu

    passes = json.loads((folder / "passes.json").read_text()) if (folder / "passes.json").exists() else []
    probe = json.loads((folder / "timers.json").read_text())["targets"] if (folder / "timers.json").exists() else {}
    ncu = parse_ncu((folder / "ncu.csv").read_text()) if (folder / "ncu.csv").exists() else {}
    passes = [{**p, "runs": {_named(name): row for name, row in p["runs"].items()}} for p in passes]
    names = sorted({name for p in passes for name in p["runs"]} | set(probe))
    lines = [
        "| workload | ncu (sum over the call's kernels) | kictl CUPTI medians (processes) | vs ncu | spread | "
        "kictl events | kictl graph | probe graph replay |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in names:
        cupti = [p["runs"][name]["medianNs"] for p in passes if p["timer"] == "cupti" and name in p["runs"]]
        cupti = [value for value in cupti if value]
        events = [p["runs"][name]["medianNs"] for p in passes if p["timer"] == "events" and name in p["runs"]]
        # a CUPTI run keeps the events figure of the same calls beside its own (``eventsMedianNs``)
        events = events or [
            p["runs"][name].get("eventsMedianNs") for p in passes if p["timer"] == "cupti" and name in p["runs"]
        ]
        events = [value for value in events if value]
        graph = [p["runs"][name]["medianNs"] for p in passes if p["timer"] == "graph" and name in p["runs"]]
        profiler = statistics.median(ncu[name]) if ncu.get(name) else None
        vs = spread = "—"
        if cupti and profiler:
            middle = statistics.median(cupti)
            vs = f"{(middle - profiler) / profiler * 100:+.1f}% ({(middle - profiler) / 1000:+.2f} µs)"
        if len(cupti) > 1:
            spread = f"{(max(cupti) - min(cupti)) / statistics.median(cupti) * 100:.1f}%"
        graph_probe = (probe.get(name) or {}).get("graphEventsMedianNs")
        lines.append(
            f"| {name} | {_us(profiler)} | {', '.join(_us(v) for v in cupti) or '—'} | {vs} | {spread} | "
            f"{', '.join(_us(v) for v in events) or '—'} | {', '.join(_us(v) for v in graph) or '—'} | "
            f"{_us(graph_probe)} |"
        )
    return "\n".join(lines)


def _named(key: str) -> str:
    """``definition/sha256:…`` (a pass whose output held no Workload records) as ``definition/workload name``."""
    definition, _, workload = key.partition("/")
    if not workload.startswith("sha256:"):
        return key
    from kictl.store.registry import Registry

    try:
        record = Registry(ROOT).resolve(workload.removeprefix("sha256:"), ["Workload"])
    except Exception:
        return key
    return f"{definition}/{record.model.metadata.name}"


def _us(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value / 1000:.2f} µs" if value < 1e6 else f"{value / 1e6:.3f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--passes", default="cupti")
    parser.add_argument("--table", type=Path)
    parser.add_argument("--extra", default="", help="More `kictl bench` options, space-separated.")
    parser.add_argument("--definition", action="append", help="only these definitions (default: all three)")
    options = parser.parse_args()
    if options.table:
        print(table(options.table))
        return 0
    if options.out is None:
        parser.error("--out is required")
    options.out.mkdir(parents=True, exist_ok=True)
    path = options.out / "passes.json"
    passes = json.loads(path.read_text()) if path.exists() else []
    for timer in [item for item in options.passes.split(",") if item]:
        runs = one_pass(timer, options.extra.split(), tuple(options.definition or DEFINITIONS))
        passes.append({"timer": timer, "runs": runs})
        path.write_text(json.dumps(passes, indent=1))
    print(table(options.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
