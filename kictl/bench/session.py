"""One ``kictl bench`` session: implementations × workloads of a definition, as records.

``run_bench`` resolves the definition and its workloads, plans their inputs,
runs each implementation in its own worker process (``runner``), compares
its outputs with the reference's (``correctness``), judges the integrity
evidence (``integrity``) and returns the records a registry needs
(DESIGN §3, §7): the BenchmarkRuns and the Definition, Workload,
Implementation, BenchmarkProtocol and ExecutionEnvironment records they
name (``results``), judged by ``verdict``.  ``write_manifest`` writes them as
one manifest file; ``Registry.add`` stores them.

Reference outputs come from a worker running the definition's reference on
the same inputs; when one of the implementations benchmarked *is* the
reference (its single source is the reference's text), its own outputs serve
as the reference outputs, so the reference is not run twice.

Inputs: offset 0 is the workload's own seeds, used for every timed call; the
correctness rounds use offsets 1..R (fresh seeds, and fresh structure where
it is synthesised).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kictl import canon, families
from kictl.bench import correctness
from kictl.bench.implementation import LoadedImplementation, load_implementation, reference_module
from kictl.bench.inputs import plan_inputs
from kictl.bench.results import (
    BenchReport,
    RunSummary,
    build_run,
    environment_record,
    protocol_record,
    protocol_spec,
    speedups,
    write_manifest,
)
from kictl.bench.runner import HARNESS_ERROR, RESULT, Outcome, WorkerProcess
from kictl.bench.verdict import WorkloadContext, evaluate
from kictl.bench.worker import unpack
from kictl.definitions import signature
from kictl.errors import EnvError, NotFoundError, UsageError
from kictl.families.gpus import find_gpu
from kictl.records import STATISTICS, DefinitionSpec, StoredRecord, Workload, WorkloadSpec
from kictl.store import Registry

DEFAULTS = {"cpu": (1, 5, 1), "cuda": (10, 100, 3)}  # warmup, iterations, trials
DEFAULT_ROUNDS = 3
DEFAULT_TIMEOUT_S = 600.0

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
            summaries.append(
                build_run(members, impl, workload, self.definition, protocol, env_record, context.plans[0].synthesized)
            )
        speedups(summaries, self.implementations)
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


__all__ = [
    "BenchOptions",
    "BenchReport",
    "RunSummary",
    "WorkloadContext",
    "check_options",
    "environment_record",
    "evaluate",
    "protocol_spec",
    "resolve_device",
    "run_bench",
    "select_workloads",
    "write_manifest",
]
