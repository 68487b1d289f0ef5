#!/usr/bin/env python
"""The CUPTI timer against Nsight Compute, CUDA events and graph replay, on the bundled attention workloads.

Claim (README.md "Benchmarking", docs/bench.md; RESULTS.md "Timer truth: CUPTI against Nsight Compute"): CUPTI
reads every bundled attention workload above ~60 us within 1.5% of Nsight Compute; below it, ncu's own ~0.7 us a
kernel and the gaps it leaves out set the difference. Machine and command: the H200, `bash benchmarks/device.sh
timer_vs_ncu.py --calls 50`, then `KICTL_NCU=1 KICTL_DEVICE_NO_OUT=1 bash benchmarks/device.sh
timer_vs_ncu.py --ncu` and `--compare DIR`.

Run on the GPU machine from the repository root, after the ``gpu`` extra's
packages are importable (carried wheels: see docs/bench.md)::

    python benchmarks/timer_vs_ncu.py --out "$OUT"            # timers, side-stream check, NVML
    ncu --cache-control all --clock-control none --metrics gpu__time_duration.sum --csv \\
        python benchmarks/timer_vs_ncu.py --ncu > "$OUT/ncu.csv"  # the profiler's kernel times

then ``python benchmarks/timer_vs_ncu.py --compare "$OUT"`` prints the table.

For each target workload the FlashInfer wrapper implementation of the
registry is loaded from ``implementations/``, its ``setup()`` called once
(plan outside the timed region), and ``run()`` timed ``--calls`` times, each
call after a reset of the persisting L2 and a flush of the L2:

* ``cupti``: kictl's CUPTI attribution (``kictl.bench.worker.cupti_timer``), a device
  spin before each call so the host enqueues the whole call ahead;
* ``events``: CUDA events recorded after the same spin, around the call;
* ``graph``: one call captured in a CUDA graph, each replay between events;
* ``side``: the call moved to a stream of its own, returning at once (the
  side-stream cheat): CUPTI must still time its kernels.

``--ncu`` makes the same calls with nothing else on the device but the flush,
for ``ncu`` to time each kernel; ``--compare`` groups its rows per call (the
kernels between two flushes) and sets the medians side by side.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _all_targets() -> dict[tuple[str, str], str]:
    """Every workload of the three bundled attention definitions, with its FlashInfer wrapper's file."""
    found: dict[tuple[str, str], str] = {}
    for folder in sorted((ROOT / "definitions" / "gqa-paged-attention").iterdir()):
        filename = "flashinfer_decode.py" if "decode" in folder.name else "flashinfer_prefill.py"
        for line in (folder / "workloads.jsonl").read_text().splitlines():
            if line.strip():
                found[(folder.name, json.loads(line)["metadata"]["name"])] = filename
    return found


