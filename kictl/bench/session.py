"""One ``kictl bench`` session: implementations × workloads of a definition, as records.

``run_bench`` resolves the definition and its workloads, plans their inputs,
runs each implementation in its own worker process (``runner``), compares
its outputs with the reference's (``correctness``), judges the integrity
evidence (``integrity``) and returns the records a registry needs
(DESIGN §3, §7): the BenchmarkRuns and the Definition, Workload,
Implementation, BenchmarkProtocol and ExecutionEnvironment records they
name.  ``write_manifest`` writes them as one manifest file; ``Registry.add``
stores them.

Reference outputs come from a worker running the definition's reference on
the same inputs; when one of the implementations benchmarked *is* the
reference (its single source is the reference's text), its own outputs serve
as the reference outputs, so the reference is not run twice.

Inputs: offset 0 is the workload's own seeds, used for every timed call; the
correctness rounds use offsets 1..R (fresh seeds, and fresh structure where
it is synthesised).
"""

from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kictl
from kictl import canon, families
from kictl.bench import correctness, integrity
from kictl.bench.implementation import LoadedImplementation, load_implementation, reference_module
from kictl.bench.inputs import InputPlan, plan_inputs
from kictl.bench.runner import CRASHED, FAILED, HARNESS_ERROR, RESULT, TIMEOUT, Outcome, WorkerProcess
from kictl.bench.timing import summarize
from kictl.bench.worker import unpack
from kictl.definitions import signature
from kictl.errors import EnvError, NotFoundError, RegistryError, UsageError
from kictl.families.gpus import find_gpu
from kictl.records import (
    STATISTICS,
    BenchmarkProtocolSpec,
    BenchmarkRunSpec,
    DefinitionSpec,
    StoredRecord,
    Workload,
    WorkloadSpec,
    format_timestamp,
    record_from_value,
)
from kictl.store import Registry, write_atomic

DEFAULTS = {"cpu": (1, 5, 1), "cuda": (10, 100, 3)}  # warmup, iterations, trials
DEFAULT_ROUNDS = 3
DEFAULT_TIMEOUT_S = 600.0
HARNESS = {"name": "kictl", "version": kictl.__version__}
INPUT_POLICY = "same tensors for every timed call; fresh tensors and seeds for each correctness round"
REFERENCE_TEXT = "definition reference implementation, in its own process, on the same inputs"

ProgressCallback = Callable[[str], None]


@dataclass(frozen=True)
class BenchOptions:
    """What the command line asks for; ``None`` counts take the device's defaults."""

    device: str = "auto"
    warmup: int | None = None
    iterations: int | None = None
    trials: int | None = None
    rounds: int = DEFAULT_ROUNDS
    cuda_graph: bool = False
    time_setup: bool = False
    statistic: str = "median"
    timeout_s: float = DEFAULT_TIMEOUT_S
    atol: float | None = None
    rtol: float | None = None
    matched_ratio: float | None = None
    workloads: tuple[str, ...] = ()


@dataclass
class RunSummary:
    """One implementation on one workload, as the summary table shows it."""

    implementation: str
    workload: str
    workload_digest: str
    status: str
    detail: str | None = None
    latency_ns: int | None = None
    speedup: float | None = None
    maximum_absolute_error: float | None = None
    maximum_relative_error: float | None = None
    matched_ratio: float | None = None
    run: StoredRecord | None = None


@dataclass
class BenchReport:
    """What a session produced: the records to store and one summary per run."""

    definition: StoredRecord
    records: list[StoredRecord] = field(default_factory=list)
    runs: list[RunSummary] = field(default_factory=list)
    #: (workload label, why) for workloads that produced no runs: the reference or kictl's worker failed
    skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def all_passed(self) -> bool:
        return bool(self.runs) and not self.skipped and all(run.status == "passed" for run in self.runs)


class _Skip(Exception):
    """A workload cannot be judged (its reference failed, or kictl's worker did); no runs are recorded."""


# --------------------------------------------------------------------------- options


