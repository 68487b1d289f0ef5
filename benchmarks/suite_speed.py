"""How long a whole ``kictl bench`` suite takes on one device, and where the time goes (issue 16).

Claim (README.md "Performance", docs/bench.md; RESULTS.md "Suite time"): the h24 attention suite (FlashInfer and
the reference, one sandboxed `kictl bench` process) takes 18.7-25.0 s on the H200 and 23.5-25.5 s on the H100,
against an aim of 10x faster than FlashInfer-Bench's harness on the same suite (issue 43). Machine and command: the
H100, `bash benchmarks/device.sh suite_speed.py --repeats 2 --flashinfer-bench`; `--smoke` on any CPU
(tests/bench/test_suite_speed.py runs it).

Runs one definition's suite end to end as a user would, ``python -m kictl
bench DEF --impl ... --device D --out TMP --json --timings``, ``--repeats``
times, and prints one row per run: the process's wall time, the session's
phases as ``kictl bench --timings`` reports them (worker start, imports,
inputs, correctness and setup, warm-up, timed calls, the reference's audit
outputs, records, stopping the workers, writing the manifest), what the
process spent outside them (Python, typer, kictl's own imports), the runs'
statuses, and each implementation's medians per workload (so that a faster
suite can be seen to measure the same thing).

The default is the issue's suite: every workload of
``gqa_paged_prefill_causal_h24_kv4_d128_ps1`` with the definition's
reference and the FlashInfer wrapper, ``--device cuda``, the GPU protocol's
defaults (10 warm-up calls, 3 trials of 100 timed calls, 3 correctness
rounds), sandboxed.  On the lent H200, from the repository root::

    . benchmarks/h200_setup.sh
    FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer \\
        python3 benchmarks/suite_speed.py --repeats 3 --out "$OUT"

Before the runs, the Python packages the workers import (torch, flashinfer,
tvm_ffi, cupti, triton, kictl) get their bytecode compiled where it is
missing (``--no-precompile`` to skip): the sandboxed workers run with
``PYTHONDONTWRITEBYTECODE`` on read-only folders, so a package installed with
``pip --no-compile`` (as ``h200_setup.sh`` does) is compiled from source by
every worker at every start, which is a cold cache of its own, like a cold
JIT cache.  The time it took is printed.

``--flashinfer-bench`` then runs FlashInfer-Bench's own harness on the same suite in the same call, as
many times: the definition, its workloads (the index tensors kictl synthesises from the axes, written as
safetensors) and the FlashInfer wrapper as a solution, in a FlashInfer Trace folder written with kictl's
exporter (``kictl.exporters.flashinfer_trace``), then ``flashinfer-bench run --local DIR --definitions DEF
--solutions SOL`` with its defaults (10 warm-up runs, 50 iterations, 3 trials; it checks against the
definition's reference itself), one process each time; and prints both walls and their ratio, the issue's
aim being kictl at least 10x faster.  A run that traced nothing, or whose reference step failed (its log
gives only ``str(exc)``, empty for a bare ``assert``), is followed by that step replayed workload by workload
(``REFERENCE_STEP``), which prints the exception's type and line.  FlashInfer-Bench 0.1.2 and its safetensors and
docstring-parser are carried as wheels (``benchmarks/carry.sh``).

``--smoke`` runs a small CPU suite instead (rmsnorm_h4096, the reference and
the torch implementation, workloads b1 and b7, the GPU protocol's fixed
counts), which is what the tests run.  ``--kictl-root`` runs another
checkout's kictl (e.g. main, for a before/after table); extra arguments
after ``--`` go to ``kictl bench`` unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kictl.bench.judge.phases import PHASES, parse_phases  # noqa: E402  (a light module: no torch, no pydantic)

SUITE_DEFINITION = "gqa_paged_prefill_causal_h24_kv4_d128_ps1"
SUITE_IMPLS = ("reference", "flashinfer_wrapper")
SMOKE_DEFINITION = "rmsnorm_h4096"
SMOKE_IMPLS = ("reference", "torch_rmsnorm")
SMOKE_ARGS = ("--workload", "b1", "--workload", "b7", "--warmup", "10", "--iterations", "100", "--trials", "3")
#: The phases in the order a session goes through them, then the CLI's own.
PHASE_ORDER = (*PHASES, "write")


PRECOMPILE = ("torch", "flashinfer", "tvm_ffi", "cupti", "triton", "kictl")


def precompile(packages: tuple[str, ...] = PRECOMPILE) -> list[str]:
    """Compile the bytecode of ``packages`` where it is missing (without importing them); one line each."""
    import importlib.util

    lines = []
    for name in packages:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        if not folders:
            lines.append(f"precompile {name}: not installed")
            continue
        writable = [folder for folder in folders if os.access(folder, os.W_OK)]
        if not writable:
            lines.append(f"precompile {name}: {folders[0]} is read-only, left as it is")
            continue
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "compileall", "-q", "-j", "0", *writable],
            capture_output=True,
            text=True,
            check=False,
        )
        # a large package often holds a file or two that no longer compiles (old test data): not an error here
        state = "done" if done.returncode == 0 else f"done, compileall exit {done.returncode}"
        lines.append(f"precompile {name}: {time.perf_counter() - began:.1f} s, {state}")
    return lines


def definition_of(args: argparse.Namespace) -> str:
    return str(args.definition or (SMOKE_DEFINITION if args.smoke else SUITE_DEFINITION))


def bench_command(args: argparse.Namespace, out: Path) -> list[str]:
    definition = definition_of(args)
    impls = args.impl or list(SMOKE_IMPLS if args.smoke else SUITE_IMPLS)
    device = args.device or ("cpu" if args.smoke else "cuda")
    command = [sys.executable, "-m", "kictl", "bench", definition]
    for impl in impls:
        path = ROOT / "implementations" / definition / impl
        command += ["--impl", str(path) if path.exists() else impl]
    command += ["--device", device, "--out", str(out), "--json"]
    if args.smoke:
        command += list(SMOKE_ARGS)
    return command + list(args.bench_args)


def run_once(args: argparse.Namespace, number: int, scratch: Path) -> dict[str, Any]:
    """One ``kictl bench`` process: its wall time, phases, statuses and medians."""
    out = scratch / f"run{number}"
    command = bench_command(args, out)
    root = Path(args.kictl_root).resolve() if args.kictl_root else ROOT
    env = dict(os.environ)
    env["KICTL_TIMINGS"] = "1"  # the phases on stderr (a kictl from before --timings ignores it)
    began = time.perf_counter()
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - began
    try:
        rows: list[dict[str, Any]] = json.loads(done.stdout) if done.stdout.strip() else []
    except json.JSONDecodeError:
        rows = []
    phases = parse_phases(done.stderr)
    if args.out is not None:  # every step's time (the t= lines) and the records, to see where a run's time went
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"run{number}.stderr.txt").write_text(done.stderr, encoding="utf-8")
        if out.is_dir():
            shutil.copytree(out, args.out / f"run{number}", dirs_exist_ok=True)
    return {
        "run": number,
        "exit": done.returncode,
        "wallS": round(wall, 3),
        "phases": phases,
        "outsideS": round(wall - phases["total"], 3) if "total" in phases else None,
        "statuses": sorted({row.get("status", "?") for row in rows}),
        "runs": len(rows),
        "medians": {f"{row['implementation']} {row['workload']}": row.get("latencyNs") for row in rows},
        "stderrTail": done.stderr.strip().splitlines()[-8:],
        "command": command[1:],
    }


def table(results: list[dict[str, Any]]) -> list[str]:
    """The runs as a Markdown table: wall, outside the session, each phase, statuses."""
    seen = {name for result in results for name in result["phases"] if name != "total"}
    names = [name for name in PHASE_ORDER if name in seen] + sorted(seen - set(PHASE_ORDER))
    header = ["run", "exit", "wall s", "outside s", *[f"{name} s" for name in names], "runs", "statuses"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for result in results:
        cells = [
            str(result["run"]),
            str(result["exit"]),
            f"{result['wallS']:.2f}",
            "-" if result["outsideS"] is None else f"{result['outsideS']:.2f}",
            *[f"{result['phases'][name]:.2f}" if name in result["phases"] else "-" for name in names],
            str(result["runs"]),
            ",".join(result["statuses"]) or "-",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if len(results) > 1:
        walls = [result["wallS"] for result in results]
        lines.append(f"\nwall: median {statistics.median(walls):.2f} s, min {min(walls):.2f} s, max {max(walls):.2f} s")
    return lines


def medians_table(results: list[dict[str, Any]]) -> list[str]:
    """Each (implementation, workload)'s primary statistic in every run, in µs."""
    keys = sorted({key for result in results for key in result["medians"]})
    if not keys:
        return []
    lines = ["| implementation workload | " + " | ".join(f"run {r['run']} µs" for r in results) + " |"]
    lines.append("|" + "---|" * (len(results) + 1))
    for key in keys:
        cells = []
        for result in results:
            value = result["medians"].get(key)
            cells.append("-" if value is None else f"{value / 1000:.2f}")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return lines