def _only(found: dict[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    """``$PROBE_ONLY`` (comma-separated workload names) narrows the targets, the same way in every mode."""
    wanted = {name for name in os.environ.get("PROBE_ONLY", "").split(",") if name}
    return {key: value for key, value in found.items() if not wanted or key[1] in wanted}


TARGETS = _only(_all_targets())
FLUSH_BYTES = 256 * 1024 * 1024
NCU_CALLS = 20
NCU_WARMUP = 3


def _load(definition: str, filename: str) -> Any:
    folder = ROOT / "implementations" / definition / "flashinfer_wrapper"
    path = next(folder.glob("*.py")) if not (folder / filename).exists() else folder / filename
    spec = importlib.util.spec_from_file_location(f"probe_{definition}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _inputs(definition_name: str, label: str) -> list[Any] | None:
    from kictl.bench.judge.inputs import materialize, plan_inputs
    from kictl.bench.judge.session import select_workloads
    from kictl.definitions import signature
    from kictl.store.registry import Registry

    registry = Registry(ROOT)
    definition = registry.resolve(definition_name, ["Definition"])
    spec = definition.model.spec
    try:
        workload = select_workloads(registry, definition, [label])[0]
    except Exception as exc:
        print(f"skip {definition_name}/{label}: {exc}", file=sys.stderr)
        return None
    order = signature(spec).inputs
    return list(materialize(plan_inputs(spec, workload, order, registry.read_blob, offset=0), "cuda:0"))


def _targets() -> list[tuple[str, str, Any, list[Any]]]:
    found = []
    for (definition, label), filename in TARGETS.items():
        args = _inputs(definition, label)
        if args is None:
            continue
        module = _load(definition, filename)
        if hasattr(module, "setup"):
            module.setup(*args)
        found.append((definition, label, module, args))
    return found


def _median(values: list[int]) -> float | None:
    return float(statistics.median(values)) if values else None


class _Probe:
    """The timers of one process: CUPTI collector, flush buffer, spin calibration, NVML."""

    def __init__(self, calls: int) -> None:
        import torch

        from kictl.bench.worker import gpu_state
        from kictl.bench.worker.cupti_timer import CuptiCollector
        from kictl.bench.worker.timing import spin_cycles_per_ns

        self.torch = torch
        self.state = gpu_state
        self.calls = calls
        self.collector = CuptiCollector()
        self.collector.start()
        self.flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda:0")
        self.cycles_per_ns = spin_cycles_per_ns("cuda:0") or 1.0
        self.nvml: Any = None
        try:
            self.nvml = gpu_state.Nvml(0)
        except Exception as exc:
            print(f"NVML: {exc}", file=sys.stderr)

    def windows(
        self, fn: Any, spin: int, kernels: dict[str, list[int]] | None = None, idle_s: float = 0.0
    ) -> tuple[Any, list[int]]:
        """``calls`` timed calls of ``fn``; the CUPTI attribution and the events figures.

        ``idle_s``: the device idles that long before each call (as under ncu, which serialises every
        kernel), instead of being kept busy by the spin.
        """
        from kictl.bench.worker.cupti_attribution import attribute
        from kictl.bench.worker.cupti_model import Window

        torch, collector = self.torch, self.collector
        windows: list[Window] = []
        harness: list[Window] = []
        event_ns: list[int] = []
        for _ in range(self.calls):
            own = collector.now()
            self.state.reset_persisting_l2()
            self.flush.zero_()
            torch.cuda.synchronize()
            if idle_s:
                time.sleep(idle_s)
            begin = collector.now()
            harness.append(Window(own, begin))
            if spin:
                torch.cuda._sleep(int(spin * self.cycles_per_ns))
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            torch.cuda.synchronize()
            windows.append(Window(begin, collector.now(), harness_spin_ns=spin))
            event_ns.append(round(start.elapsed_time(stop) * 1e6))
        drained = collector.drain()
        if kernels is not None:  # each kernel's own duration, by name, inside the calls' windows
            for activity in drained:
                inside = any(w.begin_ns <= activity.start_ns <= w.end_ns for w in windows)
                if inside and activity.kind == "kernel" and "spin_kernel" not in activity.name:
                    kernels.setdefault(kernel_key(activity.name), []).append(activity.duration_ns)
        return attribute(drained, windows, harness), event_ns

    def target(self, module: Any, args: list[Any]) -> dict[str, Any]:
        torch = self.torch

        def call() -> Any:
            return module.run(*args)

        host_ns = []
        for _ in range(10):
            torch.cuda.synchronize()
            begin = time.perf_counter_ns()
            call()
            host_ns.append(time.perf_counter_ns() - begin)
        torch.cuda.synchronize()
        self.collector.drain()
        readings = [self.nvml.read().to_json()] if self.nvml else []
        # As kictl's timer does: spin for twice the host's enqueue time of one call, plus 20 µs.
        spin_ns = min(2_000_000, 2 * int(statistics.median(host_ns)) + 20_000)
        per_kernel: dict[str, list[int]] = {}
        attributed, event_ns = self.windows(call, spin_ns, per_kernel)
        spans = [s for s in attributed.spans if s is not None]
        cupti_ns = sorted(s.duration_ns for s in spans)

        idle_kernels: dict[str, list[int]] = {}
        idle, _ = self.windows(call, 0, idle_kernels, idle_s=0.002)
        idle_ns = [s.duration_ns for s in idle.spans if s is not None]

        side_stream = torch.cuda.Stream()

        def side_call() -> Any:
            side_stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side_stream):
                return module.run(*args)

        side, side_events = self.windows(side_call, spin_ns)
        side_spans = [s for s in side.spans if s is not None]

        graph = torch.cuda.CUDAGraph()
        capture = torch.cuda.Stream()
        capture.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(capture):
            for _ in range(3):
                call()
        torch.cuda.current_stream().wait_stream(capture)
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            call()
        graphed, graph_events = self.windows(graph.replay, spin_ns)
        if self.nvml:
            readings.append(self.nvml.read().to_json())
        return {
            "cuptiMedianNs": _median(cupti_ns),
            "cuptiP10Ns": cupti_ns[len(cupti_ns) // 10] if cupti_ns else None,
            "cuptiP90Ns": cupti_ns[9 * len(cupti_ns) // 10] if cupti_ns else None,
            "cuptiBusyMedianNs": _median([s.busy_ns for s in spans]),
            "kernelsPerCall": sorted({s.kernels for s in spans}),
            "cuptiClean": attributed.clean,
            "escaped": len(attributed.escaped),
            "overran": len(attributed.overran),
            "spinMissing": attributed.spin_missing,
            "spinNs": spin_ns,
            "eventsMedianNs": _median(event_ns),
            "graphEventsMedianNs": _median(graph_events),
            "graphCuptiMedianNs": _median([s.duration_ns for s in graphed.spans if s is not None]),
            "sideStreamCuptiMedianNs": _median([s.duration_ns for s in side_spans]),
            "sideStreamEventsMedianNs": _median(side_events),
            "sideStreamStreams": sorted({s.streams for s in side_spans}),
            "calls": self.calls,
            "perKernelMedianNs": {name: statistics.median(values) for name, values in per_kernel.items()},
            "idleCuptiMedianNs": _median(idle_ns),
            "idlePerKernelMedianNs": {name: statistics.median(values) for name, values in idle_kernels.items()},
            "nvml": readings,
        }


def measure(calls: int) -> dict[str, Any]:
    probe = _Probe(calls)
    results: dict[str, Any] = {"l2ResetWorks": probe.state.reset_persisting_l2(), "targets": {}}
    for definition, label, module, args in _targets():
        name = f"{definition}/{label}"
        results["targets"][name] = probe.target(module, args)
        print(json.dumps({name: results["targets"][name]}), flush=True)
    probe.collector.stop()
    return results


def ncu_calls() -> None:
    import torch

    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda:0")
    for definition, label, module, args in _targets():
        for _ in range(NCU_WARMUP + NCU_CALLS):
            flush.zero_()
            torch.cuda.synchronize()
            module.run(*args)
            torch.cuda.synchronize()
        print(f"ncu-target {definition}/{label}", file=sys.stderr)


def fib_calls(calls: int) -> dict[str, Any]:
    """FlashInfer-Bench's timer (``flashinfer.testing.bench_gpu_time_with_cupti``, cold L2) on every target.

    A process of its own: its CUPTI subscription would replace kictl's.
    """
    from flashinfer.testing import bench_gpu_time_with_cupti

    found: dict[str, Any] = {}
    for definition, label, module, args in _targets():
        times_ms = bench_gpu_time_with_cupti(
            lambda module=module, args=args: module.run(*args),
            dry_run_iters=10,
            repeat_iters=calls,
            cold_l2_cache=True,
        )
        found[f"{definition}/{label}"] = {"fibMedianNs": statistics.median(times_ms) * 1e6, "n": len(times_ms)}
        print(json.dumps({f"{definition}/{label}": found[f"{definition}/{label}"]}), flush=True)
    return found


def kernel_key(name: str) -> str:
    """A kernel's own name, without namespaces or template arguments, from a mangled (CUPTI) or demangled (ncu) name.

    ``_ZN10flashinfer24PrefillWithKVCacheKernelI...`` and ``void flashinfer::PrefillWithKVCacheKernel<...>(...)``
    are both ``PrefillWithKVCacheKernel``.
    """
    if name.startswith("_ZN"):  # Itanium nested name: length-prefixed parts until the template args (I) or the end (E)
        parts, at = [], 3
        while at < len(name) and name[at].isdigit():
            digits = at
            while name[at].isdigit():
                at += 1
            size = int(name[digits:at])
            parts.append(name[at : at + size])
            at += size
        return parts[-1] if parts else name[:70]
    head = name.replace("<unnamed>::", "").split("(")[0].split("<")[0].strip()
    return head.split()[-1].split("::")[-1] if head else name[:70]


def _ns(row: dict[str, str]) -> float:
    """One ncu CSV row's metric value in nanoseconds."""
    value = float(row["Metric Value"].replace(",", ""))
    unit = row.get("Metric Unit", "ns")
    return value * {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}.get(unit, 1.0)


def parse_ncu_kernels(text: str) -> dict[str, dict[str, list[float]]]:
    """Per target, each kernel's gpu__time_duration (ns) by name, over the calls (the flush left out)."""
    start = text.find('"ID"')
    rows = list(csv.DictReader(io.StringIO(text[start:]))) if start >= 0 else []
    calls: list[list[tuple[str, float]]] = []
    current: list[tuple[str, float]] | None = None
    for row in sorted(rows, key=lambda r: int(r["ID"])):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = row["Kernel Name"]
        if "FillFunctor<unsigned char>" in name:
            if current is not None:
                calls.append(current)
            current = []
        elif current is not None:
            current.append((kernel_key(name), _ns(row)))
    if current is not None:
        calls.append(current)
    found: dict[str, dict[str, list[float]]] = {}
    block = NCU_WARMUP + NCU_CALLS
    for index, target in enumerate(f"{d}/{w}" for (d, w) in TARGETS):
        for call in calls[index * block + NCU_WARMUP : (index + 1) * block]:
            for name, duration in call:
                found.setdefault(target, {}).setdefault(name, []).append(duration)
    return found


def _same_kernel(profiled: dict[str, list[float]], name: str) -> list[float] | None:
    """ncu's durations of the kernel CUPTI calls ``name`` (keys may be cut short: a prefix match either way)."""
    key = kernel_key(name)
    for other, values in profiled.items():
        if other.startswith(key) or key.startswith(other):
            return values
    return None


def per_kernel_table(folder: Path) -> str:
    """Each kernel's median under ncu and under CUPTI, side by side (what the per-call gap is made of)."""
    measured = json.loads((folder / "timers.json").read_text())["targets"]
    ncu = parse_ncu_kernels((folder / "ncu.csv").read_text())
    none_path = folder / "ncu_none.csv"
    ncu_none = parse_ncu_kernels(none_path.read_text()) if none_path.exists() else {}
    lines = [
        "| workload | kernel | ncu, cache all | ncu, cache none | CUPTI (spin before) | CUPTI (idle before) |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for target, row in measured.items():
        idle = row.get("idlePerKernelMedianNs") or {}
        for name, cupti in sorted((row.get("perKernelMedianNs") or {}).items()):
            full, none = _same_kernel(ncu.get(target, {}), name), _same_kernel(ncu_none.get(target, {}), name)
            lines.append(
                f"| {target} | `{name[:48]}` | {_us(statistics.median(full) if full else None)} "
                f"| {_us(statistics.median(none) if none else None)} | {_us(cupti)} | {_us(idle.get(name))} |"
            )
    return "\n".join(lines)


def parse_ncu(text: str) -> dict[str, list[float]]:
    """Per target, the per-call sums of gpu__time_duration (ns), split on the flush kernels."""
    start = text.find('"ID"')
    rows = list(csv.DictReader(io.StringIO(text[start:]))) if start >= 0 else []
    kernels: list[tuple[int, str, float]] = []
    for row in rows:
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        kernels.append((int(row["ID"]), row["Kernel Name"], _ns(row)))
    kernels.sort()
    calls: list[float] = []
    current: float | None = None
    for _, name, duration in kernels:
        if "FillFunctor<unsigned char>" in name:  # the 256 MiB flush: one per call
            if current is not None:
                calls.append(current)
            current = 0.0
        elif current is not None:
            current += duration
    if current is not None:
        calls.append(current)
    per_target: dict[str, list[float]] = {}
    names = [f"{d}/{w}" for (d, w) in TARGETS]
    block = NCU_WARMUP + NCU_CALLS
    for index, name in enumerate(names):
        chunk = calls[index * block : (index + 1) * block]
        if chunk:
            per_target[name] = chunk[NCU_WARMUP:]
    return per_target


def _us(value: float | None) -> str:
    return f"{value / 1000:.2f} µs" if value else "—"


def _within(value: float | None, reference: float | None) -> str:
    """``value − reference``, marked ✗ outside the aim (3% or 0.3 µs, whichever is larger)."""
    if not value or not reference:
        return "—"
    gap = value - reference
    mark = "" if abs(gap) <= max(0.03 * reference, 300.0) else " ✗"
    return f"{gap / 1000:+.2f} µs ({gap / reference * 100:+.1f}%){mark}"


def compare(folder: Path) -> str:
    """The per-call table: ncu (cache control all, and none if ``ncu_none.csv`` is there) against the timers."""
    measured = json.loads((folder / "timers.json").read_text())["targets"]
    ncu = parse_ncu((folder / "ncu.csv").read_text()) if (folder / "ncu.csv").exists() else {}
    ncu_none = parse_ncu((folder / "ncu_none.csv").read_text()) if (folder / "ncu_none.csv").exists() else {}
    fib = json.loads((folder / "fib.json").read_text()) if (folder / "fib.json").exists() else {}
    lines = [
        "| workload | ncu, cache all | ncu, cache none | CUPTI (kictl) | CUPTI − ncu all | CUPTI − ncu none "
        "| CUPTI, idle before | idle − ncu all | events | graph | FlashInfer-Bench timer |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, row in measured.items():
        full = statistics.median(ncu[name]) if ncu.get(name) else None
        none = statistics.median(ncu_none[name]) if ncu_none.get(name) else None
        cupti, idle = row["cuptiMedianNs"], row.get("idleCuptiMedianNs")
        lines.append(
            f"| {name} | {_us(full)} | {_us(none)} | {_us(cupti)} | {_within(cupti, full)} | {_within(cupti, none)} "
            f"| {_us(idle)} | {_within(idle, full)} | {_us(row['eventsMedianNs'])} | {_us(row['graphEventsMedianNs'])} "
            f"| {_us(fib.get(name, {}).get('fibMedianNs'))} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--ncu", action="store_true")
    parser.add_argument("--compare", type=Path)
    parser.add_argument("--fib", action="store_true", help="FlashInfer-Bench's timer, to --out/fib.json")
    options = parser.parse_args()
    if options.compare:
        print(compare(options.compare))
        print()
        print(per_kernel_table(options.compare))
        return 0
    if options.ncu:
        ncu_calls()
        return 0
    if options.fib:
        found = fib_calls(options.calls)
        if options.out:
            options.out.mkdir(parents=True, exist_ok=True)
            (options.out / "fib.json").write_text(json.dumps(found, indent=1))
        return 0
    results = measure(options.calls)
    if options.out:
        options.out.mkdir(parents=True, exist_ok=True)
        (options.out / "timers.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