def resolve_device(requested: str) -> str:
    """``cpu`` or ``cuda:N``; ``auto`` is the first GPU if there is one.

    Raises ``UsageError`` for an unknown device and ``EnvError`` when a GPU is asked for and absent.
    """
    text = requested.strip().lower()
    if text == "cpu":
        return "cpu"
    if text not in ("auto", "cuda") and not re.fullmatch(r"cuda:\d+", text):
        raise UsageError(f"--device {requested!r}: expected auto, cpu, cuda or cuda:N")
    import torch

    available = torch.cuda.is_available()
    if text == "auto":
        return "cuda:0" if available else "cpu"
    if not available:
        raise EnvError(f"--device {requested}: no CUDA GPU is available (torch {torch.__version__})")
    index = int(text.split(":")[1]) if ":" in text else 0
    if index >= torch.cuda.device_count():
        raise EnvError(f"--device {requested}: there are {torch.cuda.device_count()} CUDA device(s)")
    return f"cuda:{index}"


def check_options(options: BenchOptions, device: str) -> tuple[int, int, int]:
    """(warmup, iterations, trials) for ``device``; raises ``UsageError`` for impossible combinations."""
    kind = "cpu" if device == "cpu" else "cuda"
    warmup, iterations, trials = (
        value if value is not None else default
        for value, default in zip((options.warmup, options.iterations, options.trials), DEFAULTS[kind], strict=True)
    )
    if warmup < 0 or iterations < 1 or trials < 1:
        raise UsageError("--warmup must be >= 0, --iterations and --trials >= 1")
    if options.rounds < 1:
        raise UsageError("--rounds must be >= 1: every run is checked against the reference")
    if options.statistic not in STATISTICS:
        raise UsageError(f"--statistic {options.statistic!r}: expected one of {', '.join(STATISTICS)}")
    if options.cuda_graph and kind == "cpu":
        raise UsageError("--cuda-graph needs a CUDA device")
    if options.cuda_graph and options.time_setup:
        raise UsageError("--time-setup cannot be combined with --cuda-graph (setup cannot be captured in a graph)")
    if options.timeout_s <= 0:
        raise UsageError("--timeout must be positive")
    return warmup, iterations, trials


# --------------------------------------------------------------------------- resolution


def select_workloads(registry: Registry, definition: StoredRecord, wanted: Sequence[str]) -> list[StoredRecord]:
    """The definition's workloads (all, or those named by label or digest prefix), by label.

    Raises ``NotFoundError`` for a name that matches none.
    """
    own = sorted(
        (
            r
            for r in registry.iter_records(["Workload"])
            if isinstance(r.model, Workload) and r.model.spec.definition_digest == definition.digest
        ),
        key=lambda r: r.name,
    )
    if not own:
        raise NotFoundError(f"{definition.name} has no workloads in {registry.root}")
    if not wanted or any(item == "all" for item in wanted):
        return own
    chosen: list[StoredRecord] = []
    for item in wanted:
        bare = item.removeprefix(canon.DIGEST_PREFIX).lower()
        matches = [r for r in own if r.name == item]
        if not matches and len(bare) >= 8:
            matches = [r for r in own if canon.digest_hex(r.digest).startswith(bare)]
        if len(matches) != 1:
            raise NotFoundError(
                f"no single workload of {definition.name} is {item!r}", candidates=[r.name for r in own][:40]
            )
        if matches[0] not in chosen:
            chosen.append(matches[0])
    return chosen


# --------------------------------------------------------------------------- records


def _ascii_name(*parts: str) -> str:
    text = ".".join(re.sub(r"[^!-~]+", "-", part).strip("-") for part in parts if part)
    return text[:256]


def environment_record(spec: dict[str, Any]) -> StoredRecord:
    """The ExecutionEnvironment record of what a worker captured."""
    hardware, software = spec["hardware"], spec["software"]
    framework = software.get("framework", {})
    parts = [hardware["product"], f"{framework.get('name', '')}-{framework.get('version', '')}"]
    if software.get("cudaToolkit"):
        parts.append(f"cuda-{software['cudaToolkit']}")
    if software.get("driver"):
        parts.append(f"driver-{software['driver']}")
    title = ", ".join(str(value) for value in (hardware["product"], hardware.get("architecture")) if value)
    raw = {
        "apiVersion": "kernelindex.dev/v1alpha1",
        "kind": "ExecutionEnvironment",
        "metadata": {"name": _ascii_name(*parts), "title": title},
        "spec": spec,
    }
    return record_from_value(raw, source="environment")