def report(results: list[dict[str, Any]], prepared: list[str], out: Path | None) -> list[str]:
    """The tables of the runs so far; written to ``out`` (suite_speed.json, suite_speed.md) when given."""
    lines = [f"`{' '.join(results[0]['command'])}`", "", *table(results), "", *medians_table(results)]
    if prepared:
        lines += ["", *prepared]
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "suite_speed.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        (out / "suite_speed.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lines


def flashinfer_bench_folder(definition_name: str, folder: Path) -> str:
    """A FlashInfer Trace folder for FlashInfer-Bench's harness: ``definition_name``, every workload of it in the
    registry, and its FlashInfer wrapper as a solution; the solution's name."""
    from kictl.bench.judge.implementation import load_implementation
    from kictl.exporters import flashinfer_trace as fi
    from kictl.records import DefinitionSpec, WorkloadSpec
    from kictl.store.registry import Registry

    registry = Registry(ROOT)
    definition = registry.resolve(definition_name, ["Definition"])
    spec = definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    wrapper = ROOT / "implementations" / definition_name / "flashinfer_wrapper"
    implementation = load_implementation(str(wrapper), definition, registry).record
    op_type = fi.op_type_for_family(spec.family)
    solution = fi.solution_document(implementation, spec.name, kictl_measured=True, hardware="NVIDIA_H100")
    files = {
        f"definitions/{op_type}/{spec.name}.json": fi._json(fi.definition_document(definition)),
        f"solutions/{op_type}/{spec.name}/{solution['name']}.json": fi._json(solution),
    }
    lines = []
    for workload in registry.iter_records(["Workload"]):
        workload_spec = workload.model.spec
        assert isinstance(workload_spec, WorkloadSpec)
        if workload_spec.definition_digest != definition.digest:
            continue
        inputs, blobs = fi.workload_inputs(registry, definition, workload, f"blob/workloads/{op_type}/{spec.name}")
        files.update(blobs)
        document = {"uuid": fi.workload_uuid(workload, inputs), "axes": dict(workload_spec.axes), "inputs": inputs}
        lines.append({"definition": spec.name, "workload": document, "solution": None, "evaluation": None})
    files[f"workloads/{op_type}/{spec.name}.jsonl"] = fi._jsonl(lines)
    fi.write_tree(folder, files)
    return str(solution["name"])


