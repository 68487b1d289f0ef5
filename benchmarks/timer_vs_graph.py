#!/usr/bin/env python
"""kictl bench's attention suite on one GPU, and a check of its timer (issue 4).

Claim (README.md "Performance"; RESULTS.md "Timer truth: `kictl bench` against an independent graph-replay
figure"): kictl bench's timer reads 0.96-1.13x an independent CUDA-graph replay figure in the default mode and
0.98-1.02x with `--cuda-graph` (aim: within 5%). Machine and command: the H200, `bash benchmarks/device.sh
timer_vs_graph.py --phase timer --repeats 3 --graph-repeats 3`.

Run from the repository root on the GPU machine, in one call, after
``flashinfer-python`` and ``apache-tvm-ffi`` are installed::

    python benchmarks/timer_vs_graph.py --out "$OUT"

1. Suite: ``kictl bench`` on every workload of the three bundled attention
   definitions with the FlashInfer wrapper, the torch implementation and the
   reference (default protocol: CUDA events, 10 warm-up, 100 x 3 timed calls,
   L2 flush, plan() outside the timed region), records to ``--out``.
2. Independent figure, in this process: for three target workloads
   (ps1 ``q154_kv154``, ps64 ``q1117_p1117``, decode ``b16x_kv1024``) a bare
   FlashInfer wrapper is planned on the same inputs, one ``wrapper.run`` is
   captured in a CUDA graph, and 200 replays are timed with CUDA events, each
   after a 256 MB L2 flush; also the naive figure (flush, synchronize, events
   around the Python call) that a launch-latency-bound harness reports.
3. Repeats: two more ``kictl bench`` runs of the FlashInfer wrapper on each
   target; with the suite's run that makes three medians, whose spread is
   reported.
4. If time is left: ``--cuda-graph`` and ``--time-setup`` runs on the targets.

Everything goes to ``--out`` in at most five files: ``records.json`` (every
record, one manifest, readable by ``kictl add``), ``results.json`` (all
numbers, commands, versions), ``summary.txt`` (the table printed last),
``suite.log`` (kictl's stderr).  ``--smoke`` runs the same orchestration on the
CPU with the smallest workloads and no FlashInfer (to test this script
without a GPU).
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

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TARGETS = {
    "gqa_paged_prefill_causal_h24_kv4_d128_ps1": "q154_kv154",
    "gqa_paged_prefill_causal_h20_kv4_d128_ps64": "q1117_p1117",
    "gqa_paged_decode_h32_kv8_d128_ps1": "b16x_kv1024",
}
SMOKE_WORKLOADS = {
    "gqa_paged_prefill_causal_h24_kv4_d128_ps1": "q1_kv1",
    "gqa_paged_prefill_causal_h20_kv4_d128_ps64": "q16_p1",
    "gqa_paged_decode_h32_kv8_d128_ps1": "b1_kv73",
}
TORCH_IMPL = {
    "gqa_paged_prefill_causal_h24_kv4_d128_ps1": "torch_sdpa",
    "gqa_paged_prefill_causal_h20_kv4_d128_ps64": "torch_sdpa",
    "gqa_paged_decode_h32_kv8_d128_ps1": "torch_batched",
}
SHORT = {
    "gqa_paged_prefill_causal_h24_kv4_d128_ps1": "prefill h24 ps1",
    "gqa_paged_prefill_causal_h20_kv4_d128_ps64": "prefill h20 ps64",
    "gqa_paged_decode_h32_kv8_d128_ps1": "decode h32 ps1",
}
FLUSH_BYTES = 256 * 1024 * 1024
INDEPENDENT_SAMPLES = 200
STARTED = time.monotonic()


def elapsed() -> float:
    return time.monotonic() - STARTED


def log(message: str) -> None:
    print(f"[{elapsed():6.1f}s] {message}", flush=True)


class Suite:
    def __init__(self, out: Path, smoke: bool, budget: float) -> None:
        self.out = out
        self.smoke = smoke
        self.budget = budget
        self.scratch = Path(tempfile.mkdtemp(prefix="kictl-suite-"))
        self.log_path = out / "suite.log"
        self.results: dict[str, Any] = {
            "invocations": [],
            "targets": {},
            "started": time.strftime("%FT%TZ", time.gmtime()),
        }
        self.manifests: list[Path] = []
        self.record_count = 0

    # ------------------------------------------------------------------ kictl bench

    def bench(
        self, definition: str, impls: list[str], extra: list[str], label: str, timeout: float = 900
    ) -> list[dict[str, Any]]:
        """One ``kictl bench`` invocation; returns its --json rows."""
        folder = self.scratch / f"{len(self.results['invocations']):02d}-{label}"
        command = [
            sys.executable,
            "-m",
            "kictl",
            "bench",
            definition,
            *[arg for impl in impls for arg in ("--impl", str(Path("implementations") / definition / impl))],
            "--device",
            "cpu" if self.smoke else "cuda",
            "--out",
            str(folder),
            "--json",
            "--timeout",
            str(int(timeout)),
            *extra,
        ]
        log(f"{label}: {' '.join(command[2:])}")
        begun = time.monotonic()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        seconds = time.monotonic() - begun
        with self.log_path.open("a", encoding="utf-8") as handle:
            handle.write(f"\n$ {' '.join(command[2:])}\n(exit {done.returncode}, {seconds:.1f} s)\n{done.stderr}\n")
        try:
            rows = json.loads(done.stdout) if done.stdout.strip() else []
        except json.JSONDecodeError:
            rows = []
        self.manifests.extend(sorted(folder.glob("*.json")))
        self.save()
        self.results["invocations"].append(
            {
                "label": label,
                "command": command[2:],
                "exit": done.returncode,
                "seconds": round(seconds, 1),
                "runs": rows,
            }
        )
        for row in rows:
            log(f"  {row['implementation']:<28} {row['workload']:<16} {row['status']:<20} {_us(row['latencyNs'])}")
        if not rows:
            log(f"  no runs; exit {done.returncode}; stderr tail: {done.stderr.strip().splitlines()[-3:]}")
        return rows

    # ------------------------------------------------------------------ phases

    def suite(self, flashinfer: bool) -> None:
        for definition in TARGETS:
            impls = ["reference", TORCH_IMPL[definition]] + (["flashinfer_wrapper"] if flashinfer else [])
            extra = ["--rounds", "2"]
            if self.smoke:
                extra += [
                    "--workload",
                    SMOKE_WORKLOADS[definition],
                    "--warmup",
                    "0",
                    "--iterations",
                    "2",
                    "--rounds",
                    "1",
                ]
            self.bench(definition, impls, extra, f"suite-{definition}")

    def repeats(self, count: int) -> None:
        for repeat in range(count):
            for definition, workload in TARGETS.items():
                if elapsed() > self.budget:
                    log(f"time budget reached; repeat {repeat + 2} of {definition} skipped")
                    return
                extra = ["--workload", workload, "--rounds", "1"]
                self.bench(definition, ["flashinfer_wrapper"], extra, f"repeat{repeat + 2}-{definition}")

    def graph_repeats(self, count: int) -> None:
        """``count`` runs of each target with ``--cuda-graph`` (graph replays timed), for their spread."""
        for repeat in range(count):
            for definition, workload in TARGETS.items():
                if elapsed() > self.budget:
                    log(f"time budget reached; --cuda-graph repeat {repeat + 1} of {definition} skipped")
                    return
                extra = ["--workload", workload, "--rounds", "1", "--cuda-graph"]
                self.bench(definition, ["flashinfer_wrapper"], extra, f"cuda-graph{repeat + 1}-{definition}")

    def variants(self) -> None:
        for flag in ("--cuda-graph", "--time-setup"):
            for definition, workload in TARGETS.items():
                if elapsed() > self.budget:
                    log(f"time budget reached; {flag} on {definition} skipped")
                    return
                self.bench(
                    definition,
                    ["flashinfer_wrapper"],
                    ["--workload", workload, "--rounds", "1", flag],
                    f"{flag.strip('-')}-{definition}",
                )

    # ------------------------------------------------------------------ the independent figure

    def independent(self) -> None:
        import torch

        from kictl.bench.judge.inputs import materialize, plan_inputs
        from kictl.bench.judge.session import select_workloads
        from kictl.definitions import signature
        from kictl.store.registry import Registry

        registry = Registry(ROOT)
        for definition_name, label in TARGETS.items():
            definition = registry.resolve(definition_name, ["Definition"])
            spec = definition.model.spec
            workload = select_workloads(registry, definition, [label])[0]
            order = signature(spec).inputs
            args = materialize(plan_inputs(spec, workload, order, registry.read_blob, offset=0), "cuda:0")
            named = dict(zip(order, args, strict=True))
            constants = {name: axis.value for name, axis in spec.axes.items() if axis.type == "const"}
            try:
                found = _measure_wrapper(definition_name, constants, named)
            except Exception as exc:  # report and go on: the table says what is missing
                found = {"error": f"{type(exc).__name__}: {exc}"}
            self.results["targets"].setdefault(definition_name, {})["independent"] = found
            log(
                f"independent {definition_name} {label}: {found.get('graphMedianNs')} ns (graph), "
                f"{found.get('naiveMedianNs')} ns (naive events)"
            )
            self.save()
            del args, named
            torch.cuda.empty_cache()

    # ------------------------------------------------------------------ report

    def report(self) -> str:
        lines = []
        for definition, label in TARGETS.items():
            target = self.results["targets"].setdefault(definition, {})
            medians = []
            for invocation in self.results["invocations"]:
                if invocation["label"].startswith(("suite-", "repeat")) and definition in invocation["label"]:
                    for row in invocation["runs"]:
                        if row["implementation"].startswith("flashinfer_wrapper") and row["workload"] == label:
                            medians.append(row["latencyNs"])
            medians = [m for m in medians if m]
            target["kictlMediansNs"] = medians
            independent = target.get("independent", {}).get("graphMedianNs")
            if medians:
                centre = statistics.median(medians)
                target["spread"] = (max(medians) - min(medians)) / centre
                if independent:
                    target["ratio"] = [m / independent for m in medians]
            for flag in ("cuda-graph", "time-setup"):
                found = [
                    row["latencyNs"]
                    for invocation in self.results["invocations"]
                    if invocation["label"].startswith(flag) and invocation["label"].endswith(f"-{definition}")
                    for row in invocation["runs"]
                    if row["latencyNs"]
                ]
                if found:
                    target[flag] = found
                    if flag == "cuda-graph":
                        target["cudaGraphSpread"] = (max(found) - min(found)) / statistics.median(found)
                        if independent:
                            target["cudaGraphRatio"] = [m / independent for m in found]
        lines.append(
            "Timer check: FlashInfer wrapper, kictl bench median vs independent CUDA-graph replay (L2 flushed)"
        )
        header = (
            f"{'workload':<34} {'kictl medians (us)':<26} {'graph (us)':>10} {'naive (us)':>10} "
            f"{'ratio':>12} {'spread':>7}"
        )
        lines.append(header)
        lines.append("-" * len(header))
        for definition, label in TARGETS.items():
            target = self.results["targets"][definition]
            medians = " ".join(f"{m / 1e3:.2f}" for m in target.get("kictlMediansNs", [])) or "-"
            independent = target.get("independent", {})
            ratios = target.get("ratio")
            ratio = f"{min(ratios):.3f}-{max(ratios):.3f}" if ratios else "-"
            spread = f"{100 * target['spread']:.1f}%" if "spread" in target else "-"
            lines.append(
                f"{SHORT[definition] + ' ' + label:<34} {medians:<26} "
                f"{_us(independent.get('graphMedianNs')):>10} {_us(independent.get('naiveMedianNs')):>10} "
                f"{ratio:>12} {spread:>7}"
            )
        lines.append("")
        lines.append("All runs (median; status)")
        for invocation in self.results["invocations"]:
            if not invocation["label"].startswith("suite-"):
                continue
            for row in invocation["runs"]:
                speedup = f"{row['speedupVsReference']:.1f}x" if row.get("speedupVsReference") else "-"
                lines.append(
                    f"  {row['implementation'][:26]:<26} {row['workload']:<18} {row['status']:<20} "
                    f"{_us(row['latencyNs']):>10} {speedup:>8}"
                )
        for definition, label in TARGETS.items():
            target = self.results["targets"][definition]
            for flag in ("cuda-graph", "time-setup"):
                if flag in target:
                    extra = ""
                    if flag == "cuda-graph" and "cudaGraphRatio" in target:
                        ratios = target["cudaGraphRatio"]
                        spread = 100 * target["cudaGraphSpread"]
                        extra = f"  ratio {min(ratios):.3f}-{max(ratios):.3f} spread {spread:.1f}%"
                    lines.append(f"  {flag:<11} {label:<16} {' '.join(_us(v) for v in target[flag])}{extra}")
        lines.append(f"elapsed {elapsed():.0f} s")
        return "\n".join(lines)

    def save(self) -> str:
        """Write records.json, results.json and summary.txt as they stand (a killed run keeps them)."""
        from kictl import canon
        from kictl.records import record_from_value, records_in_document

        merged: dict[str, Any] = {}
        for manifest in self.manifests:
            value = canon.parse_json(manifest.read_bytes(), source=str(manifest))
            for source, item in records_in_document(value, source=str(manifest)):
                record = record_from_value(item, source=source)
                merged.setdefault(f"{record.kind}/{canon.digest_hex(record.digest)}", record.raw)
        (self.out / "records.json").write_bytes(canon.pretty_bytes(merged))
        summary = self.report()
        self.results["finished"] = time.strftime("%FT%TZ", time.gmtime())
        self.results["elapsedSeconds"] = round(elapsed(), 1)
        (self.out / "results.json").write_text(json.dumps(self.results, indent=1) + "\n", encoding="utf-8")
        (self.out / "summary.txt").write_text(summary + "\n", encoding="utf-8")
        self.record_count = len(merged)
        return summary

    def finish(self) -> None:
        summary = self.save()
        print(f"\n{self.record_count} records in {self.out / 'records.json'}\n")
        print(summary)


def _us(value: float | None) -> str:
    return "-" if not value else f"{value / 1e3:.2f}"


def _measure_wrapper(definition: str, constants: dict[str, int], named: dict[str, Any]) -> dict[str, Any]:
    """Bare FlashInfer wrapper: CUDA-graph replays and naive events, each after a 256 MB flush."""
    import flashinfer
    import torch

    device = named["q"].device
    workspace = torch.empty(128 * 1024 * 1024, dtype=torch.uint8, device=device)
    q, k, v = named["q"], named["k_cache"], named["v_cache"]
    heads = (constants["num_qo_heads"], constants["num_kv_heads"])
    page = constants["page_size"]
    if "prefill" in definition:
        wrapper = flashinfer.BatchPrefillWithPagedKVCacheWrapper(workspace, kv_layout="NHD")
        batch = named["qo_indptr"].shape[0] - 1
        last = (
            named["kv_last_page_len"][:batch]
            if "kv_last_page_len" in named
            else torch.ones(batch, dtype=torch.int32, device=device)
        )
        wrapper.plan(
            named["qo_indptr"],
            named["kv_indptr"],
            named["kv_indices"],
            last,
            heads[0],
            heads[1],
            128,
            page,
            causal=True,
            sm_scale=float(named["sm_scale"]),
            q_data_type=q.dtype,
            kv_data_type=k.dtype,
        )
    else:
        wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, kv_layout="NHD")
        batch = named["kv_indptr"].shape[0] - 1
        last = torch.ones(batch, dtype=torch.int32, device=device)
        wrapper.plan(
            named["kv_indptr"],
            named["kv_indices"],
            last,
            heads[0],
            heads[1],
            128,
            page,
            pos_encoding_mode="NONE",
            sm_scale=float(named["sm_scale"]),
            q_data_type=q.dtype,
            kv_data_type=k.dtype,
        )

    def call() -> Any:
        return wrapper.run(q, (k, v), return_lse=True)

    for _ in range(10):
        call()
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=device)
    for _ in range(10):
        flush.zero_()
        graph.replay()
    torch.cuda.synchronize()

    def timed(replay: bool) -> list[int]:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(INDEPENDENT_SAMPLES)]
        stops = [torch.cuda.Event(enable_timing=True) for _ in range(INDEPENDENT_SAMPLES)]
        for index in range(INDEPENDENT_SAMPLES):
            flush.zero_()
            if replay:
                starts[index].record()
                graph.replay()
            else:  # what a harness that synchronizes before each call measures
                torch.cuda.synchronize()
                starts[index].record()
                call()
            stops[index].record()
        torch.cuda.synchronize()
        return [round(a.elapsed_time(b) * 1e6) for a, b in zip(starts, stops, strict=True)]

    graph_ns = timed(True)
    naive_ns = timed(False)
    graph_again = timed(True)
    return {
        "graphMedianNs": statistics.median(graph_ns),
        "graphMedianAgainNs": statistics.median(graph_again),
        "graphP10Ns": sorted(graph_ns)[len(graph_ns) // 10],
        "graphP90Ns": sorted(graph_ns)[9 * len(graph_ns) // 10],
        "naiveMedianNs": statistics.median(naive_ns),
        "naiveP90Ns": sorted(naive_ns)[9 * len(naive_ns) // 10],
        "samples": INDEPENDENT_SAMPLES,
        "flushBytes": FLUSH_BYTES,
    }


def preflight(smoke: bool) -> dict[str, Any]:
    """What is installed and which GPU this is; raises SystemExit when kictl cannot run."""
    facts: dict[str, Any] = {"python": sys.version.split()[0]}
    missing = []
    for module in ("torch", "typer", "pydantic", "rfc8785", "kictl.cli"):
        try:
            __import__(module)
        except ImportError as exc:
            missing.append(f"{module} ({exc})")
    if missing:
        raise SystemExit(f"cannot run kictl here; missing: {', '.join(missing)}")
    import torch

    facts["torch"] = torch.__version__
    facts["cuda"] = torch.version.cuda
    if not smoke:
        if not torch.cuda.is_available():
            raise SystemExit("no CUDA GPU visible")
        props = torch.cuda.get_device_properties(0)
        facts["gpu"] = props.name
        facts["smCount"] = props.multi_processor_count
        facts["l2Bytes"] = getattr(props, "L2_cache_size", None)
        try:
            facts["nvidiaSmi"] = subprocess.run(
                [
                    "nvidia-smi",
                    "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu",
                    "--format=csv,noheader",
                ],
                capture_output=True,
                text=True,
                timeout=20,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            facts["nvidiaSmi"] = None
    try:
        import flashinfer

        facts["flashinfer"] = getattr(flashinfer, "__version__", "?")
    except Exception as exc:  # its absence is reported, the suite goes on without it
        facts["flashinfer"] = None
        facts["flashinferError"] = f"{type(exc).__name__}: {exc}"
    return facts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "benchmarks/out")))
    parser.add_argument(
        "--budget", type=float, default=450.0, help="seconds after which repeats and variants are no longer started"
    )
    parser.add_argument("--smoke", action="store_true", help="CPU dry run on the smallest workloads, no FlashInfer")
    parser.add_argument(
        "--phase",
        choices=("all", "timer"),
        default="all",
        help="all: the suite, then the timer check; timer: only the timer check (independent figure, repeats)",
    )
    parser.add_argument("--repeats", type=int, default=2, help="extra default-mode runs of each target")
    parser.add_argument("--graph-repeats", type=int, default=0, help="--cuda-graph runs of each target")
    options = parser.parse_args()
    options.out.mkdir(parents=True, exist_ok=True)
    suite = Suite(options.out, options.smoke, options.budget)
    facts = preflight(options.smoke)
    suite.results["machine"] = facts
    log(f"machine: {json.dumps(facts)}")
    flashinfer = facts.get("flashinfer") is not None and not options.smoke
    try:
        if options.phase == "all":
            suite.suite(flashinfer)
        if flashinfer:
            suite.independent()
            suite.repeats(options.repeats)
            suite.graph_repeats(options.graph_repeats)
            if options.phase == "all":
                suite.variants()
    finally:
        suite.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