def protocol_spec(
    device: str,
    counts: tuple[int, int, int],
    options: BenchOptions,
    tolerance: correctness.Tolerance,
    flush_bytes: int,
) -> dict[str, Any]:
    """The BenchmarkProtocol spec (JSON members) of this session's measurement."""
    warmup, iterations, trials = counts
    on_gpu = device != "cpu"
    if not on_gpu:
        timer, family = "perf_counter_ns", "kictl-cpu-wall-time"
        region = "time.perf_counter_ns read just before and just after each call of run()"
    elif options.cuda_graph:
        timer, family = "cuda_graph_replay", "kictl-cuda-device-time"
        region = (
            "CUDA events around one replay of a CUDA graph captured from one call of run(), after an L2 flush "
            "and a device spin"
        )
    else:
        timer, family = "cuda_events", "kictl-cuda-device-time"
        region = (
            "CUDA events on the calling stream around each call of run(); a device spin and an L2 flush before "
            "the start event keep the GPU busy so the call is enqueued before the GPU reaches it: device time, "
            "not the host's launch path, unless the call waits for the GPU"
        )
    if options.time_setup:
        family = "kictl-cuda-setup-and-run" if on_gpu else "kictl-cpu-setup-and-run"
        if on_gpu:
            region = (
                "CUDA events on the calling stream around setup() and run(), after an L2 flush and a device "
                "synchronisation: the host's time in setup() (e.g. a FlashInfer plan()) and the launch path count"
            )
        else:
            region += "; setup() and run() both inside the timed region"
    else:
        region += "; setup(), if the module has one, called once before, outside the timed region"
    measurement: dict[str, Any] = {
        "timer": timer,
        "primaryStatistic": options.statistic,
        "warmup": warmup,
        "iterations": iterations,
        "trials": trials,
        "l2Flush": on_gpu and flush_bytes > 0,
        "cudaGraph": options.cuda_graph,
        "inputPolicy": INPUT_POLICY,
        "setupInTimedRegion": options.time_setup,
        "device": "cuda" if on_gpu else "cpu",
        "timedRegion": region,
    }
    if on_gpu and flush_bytes > 0:
        measurement["l2FlushBytes"] = flush_bytes
    return {
        "harness": dict(HARNESS),
        "correctness": {
            "reference": REFERENCE_TEXT,
            "comparator": correctness.COMPARATOR,
            "atol": tolerance.atol,
            "rtol": tolerance.rtol,
            "requiredMatchedRatio": tolerance.required_matched_ratio,
            "rounds": options.rounds,
        },
        "measurement": measurement,
        "comparability": {"family": family},
    }


def protocol_record(spec: dict[str, Any]) -> StoredRecord:
    measurement = spec["measurement"]
    name = _ascii_name(
        "kictl-bench",
        measurement["device"],
        measurement["timer"],
        measurement["primaryStatistic"],
        "setup-timed" if measurement["setupInTimedRegion"] else "",
    )
    title = (
        f"kictl bench: {measurement['timer']}, {measurement['primaryStatistic']} of "
        f"{measurement['iterations']}x{measurement['trials']} after {measurement['warmup']} warm-up"
    )
    raw = {
        "apiVersion": "kernelindex.dev/v1alpha1",
        "kind": "BenchmarkProtocol",
        "metadata": {"name": name, "title": title},
        "spec": spec,
    }
    record = record_from_value(raw, source="protocol")
    assert isinstance(record.model.spec, BenchmarkProtocolSpec)
    return record


def tolerance_for(workload: StoredRecord, options: BenchOptions) -> correctness.Tolerance:
    """Command line over the workload's own tolerance over kictl's defaults."""
    spec = workload.model.spec
    assert isinstance(spec, WorkloadSpec)
    given = spec.tolerance
    atol = options.atol if options.atol is not None else (given.atol if given and given.atol is not None else None)
    rtol = options.rtol if options.rtol is not None else (given.rtol if given and given.rtol is not None else None)
    ratio = options.matched_ratio
    if ratio is None and given is not None:
        ratio = given.required_matched_ratio
    return correctness.Tolerance(
        atol=correctness.DEFAULT_ATOL if atol is None else atol,
        rtol=correctness.DEFAULT_RTOL if rtol is None else rtol,
        required_matched_ratio=correctness.DEFAULT_MATCHED_RATIO if ratio is None else ratio,
    )


# --------------------------------------------------------------------------- evaluation