#: FlashInfer-Bench's reference step on each workload of a trace folder, as its runner takes it (0.1.2's
#: ``DefaultEvaluator.build_baseline``: build the definition's reference, load the safetensors inputs, draw the rest
#: with ``gen_inputs``, call ``run(*inputs)`` once), with what its runner's log line leaves out ("failed while
#: running reference ...: " and ``str(exc)``, empty for a bare ``assert``): the exception's type and where it rose.
REFERENCE_STEP = """
import sys, traceback
import torch
from flashinfer_bench.bench.evaluators.utils import normalize_result
from flashinfer_bench.bench.utils import gen_inputs, load_safetensors
from flashinfer_bench.compile import BuilderRegistry
from flashinfer_bench.data import TraceSet

def why(exc):
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{type(exc).__name__}: {exc} ({frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}: {frame.line})"

device = "cuda:0" if torch.cuda.is_available() else "cpu"
trace_set = TraceSet.from_path(sys.argv[1])
definition = trace_set.definitions[sys.argv[2]]
try:
    reference = BuilderRegistry.get_instance().build_reference(definition)
except Exception as exc:
    raise SystemExit(f"reference step: the reference does not build: {why(exc)}")
for trace in trace_set.workloads.get(definition.name, []):
    workload = trace.workload
    axes = ",".join(f"{k}={v}" for k, v in sorted(workload.axes.items()))
    try:
        blobs = load_safetensors(definition, workload, trace_set.root)
        inputs = gen_inputs(definition, workload, device=device, safe_tensors=blobs)
        with torch.no_grad():
            normalize_result(definition, reference(*inputs), device)
        if device != "cpu":
            torch.cuda.synchronize(device)
        print(f"reference step {axes}: ok on {device}", flush=True)
    except Exception as exc:
        print(f"reference step {axes}: {why(exc)} on {device}", flush=True)
"""