@dataclass
class WorkloadContext:
    """Everything about one workload that evaluation needs."""

    record: StoredRecord
    plans: dict[int, InputPlan]
    names: list[str]
    shapes: list[tuple[int, ...]]
    dtypes: list[str]
    tolerance: correctness.Tolerance
    round_offsets: list[int]
    floor_ns: float | None = None
    floor_text: str | None = None


def _integrity(
    result: dict[str, Any],
    context: WorkloadContext,
    refs: dict[int, list[Any]],
    rounds: list[Any],
    primary_ns: int | None,
) -> dict[str, dict[str, str]]:
    notes: dict[str, list[str]] = result.get("notes", {})
    skipped: dict[str, str] = result.get("skipped", {})
    checks: dict[str, dict[str, str]] = {}
    for name in (
        "inputsUnchanged",
        "outputsNotAliasInputs",
        "plainTensorOutputs",
        "noThreadsLeft",
        "timerNotPatched",
        "streamOrdered",
    ):
        if notes.get(name):
            checks[name] = integrity.result(integrity.FAILED, "; ".join(notes[name])[:1000])
        elif name in skipped:
            checks[name] = integrity.result(integrity.SKIPPED, skipped[name])
        else:
            checks[name] = integrity.result(integrity.PASSED)
    # outputs fully written: no element still holds the poison pattern
    calls: dict[int, list[Any]] = {
        offset: entry["outputs"] for offset, entry in result["rounds"].items() if entry.get("outputs") is not None
    }
    audit = result.get("audit")
    poisoned = []
    for offset, outputs in [*calls.items(), *([(0, audit)] if audit is not None else [])]:
        for name, tensor, want in zip(context.names, outputs, refs.get(offset, [None] * len(outputs)), strict=False):
            count = integrity.poisoned_elements(tensor, want)
            if count:
                poisoned.append(f"{count} elements of {name} (inputs {offset}) were never written")
    checks["outputsFullyWritten"] = (
        integrity.result(integrity.FAILED, "; ".join(poisoned)) if poisoned else integrity.result(integrity.PASSED)
    )
    # outputs fresh: different inputs never gave bit-identical outputs (unless the references agree too)
    seen = [*calls.items(), *([(0, audit)] if audit is not None else [])]
    stale = []
    for position, (offset_a, outputs_a) in enumerate(seen):
        for offset_b, outputs_b in seen[position + 1 :]:
            if offset_a == offset_b or offset_a not in refs or offset_b not in refs:
                continue
            if correctness.outputs_identical(outputs_a, outputs_b) and not correctness.outputs_identical(
                refs[offset_a], refs[offset_b]
            ):
                stale.append(f"inputs {offset_a} and {offset_b} gave identical outputs")
    if len({offset for offset, _ in seen}) < 2:
        checks["outputsFresh"] = integrity.result(integrity.SKIPPED, "fewer than two different inputs were called")
    elif stale:
        checks["outputsFresh"] = integrity.result(integrity.FAILED, "; ".join(stale))
    else:
        checks["outputsFresh"] = integrity.result(integrity.PASSED)
    # a timed call, chosen at random, returned correct outputs
    rounds_passed = bool(rounds) and all(r.status == "passed" for r in rounds)
    if result.get("audit_error"):
        checks["timedOutputsCorrect"] = integrity.result(integrity.FAILED, f"a timed call {result['audit_error']}")
    elif audit is None or 0 not in refs:
        checks["timedOutputsCorrect"] = integrity.result(integrity.SKIPPED, "no timed call was audited")
    elif not rounds_passed:
        checks["timedOutputsCorrect"] = integrity.result(integrity.SKIPPED, "the correctness rounds did not pass")
    else:
        audited = correctness.compare_round(
            0, context.names, audit, refs[0], shapes=context.shapes, dtypes=context.dtypes, tolerance=context.tolerance
        )
        if audited.status == "passed":
            checks["timedOutputsCorrect"] = integrity.result(integrity.PASSED)
        else:
            checks["timedOutputsCorrect"] = integrity.result(
                integrity.FAILED, f"a timed call returned wrong outputs: {audited.detail}"
            )
    # not faster than physics allows
    if context.floor_ns is None:
        checks["aboveFloor"] = integrity.result(integrity.SKIPPED, context.floor_text or "no floor for this device")
    elif primary_ns is None:
        checks["aboveFloor"] = integrity.result(integrity.SKIPPED, "no timing")
    elif primary_ns < context.floor_ns:
        checks["aboveFloor"] = integrity.result(
            integrity.FAILED, f"{primary_ns} ns is below the floor of {context.floor_ns:.0f} ns ({context.floor_text})"
        )
    else:
        checks["aboveFloor"] = integrity.result(
            integrity.PASSED, f"floor {context.floor_ns:.0f} ns ({context.floor_text})"
        )
    return checks


def evaluate(
    outcome: Outcome,
    context: WorkloadContext,
    refs: dict[int, list[Any]] | None,
    statistic: str,
    rounds_count: int,
) -> dict[str, Any]:
    """The BenchmarkRun spec members (without digests) an outcome earns."""
    if outcome.kind == TIMEOUT:
        return {"status": "timeout", "statusDetail": outcome.detail or "timeout"}
    if outcome.kind == FAILED:
        status = outcome.payload.get("status", "runtime_error")
        return {"status": status, "statusDetail": outcome.detail or status}
    if outcome.kind == CRASHED:
        return {"status": "runtime_error", "statusDetail": outcome.detail or "the worker died"}
    assert outcome.kind == RESULT
    assert refs is not None
    result: dict[str, Any] = outcome.payload
    members: dict[str, Any] = {}
    compared = []
    shape_problem = None
    for offset in context.round_offsets:
        entry = result["rounds"].get(offset, {})
        if entry.get("outputs") is None:
            shape_problem = entry.get("error") or "no outputs"
            continue
        compared.append(
            correctness.compare_round(
                offset,
                context.names,
                entry["outputs"],
                refs[offset],
                shapes=context.shapes,
                dtypes=context.dtypes,
                tolerance=context.tolerance,
            )
        )
    timing_data = result["timing"]
    samples = [int(value) for value in timing_data["samples"]]
    primary_ns = None
    if samples:
        stats = summarize(samples)
        primary_ns = stats[statistic]
        timing: dict[str, Any] = {"latencyNs": stats, "samples": samples, "primaryStatistic": statistic}
        if timing_data.get("enqueued_ahead") is not None:
            timing["enqueuedAhead"] = int(timing_data["enqueued_ahead"])
        if timing_data.get("device_spin_ns") is not None:
            timing["deviceSpinNs"] = int(timing_data["device_spin_ns"])
        members["timing"] = timing
    checks = _integrity(result, context, refs, compared, primary_ns)
    members["integrity"] = checks
    worst = correctness.worst_round(compared) if compared else None
    record_correctness: dict[str, Any] = {"comparator": correctness.COMPARATOR, "rounds": rounds_count}
    if worst is not None:
        for key, value in (
            ("maximumAbsoluteError", worst.maximum_absolute_error),
            ("maximumRelativeError", worst.maximum_relative_error),
            ("matchedRatio", worst.matched_ratio),
        ):
            if value is not None and math.isfinite(value):
                record_correctness[key] = float(value)
    members["correctness"] = record_correctness
    failed = sorted(name for name, check in checks.items() if check["result"] == integrity.FAILED)
    if shape_problem is not None:
        members["status"], members["statusDetail"] = "incorrect_shape", shape_problem
    elif worst is not None and worst.status in ("incorrect_shape", "incorrect_dtype"):
        members["status"], members["statusDetail"] = worst.status, worst.detail
    elif failed:
        members["status"] = "reward_hack"
        members["statusDetail"] = "; ".join(f"{name}: {checks[name].get('detail', 'failed')}" for name in failed)[:2000]
    elif worst is not None and worst.status == "incorrect_numerical":
        members["status"], members["statusDetail"] = "incorrect_numerical", worst.detail
    else:
        members["status"] = "passed"
    return members


# --------------------------------------------------------------------------- the session


def _floor(
    spec: DefinitionSpec, workload: StoredRecord, env: dict[str, Any], registry: Registry
) -> tuple[float | None, str]:
    product = env["hardware"]["product"]
    gpu = find_gpu(product) if "smCount" in env["hardware"] else None
    if gpu is None:
        return None, f"no datasheet entry for {product}"
    model = workload.model.spec
    assert isinstance(model, WorkloadSpec)
    work = families.work(spec, model, registry.read_blob)
    found = families.floor(work, gpu)
    return found.floor_ns, f"{found.method}, {gpu.product} datasheet"