def reference_step(folder: Path, definition_name: str, scratch: Path) -> list[str]:
    """``REFERENCE_STEP`` in a process of its own: one line a workload (after a run of FlashInfer-Bench's harness
    that traced nothing, to say why; its time is no part of the run's wall)."""
    command = [sys.executable, "-c", REFERENCE_STEP, str(folder), definition_name]
    try:
        done = subprocess.run(command, cwd=scratch, capture_output=True, text=True, check=False, timeout=300)
    except subprocess.TimeoutExpired:
        return ["reference step: no answer in 300 s"]
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0:
        lines += (done.stderr.strip().splitlines() or [f"reference step: exit {done.returncode}"])[-3:]
    return lines


def run_flashinfer_bench(definition_name: str, number: int, scratch: Path, out: Path | None) -> dict[str, Any]:
    """One process of FlashInfer-Bench's harness on the suite: its wall time, and each workload's evaluation."""
    folder = scratch / f"fib{number}"
    solution = flashinfer_bench_folder(definition_name, folder)
    command = [
        sys.executable, "-c", "from flashinfer_bench.cli.main import cli; cli()", "run", "--local", str(folder),
        "--definitions", definition_name, "--solutions", solution,
    ]  # fmt: skip
    began = time.perf_counter()
    done = subprocess.run(command, cwd=scratch, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - began
    evaluations: dict[str, str] = {}
    for path in sorted(folder.glob("traces/**/*.jsonl")):
        for line in path.read_text().splitlines():
            trace = json.loads(line)
            evaluation = trace.get("evaluation") or {}
            latency = (evaluation.get("performance") or {}).get("latency_ms")
            axes = ",".join(f"{k}={v}" for k, v in sorted(trace["workload"]["axes"].items()))
            status = str(evaluation.get("status"))
            if latency is None:  # the last line of its log says why (a traceback's ends with the exception)
                why = (str(evaluation.get("log") or "").strip().splitlines() or [""])[-1]
                status = f"{status}: {why[:300]}" if why else status
            evaluations[axes] = status if latency is None else f"{status} {latency * 1000:.2f} µs"
    # its runner logs a failed reference step as "failed while running reference ...: str(exc)", often empty
    failed_reference = "failed while running reference" in done.stdout + done.stderr
    diagnosis = reference_step(folder, definition_name, scratch) if failed_reference or not evaluations else []
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"fib{number}.stderr.txt").write_text(done.stdout + done.stderr, encoding="utf-8")
    return {"run": number, "exit": done.returncode, "wallS": round(wall, 3), "evaluations": evaluations,
            "tail": (done.stdout + done.stderr).strip().splitlines()[-8:], "referenceStep": diagnosis}  # fmt: skip