def run_bench(
    registry: Registry,
    definition_ref: str,
    implementation_refs: Sequence[str],
    options: BenchOptions,
    *,
    workdir: Path | None = None,
    progress: ProgressCallback | None = None,
) -> BenchReport:
    """Benchmark each implementation on each selected workload of a definition.

    Raises ``NotFoundError`` for an unknown definition, workload or
    implementation digest, ``UsageError`` for bad options or paths,
    ``RecordError`` for invalid implementations or workloads, ``EnvError``
    when the device or a worker cannot start.
    """
    say = progress or (lambda _text: None)
    if not implementation_refs:
        raise UsageError("give at least one --impl")
    definition = registry.resolve(definition_ref, ["Definition"])
    spec = definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    signature(spec, source=f"{definition.name} reference")
    workloads = select_workloads(registry, definition, options.workloads)
    device = resolve_device(options.device)
    counts = check_options(options, device)
    scratch = tempfile.TemporaryDirectory(prefix="kictl-bench-") if workdir is None else None
    base = Path(scratch.name) if scratch is not None else workdir
    assert base is not None
    try:
        return _session(registry, definition, workloads, implementation_refs, options, device, counts, base, say)
    finally:
        if scratch is not None:
            scratch.cleanup()


class _Session:
    """The state of one session: workers, records made so far, the report."""

    def __init__(
        self,
        registry: Registry,
        definition: StoredRecord,
        implementations: list[LoadedImplementation],
        options: BenchOptions,
        device: str,
        counts: tuple[int, int, int],
        base: Path,
        say: ProgressCallback,
    ) -> None:
        self.registry = registry
        self.definition = definition
        spec = definition.model.spec
        assert isinstance(spec, DefinitionSpec)
        self.spec = spec
        self.order = signature(spec, source=f"{definition.name} reference")
        self.implementations = implementations
        self.options = options
        self.device = device
        self.counts = counts
        self.base = base
        self.say = say
        self.round_offsets = list(range(1, options.rounds + 1))
        self.offsets = [0, *self.round_offsets]
        logs = base / "logs"
        self.workers = {
            impl.record.digest: WorkerProcess(f"impl{n}", device, logs) for n, impl in enumerate(implementations)
        }
        self.reference_worker = WorkerProcess("reference", device, logs)
        self.environments: dict[str, StoredRecord] = {}
        self.protocols: dict[str, StoredRecord] = {}
        self.report = BenchReport(definition=definition)

    def close(self) -> None:
        for worker in [*self.workers.values(), self.reference_worker]:
            worker.stop()

    def context(self, workload: StoredRecord) -> WorkloadContext:
        model = workload.model.spec
        assert isinstance(model, WorkloadSpec)
        axes = families.full_axes(self.spec, model.axes, source=f"workload {workload.name}")
        layout = [
            (name, families.tensor_shape(self.spec, name, axes), self.spec.outputs[name].dtype)
            for name in self.order.outputs
        ]
        plans = {
            offset: plan_inputs(self.spec, workload, self.order.inputs, self.registry.read_blob, offset=offset)
            for offset in self.offsets
        }
        return WorkloadContext(
            record=workload,
            plans=plans,
            names=[name for name, _, _ in layout],
            shapes=[shape for _, shape, _ in layout],
            dtypes=[dtype for _, _, dtype in layout],
            tolerance=tolerance_for(workload, self.options),
            round_offsets=self.round_offsets,
        )

    def implementation_job(
        self, impl: LoadedImplementation, context: WorkloadContext, env: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "role": "implementation",
            "module": impl.module(),
            "plans": context.plans,
            "round_offsets": context.round_offsets,
            "outputs": list(zip(context.names, context.shapes, context.dtypes, strict=True)),
            "options": {
                "warmup": self.counts[0],
                "iterations": self.counts[1],
                "trials": self.counts[2],
                "cuda_graph": self.options.cuda_graph,
                "time_setup": self.options.time_setup,
                "flush_bytes": _flush_bytes(self.device, env),
            },
        }

    def workload(self, workload: StoredRecord) -> None:
        """Run every implementation on one workload; a workload that cannot be judged is skipped."""
        try:
            self._workload(workload)
        except _Skip as exc:
            self.report.skipped.append((workload.name, str(exc)))

    def _workload(self, workload: StoredRecord) -> None:
        context = self.context(workload)
        refs: dict[int, list[Any]] | None = None
        outcomes: list[tuple[LoadedImplementation, Outcome, dict[str, Any]]] = []
        for impl in self.implementations:
            if refs is None and not impl.is_reference:
                refs = self.reference_outputs(context)
            worker = self.workers[impl.record.digest]
            env = worker.environment if worker.alive and worker.environment else worker.start()
            label = f"{workload.name}: {impl.name}"
            self.say(label)
            outcome = worker.run(
                self.implementation_job(impl, context, env), self.options.timeout_s, self._phase(label)
            )
            if outcome.kind == HARNESS_ERROR:
                raise _Skip(f"kictl's worker failed with {impl.name}: {_last_line(outcome.detail)}")
            if outcome.kind == RESULT:
                _unpack_result(outcome.payload)
            if impl.is_reference and refs is None and outcome.kind == RESULT:
                own = {
                    offset: entry["outputs"]
                    for offset, entry in outcome.payload["rounds"].items()
                    if entry.get("outputs") is not None
                }
                if outcome.payload.get("audit") is not None:
                    own[0] = outcome.payload["audit"]
                if all(offset in own for offset in self.offsets):
                    refs = own
            outcomes.append((impl, outcome, env))
        if refs is None and any(outcome.kind == RESULT for _, outcome, _ in outcomes):
            refs = self.reference_outputs(context)
        summaries = []
        for impl, outcome, env in outcomes:
            env_record = self.environment(env)
            protocol = self.protocol(context, env)
            if self.device != "cpu":
                context.floor_ns, context.floor_text = _floor(self.spec, workload, env, self.registry)
            else:
                context.floor_ns, context.floor_text = None, "no datasheet floor for a CPU"
            members = evaluate(outcome, context, refs, self.options.statistic, self.options.rounds)
            summaries.append(_run(members, impl, workload, self.definition, protocol, env_record, context))
        _speedups(summaries, self.implementations)
        self.report.records.append(workload)
        self.report.runs.extend(summaries)

    def _phase(self, label: str) -> Callable[[str], None]:
        def report(phase: str) -> None:
            self.say(f"{label}: {phase}")

        return report

    def reference_outputs(self, context: WorkloadContext) -> dict[int, list[Any]]:
        """The reference's outputs on every offset's inputs; raises ``_Skip`` when the reference fails."""
        job = {
            "role": "reference",
            "module": reference_module(self.spec, self.base),
            "plans": context.plans,
            "offsets": self.offsets,
            "outputs": list(zip(context.names, context.shapes, context.dtypes, strict=True)),
        }
        name = context.record.name
        self.say(f"{name}: reference")
        outcome = self.reference_worker.run(job, self.options.timeout_s, lambda phase: self.say(f"{name}: {phase}"))
        if outcome.kind != RESULT:
            raise _Skip(f"the definition's reference failed ({outcome.kind}): {_last_line(outcome.detail)}")
        return {offset: [unpack(item) for item in packed] for offset, packed in outcome.payload["outputs"].items()}

    def environment(self, env: dict[str, Any]) -> StoredRecord:
        key = canon.sha256_hex(canon.canonical_bytes(env))
        if key not in self.environments:
            self.environments[key] = environment_record(env)
        return self.environments[key]

    def protocol(self, context: WorkloadContext, env: dict[str, Any]) -> StoredRecord:
        spec = protocol_spec(self.device, self.counts, self.options, context.tolerance, _flush_bytes(self.device, env))
        key = canon.sha256_hex(canon.canonical_bytes(spec))
        if key not in self.protocols:
            self.protocols[key] = protocol_record(spec)
        return self.protocols[key]


def _last_line(text: str | None) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no detail"


def _unpack_result(payload: dict[str, Any]) -> None:
    """Turn the packed outputs of an implementation job back into tensors, in place."""
    for entry in payload["rounds"].values():
        if entry.get("outputs") is not None:
            entry["outputs"] = [unpack(item) for item in entry["outputs"]]
    if payload.get("audit") is not None:
        payload["audit"] = [unpack(item) for item in payload["audit"]]


def _flush_bytes(device: str, env: dict[str, Any]) -> int:
    """Twice the L2 cache (issue 4: a write to a buffer of twice the L2 size); 0 on the CPU."""
    if device == "cpu":
        return 0
    return 2 * int(env["hardware"].get("l2CacheBytes", 0)) or 256 * 1024 * 1024


def _session(
    registry: Registry,
    definition: StoredRecord,
    workloads: list[StoredRecord],
    implementation_refs: Sequence[str],
    options: BenchOptions,
    device: str,
    counts: tuple[int, int, int],
    base: Path,
    say: ProgressCallback,
) -> BenchReport:
    implementations: list[LoadedImplementation] = []
    for ref in implementation_refs:
        loaded = load_implementation(ref, definition, registry, base)
        if all(other.record.digest != loaded.record.digest for other in implementations):
            implementations.append(loaded)
    # the reference (if benchmarked) runs first: its outputs are everyone's reference outputs
    implementations.sort(key=lambda item: not item.is_reference)
    session = _Session(registry, definition, implementations, options, device, counts, base, say)
    try:
        for workload in workloads:
            session.workload(workload)
    finally:
        session.close()
    report = session.report
    report.records = [
        definition,
        *(impl.record for impl in implementations),
        *report.records,
        *session.protocols.values(),
        *session.environments.values(),
        *(run.run for run in report.runs if run.run is not None),
    ]
    return report