def comparison(kictl_runs: list[dict[str, Any]], fib_runs: list[dict[str, Any]]) -> list[str]:
    """Both harnesses' walls on the suite, and how many times faster kictl's median is."""
    mine = statistics.median(run["wallS"] for run in kictl_runs)
    theirs = statistics.median(run["wallS"] for run in fib_runs)
    lines = ["| harness | walls s | median s |", "|---|---|---:|"]
    for name, runs, middle in (("kictl bench", kictl_runs, mine), ("flashinfer-bench run", fib_runs, theirs)):
        walls = ", ".join(f"{run['wallS']:.1f}" for run in runs)
        lines.append(f"| {name} | {walls} | {middle:.1f} |")
    failed = [run for run in fib_runs if run["exit"] != 0 or not run["evaluations"]]
    if failed:  # a harness that stopped early is no time to compare with
        lines.append(f"\nno ratio: {len(failed)} of {len(fib_runs)} flashinfer-bench run(s) failed or traced nothing")
    else:
        lines.append(f"\nkictl is {theirs / mine:.1f}x faster (medians; the aim is 10x)")
    for run in fib_runs:
        lines.append(f"flashinfer-bench run {run['run']}: exit {run['exit']}, {len(run['evaluations'])} traces")
        lines += [f"  {axes}: {text}" for axes, text in sorted(run["evaluations"].items())]
        lines += [f"  {line}" for line in run.get("referenceStep", [])]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="kictl bench processes, one after another")
    parser.add_argument("--smoke", action="store_true", help="a small CPU suite (rmsnorm b1, b7) instead")
    parser.add_argument("--definition", help=f"default {SUITE_DEFINITION} ({SMOKE_DEFINITION} with --smoke)")
    parser.add_argument("--impl", action="append", help="implementation folder name or path (repeatable)")
    parser.add_argument("--device", help="default cuda (cpu with --smoke)")
    parser.add_argument("--kictl-root", help="run the kictl of this checkout (default: this one)")
    parser.add_argument("--out", type=Path, help="write suite_speed.json and suite_speed.md here")
    parser.add_argument(
        "--no-precompile", action="store_true", help="leave the packages' bytecode as it is (a cold cache)"
    )
    parser.add_argument(
        "--flashinfer-bench", action="store_true", help="then FlashInfer-Bench's harness on the suite, as many times"
    )
    parser.add_argument("bench_args", nargs="*", help="after --: more kictl bench arguments")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.flashinfer_bench and not (ROOT / "implementations" / definition_of(args) / "flashinfer_wrapper").is_dir():
        parser.error(f"--flashinfer-bench needs implementations/{definition_of(args)}/flashinfer_wrapper")
    results = []
    prepared = [] if args.no_precompile else precompile()
    for line in prepared:
        print(line, file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="kictl-suite-speed-") as scratch:
        for number in range(1, args.repeats + 1):
            result = run_once(args, number, Path(scratch))
            results.append(result)
            print(
                f"run {number}: exit {result['exit']}, {result['wallS']:.2f} s, {result['runs']} runs "
                f"({','.join(result['statuses']) or 'none'})",
                file=sys.stderr,
                flush=True,
            )
            if result["exit"] not in (0, 1):
                print("\n".join(result["stderrTail"]), file=sys.stderr)
            # written after every run, so that a time box that ends the script early keeps what finished
            lines = report(results, prepared, args.out)
        if args.flashinfer_bench:
            theirs = []
            for number in range(1, args.repeats + 1):
                theirs.append(run_flashinfer_bench(definition_of(args), number, Path(scratch), args.out))
                print(f"flashinfer-bench run {number}: exit {theirs[-1]['exit']}, {theirs[-1]['wallS']:.2f} s",
                      file=sys.stderr, flush=True)  # fmt: skip
                if theirs[-1]["exit"] != 0:
                    print("\n".join(theirs[-1]["tail"]), file=sys.stderr)
                if theirs[-1]["referenceStep"]:
                    print("\n".join(theirs[-1]["referenceStep"]), file=sys.stderr)
                lines = [*report(results, prepared, args.out), "", *comparison(results, theirs)]
                if args.out is not None:
                    (args.out / "suite_speed.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0 if all(result["exit"] == 0 for result in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