def _run(
    members: dict[str, Any],
    impl: LoadedImplementation,
    workload: StoredRecord,
    definition: StoredRecord,
    protocol: StoredRecord,
    environment: StoredRecord,
    context: WorkloadContext,
) -> RunSummary:
    observed = datetime.now(UTC)
    spec_members = {
        **members,
        "observedAt": format_timestamp(observed),
        "definitionDigest": definition.digest,
        "workloadDigest": workload.digest,
        "implementationDigest": impl.record.digest,
        "protocolDigest": protocol.digest,
        "environmentDigest": environment.digest,
    }
    synthesized = context.plans[0].synthesized
    if synthesized:
        spec_members["synthesizedInputs"] = list(synthesized)
    stamp = observed.strftime("%Y%m%dT%H%M%S") + f"{observed.microsecond // 1000:03d}Z"
    raw = {
        "apiVersion": "kernelindex.dev/v1alpha1",
        "kind": "BenchmarkRun",
        "metadata": {
            "name": _ascii_name(impl.name, workload.name, stamp),
            "title": f"{impl.name} on {definition.name} / {workload.name}",
        },
        "spec": spec_members,
    }
    record = record_from_value(raw, source="run")
    assert isinstance(record.model.spec, BenchmarkRunSpec)
    run_spec = record.model.spec
    summary = RunSummary(
        implementation=impl.name,
        workload=workload.name,
        workload_digest=workload.digest,
        status=run_spec.status,
        detail=run_spec.status_detail,
        run=record,
    )
    if run_spec.timing is not None:
        summary.latency_ns = run_spec.timing.primary_ns()
    if run_spec.correctness is not None:
        summary.maximum_absolute_error = run_spec.correctness.maximum_absolute_error
        summary.maximum_relative_error = run_spec.correctness.maximum_relative_error
        summary.matched_ratio = run_spec.correctness.matched_ratio
    return summary


def _speedups(runs: Sequence[RunSummary], implementations: Sequence[LoadedImplementation]) -> None:
    reference_names = {impl.name for impl in implementations if impl.is_reference}
    baseline = next(
        (r for r in runs if r.implementation in reference_names and r.status == "passed" and r.latency_ns), None
    )
    if baseline is None or not baseline.latency_ns:
        return
    for run in runs:
        if run.status == "passed" and run.latency_ns:
            run.speedup = baseline.latency_ns / run.latency_ns


# --------------------------------------------------------------------------- output


def write_manifest(report: BenchReport, folder: Path) -> Path:
    """Write every record of the report as one manifest ``{<kind>/<hex>: record}`` in ``folder``.

    ``kictl add FOLDER`` reads it back.  Raises ``RegistryError`` when the
    folder cannot be written.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RegistryError(f"cannot create {folder}: {exc.strerror}") from exc
    manifest: dict[str, Any] = {}
    for record in report.records:
        manifest.setdefault(f"{record.kind}/{canon.digest_hex(record.digest)}", record.raw)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    path = folder / f"bench-{report.definition.name}-{stamp}.json"
    write_atomic(path, canon.pretty_bytes(manifest))
    return path
