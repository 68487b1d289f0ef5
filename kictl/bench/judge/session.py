"""One ``kictl bench`` session: implementations × workloads of a definition, as records.

``run_bench`` resolves the definition and its workloads, plans their inputs,
and for each workload: gets the reference outputs from kictl's own
reference worker (the definition's reference, from kictl's copy of the
record; never from an implementation that claims to be it), drives each
implementation's sandboxed worker through its correctness rounds, setup and
timed calls (``loop``; on the CPU the timed calls of all implementations take
turns, on a GPU each implementation's run as a block of their own),
judges the evidence (``verdict``) and returns the records a registry needs
(DESIGN §3, §7): the BenchmarkRuns and the Definition, Workload,
Implementation, BenchmarkProtocol and ExecutionEnvironment records they
name (``results``).  ``write_manifest`` writes them as one manifest file;
``Registry.add`` stores them.

Whose failure it is: anything an implementation does, from its import to
its packed outputs, is its own run's failure; each run's record is built in
a guard of its own; a workload is skipped only when the definition's
reference fails.

Inputs: a secret drawn at bench time seeds every value a worker sees (the
correctness rounds, the values ``setup()`` sees, the timed input sets); it
is recorded in each run afterwards (``inputSecret``).  Index tensors come
from the workload (or are synthesised from its axes); the timed input sets
share the workload's own structure so that a ``plan()`` made in ``setup()``
holds for every timed call.

Its size (over 600 lines) is one session's state (``_Session``): spawning, planning, the reference, each
run's phases and the records share it; the timed loop itself is ``loop`` and the records' building ``results``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import secrets
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from kictl import canon, families, lookup
from kictl.bench import wire
from kictl.bench.judge import audits, correctness, sandbox
from kictl.bench.judge.energy_loop import EnergyPhase, energy_work
from kictl.bench.judge.implementation import LoadedImplementation, load_implementation, reference_load
from kictl.bench.judge.inputs import (
    entrypoint_call,
    plan_inputs,
    resolve_entrypoint,
    to_wire,
    with_secret_values,
)
from kictl.bench.judge.loop import IDLE_WINDOW_S, LoopOptions, RunDriver
from kictl.bench.judge.options import (
    BenchOptions,
    adaptive_budget,
    check_options,
    fixed_count_budget,
    flush_bytes,
    parent_threads,
    parse_limits,
    pinned_cpus,
    resolve_device,
    usable_cpus,
    warmup_budget,
)
from kictl.bench.judge.phases import PhaseClock
from kictl.bench.judge.results import (
    BenchReport,
    RunSummary,
    build_run,
    environment_record,
    protocol_record,
    protocol_spec,
    speedups,
    write_manifest,
)
from kictl.bench.judge.runner import ImplementationFailed, WorkerGone, WorkerProcess
from kictl.bench.judge.verdict import WorkloadContext, audit_finding, audit_label, evaluate
from kictl.bench.wire import timers
from kictl.bench.wire.lazy import torch_module
from kictl.bench.wire.tensors import materialize_plans
from kictl.bench.worker.gpu_state import Nvml
from kictl.bench.worker.main import unpack
from kictl.definitions import signature
from kictl.errors import EnvError, NotFoundError, RecordError, UsageError
from kictl.families import judges
from kictl.families.gpus import find_gpu
from kictl.records import ConstAxis, DefinitionSpec, StoredRecord, Workload, WorkloadSpec
from kictl.store.registry import Registry

ProgressCallback = Callable[[str], None]
#: Whether the correctness rounds and setup() of several implementations overlap on the CPU device too
#: (they always do on a GPU); off, because every worker is pinned to the one CPU the timed calls use.
OVERLAP_PREPARE_ON_CPU = False
#: Whether each implementation's warm-up and timed calls run as a block of their own on the CPU device too (they
#: always do on a GPU, where a small kernel's figure moves by up to 2 µs with what ran just before it: RESULTS.md,
#: "What moves a small kernel's figure"); off, so that on the CPU a candidate and the reference, taking turns
#: call by call, meet the machine's background load alike.
TIMED_IN_BLOCKS_ON_CPU = False
#: kictl's reference workers on a GPU, all running the definition's reference, the audited calls' inputs shared
#: out among them: a reference is often host-bound (a Python loop over a batch: 6-70 ms a call on the H200 for
#: the bundled attention references) or dominated by copying its outputs back, and its outputs are wanted while
#: the implementations' workers are held idle.  At most one per 4 CPUs; one on the CPU device, where every
#: worker shares the timed calls' CPU.
REFERENCE_WORKERS_ON_GPU = 4
REFERENCE_WORKERS_ON_CPU = 1
WorkerFactory = Callable[[str], Any]


class _Skip(Exception):
    """A workload cannot be judged (its reference failed, or kictl's worker did); no runs are recorded."""


class _Writes(Exception):
    """The definition's reference wrote inputs kictl did not know it writes: the workload is judged again from the
    start with them judged as outputs (``_Session.workload``); nothing of the first attempt is recorded."""

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__(", ".join(names))
        self.names = tuple(names)


class _OutOfMemory(Exception):
    """A workload's first attempt ran out of GPU memory while kictl's reference workers ran several at once: it is
    judged again from the start, with one (``_Session.workload``); nothing of the first attempt is recorded."""


#: What a CUDA allocation failure says in a worker's failure: torch's ``OutOfMemoryError``, the driver's and the
#: runtime's error names and cuBLAS's
_OUT_OF_MEMORY = re.compile(
    r"OutOfMemoryError|CUDA out of memory|CUDA error: out of memory|CUDA_ERROR_OUT_OF_MEMORY|"
    r"cudaErrorMemoryAllocation|CUBLAS_STATUS_ALLOC_FAILED"
)


def out_of_memory(detail: str | None) -> bool:
    """Whether a failure's detail says that a GPU allocation failed."""
    return detail is not None and _OUT_OF_MEMORY.search(detail) is not None


# --------------------------------------------------------------------------- resolution


def select_workloads(registry: Registry, definition: StoredRecord, wanted: Sequence[str]) -> list[StoredRecord]:
    """The definition's workloads (all, or those named by label or digest prefix), by label.

    Raises ``NotFoundError`` for a name that matches none.  Only the files that can name the definition's digest
    are parsed (``_may_name``): the catalogue's 1,608 workloads took 0.5 CPU-s a session to parse and validate,
    for the few of one definition; another definition's workload file is not read as a record here.
    """
    digest = definition.digest.encode()
    candidates = (path for _, path in registry.record_files(["Workload"]) if _may_name(path, digest))
    own = sorted(
        (
            r
            for r in map(registry.read_record, candidates)
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
        match = lookup.resolve_among(item, own, what=f"workload of {definition.name}")
        if match not in chosen:
            chosen.append(match)
    return chosen


def _may_name(path: Path, digest: bytes) -> bool:
    """Whether the record file at ``path`` may hold ``digest`` as a JSON string: its bytes hold it, or a ``\\u``
    escape, the only one that can spell a letter, a digit or the colon of a digest.  An unreadable file is
    read_record's to report."""
    try:
        data = path.read_bytes()
    except OSError:
        return True
    return digest in data or b"\\u" in data


def default_tolerance(
    workload: StoredRecord, options: BenchOptions, definition: DefinitionSpec | None = None
) -> correctness.Tolerance:
    """The tolerance ``workload``'s runs are judged at when nobody asks for another (``tolerance_for`` without
    ``--atol``, ``--rtol`` or ``--matched-ratio``): a run judged looser ranks in a group of its own."""
    return tolerance_for(workload, dataclasses.replace(options, atol=None, rtol=None, matched_ratio=None), definition)


def tolerance_for(
    workload: StoredRecord, options: BenchOptions, definition: DefinitionSpec | None = None
) -> correctness.Tolerance:
    """Command line over the workload's own tolerance over kictl's defaults, bounded by the definition's contract.

    A definition that states a ``tolerance`` (its precision contract, docs/records.md) makes that the loosest
    any run of it is judged at: a looser workload or default is tightened to it, and a looser ``--atol``,
    ``--rtol`` or ``--matched-ratio`` is a usage error (``UsageError``), so that a lower-precision shortcut is
    judged by what the definition states and not by what its submitter asked for.
    """
    spec = workload.model.spec
    assert isinstance(spec, WorkloadSpec)
    given = spec.tolerance
    atol = options.atol if options.atol is not None else (given.atol if given and given.atol is not None else None)
    rtol = options.rtol if options.rtol is not None else (given.rtol if given and given.rtol is not None else None)
    ratio = options.matched_ratio
    if ratio is None and given is not None:
        ratio = given.required_matched_ratio
    family = judges.contract(definition) if definition is not None else None  # the family's, where none is stated
    stated = definition.tolerance if definition is not None else None
    if ratio is None and family is not None:
        ratio = family.get("requiredMatchedRatio")
    judge = str((stated.judge if stated and stated.judge else None) or (family or {}).get("judge", "allclose"))
    limit = float(
        (stated.max_total_variation if stated else None)
        or (family or {}).get("maxTotalVariation", judges.DEFAULT_MAX_TOTAL_VARIATION)
    )
    trials = int((stated.trials if stated else None) or (family or {}).get("trials", judges.DEFAULT_TRIALS))
    found = correctness.Tolerance(
        atol=correctness.DEFAULT_ATOL if atol is None else atol,
        rtol=correctness.DEFAULT_RTOL if rtol is None else rtol,
        required_matched_ratio=correctness.DEFAULT_MATCHED_RATIO if ratio is None else ratio,
        judge=judge,
        max_total_variation=limit,
        trials=trials,
    )
    if definition is None or definition.tolerance is None:
        return found
    contract = definition.tolerance
    for flag, value, bound in (("--atol", options.atol, contract.atol), ("--rtol", options.rtol, contract.rtol)):
        if value is not None and bound is not None and value > bound:
            raise UsageError(f"{flag} {value:g} is looser than {definition.name}'s precision contract ({bound:g})")
    least = contract.required_matched_ratio
    if options.matched_ratio is not None and least is not None and options.matched_ratio < least:
        raise UsageError(
            f"--matched-ratio {options.matched_ratio:g} is looser than {definition.name}'s precision contract "
            f"({least:g})"
        )
    return correctness.Tolerance(
        judge=judge,
        max_total_variation=limit,
        trials=trials,
        atol=found.atol if contract.atol is None else min(found.atol, contract.atol),
        rtol=found.rtol if contract.rtol is None else min(found.rtol, contract.rtol),
        required_matched_ratio=(
            found.required_matched_ratio if least is None else max(found.required_matched_ratio, least)
        ),
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
    worker_factory: WorkerFactory | None = None,
    kept: KeptWorkers | None = None,
) -> BenchReport:
    """Benchmark each implementation on each selected workload of a definition.

    ``worker_factory`` (tests) makes the workers instead of sandboxed
    processes.  ``kept``: workers that outlive the session (an executor's
    jobs on one device reuse them, as one session does across workloads).
    Raises ``NotFoundError`` for an unknown definition, workload
    or implementation digest, ``UsageError`` for bad options or paths,
    ``RecordError`` for invalid implementations or workloads, ``EnvError``
    when the device, the sandbox or a worker cannot start.
    """
    began = time.monotonic()
    say = progress or (lambda _text: None)
    clock = PhaseClock()
    if not implementation_refs:
        raise UsageError("give at least one --impl")
    with clock.phase("resolve"):
        definition = registry.resolve(definition_ref, ["Definition"])
        spec = definition.model.spec
        assert isinstance(spec, DefinitionSpec)
        signature(spec, source=f"{definition.name} reference")
        workloads = select_workloads(registry, definition, options.workloads)
        for workload in workloads:  # a tolerance looser than the definition's contract: refused before anything runs
            tolerance_for(workload, options, spec)
        # an explicit GPU is named without importing torch, so that the workers start while the parent imports it
        named = _named_device(options.device)
        device = named or resolve_device(options.device)
        counts = check_options(options, device)
        isolation = sandbox.Isolation(None) if worker_factory is not None else sandbox.resolve(options.no_sandbox)
    scratch = tempfile.TemporaryDirectory(prefix="kictl-bench-") if workdir is None else None
    base = Path(scratch.name) if scratch is not None else workdir
    assert base is not None
    try:
        with clock.phase("resolve"):
            loaded: list[LoadedImplementation] = []
            for ref in implementation_refs:
                found = load_implementation(ref, definition, registry)
                if all(other.record.digest != found.record.digest for other in loaded):
                    loaded.append(found)
            loaded.sort(key=lambda item: not item.is_reference)  # the reference's run first: the speed-ups' baseline
            _refuse_shared_names(loaded, registry)
        session = _Session(
            registry, definition, loaded, options, device, counts, base, say, isolation, worker_factory, clock, kept
        )
        try:  # an interrupt or a failure while the workers start ends the ones started
            with clock.phase("start"):
                session.spawn()
                if named is not None:
                    resolve_device(options.device)  # no GPU after all: EnvError, the workers are ended below
                session.open_device()
        except BaseException:
            with clock.phase("stop"):
                session.close()
            raise
        with parent_threads(pinned_cpus(options.threads)):
            return _session(session, workloads, began)
    finally:
        if scratch is not None:
            scratch.cleanup()


def _refuse_shared_names(loaded: Sequence[LoadedImplementation], registry: Registry | None) -> None:
    """``RecordError`` before anything runs when two different implementations would share a name: two of the
    session's, or a new one and one the registry holds (issue 40; the registry refuses it again when the
    records are added, ``Registry.refuse_name_collisions``)."""
    records = [item.record for item in loaded]
    if registry is not None:
        registry.refuse_name_collisions(records)
        return
    held: dict[str, str] = {}
    for record in records:
        owner = held.setdefault(record.name, record.digest)
        if owner != record.digest:
            raise RecordError(
                f"Implementation name {record.name!r} names two different implementations ({owner[:19]} and "
                f"{record.digest[:19]}); a different implementation needs a name of its own"
            )


def _named_device(requested: str) -> str | None:
    """``cuda:N`` for an explicit ``cuda``/``cuda:N`` (checked against the machine later), else ``None``."""
    text = requested.strip().lower()
    if text == "cuda":
        return "cuda:0"
    if text.startswith("cuda:") and text[5:].isdigit():
        return f"cuda:{int(text[5:])}"
    return None


class _Session:
    """The state of one session: workers, records made so far, the report."""

    def __init__(
        self,
        registry: Registry,
        definition: StoredRecord,
        implementations: list[LoadedImplementation],
        options: BenchOptions,
        device: str,
        counts: tuple[int, int | None, int],
        base: Path,
        say: ProgressCallback,
        isolation: sandbox.Isolation,
        worker_factory: WorkerFactory | None = None,
        clock: PhaseClock | None = None,
        kept: KeptWorkers | None = None,
    ) -> None:
        self.clock = clock or PhaseClock()
        self.registry = registry
        self.definition = definition
        spec = definition.model.spec
        assert isinstance(spec, DefinitionSpec)
        self.spec = spec
        self.order = signature(spec, source=f"{definition.name} reference")
        #: the constant axes, which an implementation's run() may take as keyword-only parameters (docs/bench.md)
        self.constants = tuple(
            wire.Constant(name=name, value=axis.value)
            for name, axis in spec.axes.items()
            if isinstance(axis, ConstAxis)
        )
        self.implementations = implementations
        self.options = options
        self.device = device
        self.counts = counts
        self.base = base
        self.say = say
        self.isolation = isolation
        #: drawn now, never shown to a worker; seeds every value the rounds and the timed calls get
        self.secret = options.input_secret or secrets.token_hex(16)
        self.round_labels = [f"round {n}" for n in range(1, options.rounds + 1)]
        #: the distribution judge's trials: that many calls on the first round's input (kictl.families.judges)
        self.trials = tolerance_for_trials(spec)
        if self.trials:
            self.round_labels = [f"trial {n}" for n in range(1, self.trials + 1)]
        iterations = counts[1]
        sets = options.input_sets if iterations is None else min(options.input_sets, iterations * counts[2])
        self.set_labels = [f"input set {n}" for n in range(max(1, sets))]
        logs = base / "logs"
        cpus = pinned_cpus(options.threads)
        self.kept = kept

        def make(label: str, digest: str) -> Any:
            if worker_factory is not None:
                return worker_factory(label)
            if kept is not None:  # an executor's long-lived workers: one per record, device and sandbox
                return kept.worker(label, digest, device, isolation, cpus, options.threads, say)
            return WorkerProcess(
                label,
                device,
                logs,
                isolation,
                cpus=cpus,
                threads=options.threads,
                progress=say,
                # kictl's reference workers time nothing; energy loops run without CUPTI's records (issue 31)
                cupti=not label.startswith("reference") and options.measure != "energy",
                keep_freed_memory=label.startswith("reference"),
                limits=None if options.worker_limits is None else parse_limits(options.worker_limits),
            )

        self.workers = {
            impl.record.digest: make(f"impl{n}", impl.record.digest) for n, impl in enumerate(implementations)
        }
        self.reference_worker = make("reference", definition.digest)
        #: every reference worker, the first one first (``reference_pool_size``)
        self.reference_workers = [self.reference_worker] + [
            make(f"reference{n}", definition.digest) for n in range(2, reference_pool_size(device) + 1)
        ]
        #: how many of them run: all, until a workload runs out of GPU memory with them (``workload``), then one
        #: for the rest of the session
        self.reference_pool = len(self.reference_workers)
        #: the inputs the definition's reference writes, as its calls showed (docs/bench.md, "Inputs the reference
        #: writes"): judged as outputs from the workload that showed them on
        self.writes: tuple[str, ...] = ()
        self.environments: dict[str, StoredRecord] = {}
        self.protocols: dict[str, StoredRecord] = {}
        self.report = BenchReport(definition=definition)
        #: the last workload whose runs all joined the report (``judge``)
        self.judged: StoredRecord | None = None
        #: the GPU timer, resolved from the first worker's Ready (CUPTI attached or not)
        self.timer_name: str | None = None
        self.nvml: Any = None
        #: when each worker (by label) was last spawned, for the progress lines
        self.started: dict[str, float] = {}
        #: energy (issue 31): the parent's NVML energy counter; EnvError (exit 5) where there is none
        self.energy = (
            EnergyPhase(
                device, clock_reading=self.clock_reading, loop_s=options.energy_loop_s, trials=options.energy_trials
            )
            if options.measure == "energy"
            else None
        )

    @property
    def all_workers(self) -> list[Any]:
        return [*self.reference_workers, *self.workers.values()]

    def spawn(self) -> None:
        """Start every worker that is not running, all at once (their imports overlap); ``wait_ready`` waits."""
        for worker in [*self.reference_workers[: self.reference_pool], *self.workers.values()]:
            if not worker.alive:
                self.say(f"worker {self.worker_name(worker)}: starting")
                worker.spawn()
                self.started[worker.label] = time.monotonic()

    def worker_name(self, worker: Any) -> str:
        for impl in self.implementations:
            if self.workers[impl.record.digest] is worker:
                return f"{worker.label} ({impl.name})"
        return f"{worker.label} (kictl's reference worker)"

    def wait_ready(self, worker: Any) -> dict[str, Any]:
        """The worker's environment once it is ready (started now if it is not running); says how long it took."""
        if not worker.alive:
            self.spawn()
        known = worker.environment is not None
        env: dict[str, Any] = worker.wait_ready()
        if not known:
            began = self.started.get(worker.label)
            took = f" after {time.monotonic() - began:.1f} s" if began is not None else ""
            self.say(f"worker {self.worker_name(worker)}: ready{took}")
        return env

    def open_device(self) -> None:
        """The parent's side of the device while the workers start: torch (to read outputs), NVML (clocks)."""
        torch_module()  # imported here, while the workers start, rather than at the first output

        if self.device.startswith("cuda"):
            try:
                self.nvml = Nvml(int(self.device.split(":")[1]) if ":" in self.device else 0)
            except EnvError as exc:
                self.report.warnings.append(f"clocks not recorded: {exc}")

    def close(self, keep: bool = False) -> None:
        """End every worker: all are asked at once, then each is waited for (their teardowns overlap).

        ``keep``: the session ended normally and its workers are kept (``KeptWorkers``) for the next one.
        """
        if keep and self.kept is not None:
            return
        workers = self.all_workers
        for worker in workers:
            worker.ask_to_stop()
        for worker in workers:
            worker.stop()

    def context(self, workload: StoredRecord) -> tuple[WorkloadContext, _Plans]:
        model = workload.model.spec
        assert isinstance(model, WorkloadSpec)
        axes = families.full_axes(self.spec, model.axes, source=f"workload {workload.name}")
        layout = [
            (name, families.tensor_shape(self.spec, name, axes), self.spec.outputs[name].dtype)
            for name in self.order.outputs
        ]
        read = self.registry.read_blob
        made = partial(self.entrypoint_inputs, workload.name)
        rounds = []
        for offset, label in enumerate(self.round_labels, start=1):
            offset, seeded = (1, "round 1") if self.trials else (offset, label)  # trials: one input, many calls
            plan = resolve_entrypoint(
                plan_inputs(self.spec, workload, self.order.inputs, read, offset=offset), axes, made
            )
            rounds.append((label, to_wire(with_secret_values(plan, self.secret, f"{workload.digest}:{seeded}"), label)))
        timed_structure = plan_inputs(self.spec, workload, self.order.inputs, read, offset=0)
        timed_structure = resolve_entrypoint(timed_structure, axes, made)
        setup = to_wire(with_secret_values(timed_structure, self.secret, f"{workload.digest}:setup"), "setup")
        timed = [
            to_wire(with_secret_values(timed_structure, self.secret, f"{workload.digest}:{label}"), label)
            for label in self.set_labels
        ]
        context = WorkloadContext(
            record=workload,
            names=[name for name, _, _ in layout],
            shapes=[shape for _, shape, _ in layout],
            dtypes=[dtype for _, _, dtype in layout],
            tolerance=tolerance_for(workload, self.options, self.spec),
            round_labels=list(self.round_labels),
            set_labels=list(self.set_labels),
            synthesized=timed_structure.synthesized,
            device=self.device,
            judge_inputs=partial(_judge_inputs, {"trials": rounds[0][1], "timed": setup}, self.device)
            if self.trials
            else None,
        )
        outputs = tuple(wire.OutputSpec(name=name, shape=tuple(shape), dtype=dtype) for name, shape, dtype in layout)
        written = self.written_specs(axes, setup)
        context.declared = len(outputs)
        for spec in written:  # judged as outputs are: compared with the reference's, in the rounds and the audits
            context.names.append(spec.name)
            context.shapes.append(spec.shape)
            context.dtypes.append(spec.dtype)
        return context, _Plans(rounds=rounds, setup=setup, timed=timed, outputs=outputs, written=written)

    def written_specs(self, axes: dict[str, int], setup: wire.Plan) -> tuple[wire.OutputSpec, ...]:
        """The inputs the reference writes (``writes``) as the wire names them; raises ``_Skip`` for one that
        kictl does not draw anew for every call (the parent stages, and reads back, only random inputs)."""
        kinds = {spec.name: spec.kind for spec in setup.inputs}
        for name in self.writes:
            if kinds.get(name) != "random":
                raise _Skip(
                    f"the definition's reference writes its input {name}, and kictl judges a written input only "
                    f"where the workload draws it at random (it is {kinds.get(name, 'missing')} here)"
                )
        specs = (
            wire.OutputSpec(
                name=name,
                shape=tuple(families.tensor_shape(self.spec, name, axes)),
                dtype=self.spec.inputs[name].dtype,
            )
            for name in self.writes
        )
        # an empty one holds nothing to compare, and a GPU worker places no empty tensor where the parent can read it
        return tuple(spec for spec in specs if math.prod(spec.shape) > 0)

    def entrypoint_inputs(
        self, workload: str, names: tuple[str, ...], axes: dict[str, int], seed: int
    ) -> dict[str, tuple[str, tuple[int, ...], bytes]]:
        """The definition's ``inputs_entrypoint`` called in kictl's reference worker (never an implementation's):
        ``f(seed, *axis values named by its parameters)``, its tensors by name.  The worker loads ``run`` again
        before its next reference call.  Raises ``_Skip`` when the entrypoint fails."""
        assert self.spec.inputs_entrypoint is not None
        worker = self.reference_worker
        plan, outputs = entrypoint_call(self.spec, names, axes, seed)
        load = dataclasses.replace(reference_load(self.spec), function=self.spec.inputs_entrypoint)
        try:
            self.wait_ready(worker)
            self.say(f"{workload}: inputs from {self.spec.inputs_entrypoint}() in kictl's reference worker")
            worker.loaded = False  # run() is loaded again before the next reference call
            worker.request(load, self.options.timeout_s, frozenset({wire.Loaded.TYPE}))
            answer = worker.request(
                wire.Reference(plan=plan, outputs=outputs, shift=0),
                self.options.timeout_s,
                frozenset({wire.Outputs.TYPE}),
            )
        except (ImplementationFailed, WorkerGone, wire.WireError) as exc:
            worker.stop()
            detail = getattr(exc, "detail", str(exc))
            raise _Skip(f"the definition's inputs entrypoint failed: {_last_line(detail)}") from None
        assert isinstance(answer, wire.Outputs)
        return {
            name: (item.dtype, tuple(item.shape), bytes(item.data))
            for name, item in zip(names, answer.tensors, strict=True)
        }

    def resolve_timer(self, worker: WorkerProcess) -> str:
        """The session's timer, once: CUPTI where the worker reports it attached, unless another was asked for.

        ``possible_timers`` lists what this can answer: keep the two in step.
        Raises ``EnvError`` for ``--timer cupti`` where CUPTI did not attach.
        """
        if self.timer_name is not None:
            return self.timer_name
        options = self.options
        rows = timers.choices(self.device, options.timer, options.cuda_graph, options.time_setup)
        served = [row for row in rows if not row.needs_cupti or row.name in worker.timers]
        if not served:
            raise EnvError(f"--timer {options.timer}: CUPTI did not attach ({worker.cupti_error or 'unknown reason'})")
        name = served[0].name
        if served[0] is not rows[0]:
            self.report.warnings.append(
                f"CUPTI did not attach ({worker.cupti_error or 'unknown reason'}): timing with CUDA events "
                "instead (the protocol records timer cuda_events); install the gpu extra for cupti-python"
            )
        self.timer_name = name
        return name

    def loop_options(self, env: dict[str, Any], worker: WorkerProcess) -> LoopOptions:
        """How ``worker``'s timed calls go (its timer resolved from what it reported: the reference workers,
        which time nothing, never decide it)."""
        warmup, iterations, trials = self.counts
        timer = self.resolve_timer(worker)
        return LoopOptions(
            warmup=warmup,
            iterations=iterations,
            trials=trials,
            target_relative_error=self.options.target_error if iterations is None else None,
            time_budget_s=(
                adaptive_budget(self.options) if iterations is None else fixed_count_budget(self.options, self.device)
            ),
            warmup_budget_s=warmup_budget(self.options, self.device, iterations),
            timer=timer,
            time_setup=self.options.time_setup,
            flush_bytes=flush_bytes(self.device, env["hardware"]),
            timeout_s=self.options.timeout_s,
        )

    def clock_reading(self) -> dict[str, Any] | None:
        """An NVML reading of the GPU (``None`` on the CPU or where NVML is missing or fails)."""
        if self.nvml is None:
            return None

        try:
            reading: dict[str, Any] = self.nvml.read().to_json()
        except EnvError:
            return None
        return reading

    def workload(self, workload: StoredRecord) -> None:
        """Run every implementation on one workload; a workload whose reference fails is skipped.

        A workload that runs out of GPU memory while kictl's reference workers run several at once (the
        reference's failure or an implementation's says so: ``out_of_memory``) is judged again from the start,
        once, with every worker started afresh and one reference worker, for the rest of the session too: the
        memory kictl's own workers held must not condemn an implementation, nor skip a workload. The first
        attempt leaves no record, and the second is judged as any: a worker that claims to run out of memory
        gains one more attempt of every implementation on that workload, no more.

        A workload whose reference writes an input kictl did not know it writes (``_Writes``: kictl's own reference
        worker says so) is judged again from the start too, with that input judged as an output for the rest of the
        session (``writes``; docs/bench.md, "Inputs the reference writes").
        """
        while True:  # ends: an attempt retried for memory leaves one reference worker; one for writes, more known
            retry = self.reference_pool > 1
            try:
                self._workload(workload, retry)
                return
            except _Skip as exc:
                if not (retry and out_of_memory(str(exc))):
                    self.report.skipped.append((workload.name, str(exc)))
                    return
                detail = str(exc)
            except _OutOfMemory as exc:
                detail = str(exc)
            except _Writes as exc:
                self.writes = (*self.writes, *exc.names)
                self.say(
                    f"{workload.name}: the reference writes its input(s) {exc}; again from the start, "
                    "with them judged as outputs"
                )
                self.restart()
                continue
            self.say(
                f"{workload.name}: out of GPU memory with {self.reference_pool} reference workers at once "
                f"({_last_line(detail)[:200]}); again from the start with one"
            )
            self.report.warnings.append(
                f"workload {workload.name} ran out of GPU memory with {self.reference_pool} reference workers "
                "at once: judged again from the start with one, as every later workload"
            )
            self.reference_pool = 1
            self.restart()

    def restart(self) -> None:
        """Every worker stopped (its memory back to the GPU); the next attempt starts them afresh."""
        for worker in self.all_workers:
            worker.ask_to_stop()
        for worker in self.all_workers:
            worker.stop()

    def _workload(self, workload: StoredRecord, retry: bool = False) -> None:
        """One attempt at ``workload`` (``_attempt``); however it ends, the parent then lets go of every worker's
        timed inputs (a GPU stager's CUDA IPC handles keep the worker's memory mapped in the parent: an attempt
        judged again from the start, its workers stopped, must give that memory back)."""
        drivers: list[tuple[LoadedImplementation, RunDriver, dict[str, Any]]] = []
        try:
            self._attempt(workload, retry, drivers)
        finally:
            for _, driver, _ in drivers:  # each one, whatever another's release raised; the attempt's own end stands
                with contextlib.suppress(Exception):
                    driver.release()

    def _attempt(
        self,
        workload: StoredRecord,
        retry: bool,
        drivers: list[tuple[LoadedImplementation, RunDriver, dict[str, Any]]],
    ) -> None:
        phase = self.clock.phase
        with phase("inputs"):
            context, plans = self.context(workload)
        with phase("start"):
            self.spawn()  # a worker ended by an earlier workload's failure starts again, with the others
        for impl in self.implementations:
            worker = self.workers[impl.record.digest]
            with phase("start"):
                env = self.wait_ready(worker)
            driver = RunDriver(
                worker,
                impl.load_message(self.constants),
                plans.rounds,
                plans.setup,
                plans.timed,
                plans.outputs,
                self.loop_options(env, worker),
                progress=self.say,
                label=f"{workload.name}: {impl.name}",
                written=plans.written,
            )
            driver.evidence.stream_rule = stream_rule(self.timer_name, worker.dependencies_error)
            drivers.append((impl, driver, env))
            with phase("import"):  # pings, then the import is sent: it runs while the next workers start
                _guarded(driver, driver.begin)
        with phase("start"):
            if self.reference_worker.alive:
                self.wait_ready(self.reference_worker)
        with phase("prepare"):
            refs = self._prepare(workload, context, plans, [driver for _, driver, _ in drivers])
        before = self.clock_reading()
        # audited outputs are judged as soon as they hold ``audits.PENDING_BYTES``: the parent holds a bounded
        # number of them, whatever the number of calls audited (issue 40)
        pending = audits.Pending(wire.outputs_limit(plans.outputs) // 2)
        skipped: list[_Skip] = []  # the reference failed judging audits between calls: the workload is skipped
        step = partial(self._step, pending, skipped, context, plans, [driver for _, driver, _ in drivers])
        if TIMED_IN_BLOCKS_ON_CPU or self.device != "cpu":
            # one implementation after another, each its warm-up and then its timed calls: a small kernel's
            # figure moves with what ran on the device just before it (RESULTS.md, "What moves a small kernel's
            # figure"), so calls taking turns would make it depend on the session's other implementations
            for _, driver, _ in drivers:
                with phase("warmup"):
                    _guarded(driver, driver.warm)
                self.say(f"{driver.label}: timed calls")
                with phase("timed"):
                    while driver.active:
                        step(driver, ())
        else:
            with phase("warmup"):
                for _, driver, _ in drivers:  # one at a time: the warm-up calls set each timer's device spin
                    _guarded(driver, driver.warm)
            self.say(f"{workload.name}: timed calls, interleaved")
            with phase("timed"):
                running = [driver for _, driver, _ in drivers]
                while any(driver.active for driver in running):
                    for driver in running:
                        if driver.active:
                            step(driver, [other.worker for other in running if other is not driver])
        if self.energy is not None:  # energy (issue 31): after the timed calls, each worker still armed
            with phase("energy"):
                for _, driver, _ in drivers:
                    _guarded(driver, partial(self.energy.measure, driver))
        after = self.clock_reading()
        for _, driver, _ in drivers:
            driver.evidence.clocks = [reading for reading in (before, after) if reading is not None]
        with phase("finish"):
            for _, driver, _ in drivers:  # asked all at once: each worker checks its inputs and collects meanwhile
                _guarded(driver, driver.finish_send)
            for _, driver, _ in drivers:
                _guarded(driver, driver.finish_take)
        if skipped:
            raise skipped[0]
        if retry:
            for _, driver, _ in drivers:
                failure = driver.evidence.failure
                if failure is not None and failure[0] == "runtime_error" and out_of_memory(failure[1]):
                    raise _OutOfMemory(f"{driver.label}: {failure[1]}")
        wanted = self._waiting(context, plans, [driver for _, driver, _ in drivers])
        with phase("reference"):
            refs.update(self._audit_references(context, plans, wanted, [driver for _, driver, _ in drivers]))
        self.say(f"{workload.name}: judging the runs, building the records")
        with phase("records"):
            self.judge(workload, drivers, context, refs)
        for impl, driver, _ in drivers:
            tallies = self.report.requests.setdefault(impl.name, {})
            for kind, (count, ns) in driver.requests.items():
                tally = tallies.setdefault(kind, [0, 0])
                tally[0] += count
                tally[1] += ns

    def _step(
        self,
        pending: audits.Pending,
        skipped: list[_Skip],
        context: WorkloadContext,
        plans: _Plans,
        drivers: list[RunDriver],
        driver: RunDriver,
        neighbours: Sequence[WorkerProcess],
    ) -> None:
        """One timed call of ``driver`` (``RunDriver.step``); an audit it added joins ``pending``, and once those
        hold ``audits.PENDING_BYTES`` every waiting audit of the workload is judged now (``_judge_waiting``)."""
        count = len(driver.evidence.audits)
        _guarded(driver, partial(driver.step, neighbours))
        for *_, outputs in driver.evidence.audits[count:]:
            if not isinstance(outputs, audits.AuditFinding):
                pending.add(outputs)
        if pending.full():
            pending.clear()
            try:
                self._judge_waiting(context, plans, drivers)
            except _Skip as exc:  # every timed loop ends; the workload is skipped once the workers are done
                skipped.append(exc)
                for each in drivers:
                    each.active = False

    def _waiting(
        self, context: WorkloadContext, plans: _Plans, drivers: list[RunDriver]
    ) -> list[tuple[str, wire.Plan, int, int]]:
        """The inputs (label, plan, shift, perturbation) of the audited calls whose outputs wait for the
        reference's, each once."""
        audited: dict[str, tuple[wire.Plan, int, int]] = {}
        for driver in drivers:
            for index, chosen, shift, outputs in driver.evidence.audits:
                if isinstance(outputs, list):
                    perturb = driver.evidence.probes.get(index, 0)
                    label = audit_label(context.set_labels[chosen], shift, perturb)
                    audited[label] = (plans.timed[chosen], shift, perturb)
        return [(label, plan, shift, perturb) for label, (plan, shift, perturb) in sorted(audited.items())]

    def _judge_waiting(self, context: WorkloadContext, plans: _Plans, drivers: list[RunDriver]) -> None:
        """The reference's outputs for every audited call still waiting, each call's judged against them
        (``verdict.audit_finding``) and its tensors dropped: between two timed calls, none of them running.

        Raises ``_Skip`` when the reference fails."""
        wanted = self._waiting(context, plans, drivers)
        if not wanted:
            return
        self.say(f"{context.record.name}: judging {len(wanted)} audited call(s) as they came")
        refs = self.reference_outputs(context, plans, wanted)
        for driver in drivers:
            evidence = driver.evidence
            for position, (index, chosen, shift, outputs) in enumerate(evidence.audits):
                label = audit_label(context.set_labels[chosen], shift, evidence.probes.get(index, 0))
                if isinstance(outputs, list) and label in refs:
                    try:
                        found = audit_finding(context, f"timed call {index}", outputs, refs[label])
                    except Exception as exc:  # kictl's own failure is this run's alone (as in ``_guarded``)
                        detail = f"kictl could not judge this run: {type(exc).__name__}: {exc}"
                        driver.evidence.failure = driver.evidence.failure or ("runtime_error", detail)
                        continue
                    evidence.audits[position] = (index, chosen, shift, found)

    def judge(
        self,
        workload: StoredRecord,
        drivers: list[tuple[LoadedImplementation, RunDriver, dict[str, Any]]],
        context: WorkloadContext,
        refs: dict[str, list[Any]],
    ) -> None:
        """Every run of a workload judged and its record built; the workload and its runs join the report."""
        summaries = [self.record_run(impl, driver, env, context, refs) for impl, driver, env in drivers]
        speedups(summaries, self.implementations)
        self.report.records.append(workload)
        self.report.runs.extend(summaries)
        self.judged = workload  # its runs are all in the report: an interrupt from here on keeps them
        done = ", ".join(f"{summary.implementation} {summary.status}" for summary in summaries)
        self.say(f"{workload.name}: done ({done})")

    def _prepare(
        self, workload: StoredRecord, context: WorkloadContext, plans: _Plans, drivers: list[RunDriver]
    ) -> dict[str, list[Any]]:
        """The reference's outputs for the rounds (here) while every implementation's correctness rounds and
        ``setup()`` run (on a GPU, a thread per driver): none of it is timed, and each thread talks to its
        own worker.

        Raises ``_Skip`` when the reference fails (after the drivers are done) and ``EnvError`` from a driver.
        """
        if self.device == "cpu" and not OVERLAP_PREPARE_ON_CPU:
            # every worker is pinned to the same CPU (the one the timed calls run on): nothing would overlap,
            # and each request would only wait longer for the shared core (--timeout counts per request)
            refs = self.reference_outputs(context, plans, [(label, plan, 0, 0) for label, plan in plans.rounds])
            for driver in drivers:
                _guarded(driver, driver.prepare)
            return refs
        with ThreadPoolExecutor(max_workers=max(1, len(drivers)), thread_name_prefix="kictl-prepare") as pool:
            futures = [pool.submit(_guarded, driver, driver.prepare) for driver in drivers]
            try:
                refs = self.reference_outputs(context, plans, [(label, plan, 0, 0) for label, plan in plans.rounds])
            finally:
                errors = [future.exception() for future in futures]
        for error in errors:
            if error is not None:
                raise error
        return refs

    def _audit_references(
        self,
        context: WorkloadContext,
        plans: _Plans,
        wanted: list[tuple[str, wire.Plan, int, int]],
        drivers: list[RunDriver],
    ) -> dict[str, list[Any]]:
        """The reference's outputs for the audited calls, while the implementations' workers are held idle.

        The idle window of every driver opens at once and lasts ``IDLE_WINDOW_S``; the reference works
        meanwhile in a thread of its own (its worker is another process: its CPU time is not theirs).
        Raises ``_Skip`` when the reference fails.
        """
        for driver in drivers:
            driver.idle_begin()
        opened = time.monotonic()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kictl-reference") as pool:
            future = pool.submit(self.reference_outputs, context, plans, wanted)
            time.sleep(max(0.0, IDLE_WINDOW_S - (time.monotonic() - opened)))
            for driver in drivers:
                _guarded(driver, driver.idle_end)
            return future.result()

    def record_run(
        self,
        impl: LoadedImplementation,
        driver: RunDriver,
        env: dict[str, Any],
        context: WorkloadContext,
        refs: dict[str, list[Any]],
    ) -> RunSummary:
        """The run's record, built in a guard of its own: a run kictl cannot judge is recorded as such."""
        env_record = self.environment(env)
        protocol = self.protocol(context, env)
        workload = context.record
        if self.device != "cpu":
            context.floor_ns, context.floor_text = _floor(self.spec, workload, env, self.registry)
        else:
            context.floor_ns, context.floor_text = None, "no datasheet floor for a CPU"
        try:
            members = evaluate(driver.evidence, context, refs, self.options.statistic, self.options.rounds)
            if self.energy is not None:  # energy (issue 31): the figure, its bounds and checks
                members = self.energy.judge(members, driver, energy_work(self.spec, workload, self.registry))
            return build_run(
                members, impl, workload, self.definition, protocol, env_record, context.synthesized, self.secret
            )
        except Exception as exc:  # a run kictl could not judge still gets its record
            detail = wire.clean_text(f"kictl could not judge this run: {type(exc).__name__}: {exc}", 2000)
            members = {"status": "runtime_error", "statusDetail": detail}
            return build_run(
                members, impl, workload, self.definition, protocol, env_record, context.synthesized, self.secret
            )

    def reference_outputs(
        self, context: WorkloadContext, plans: _Plans, wanted: Sequence[tuple[str, wire.Plan, int, int]]
    ) -> dict[str, list[Any]]:
        """The definition's reference on the ``wanted`` inputs (label, plan, shift, perturbation seed), from
        kictl's own workers: ``wanted`` in consecutive shares, one per reference worker, each in a thread of its
        own (consecutive labels share an input set, which a worker then makes once).

        Raises ``_Skip`` when the reference fails (after every share is done).
        """
        same: dict[str, str] = {}  # a label whose call is another's (the same inputs): computed once
        first: dict[Any, str] = {}
        for label, plan, shift, perturb in wanted:
            same[label] = first.setdefault((plan.inputs, shift, perturb), label)
        if len(first) < len(wanted):
            unique = [item for item in wanted if same[item[0]] == item[0]]
            found = self.reference_outputs(context, plans, unique)
            return {label: found[same[label]] for label, _, _, _ in wanted}
        count = min(self.reference_pool, len(wanted))
        if count <= 1:
            return self._reference_share(self.reference_worker, context, plans, wanted)
        shares = [list(wanted[n * len(wanted) // count : (n + 1) * len(wanted) // count]) for n in range(count)]
        with ThreadPoolExecutor(max_workers=count, thread_name_prefix="kictl-reference") as pool:
            futures = [
                pool.submit(self._reference_share, worker, context, plans, share)
                for worker, share in zip(self.reference_workers, shares, strict=False)
            ]
            errors = [future.exception() for future in futures]
        for error in errors:
            if error is not None:
                raise error
        outputs: dict[str, list[Any]] = {}
        for future in futures:
            outputs.update(future.result())
        return outputs

    def _reference_share(
        self,
        worker: Any,
        context: WorkloadContext,
        plans: _Plans,
        wanted: Sequence[tuple[str, wire.Plan, int, int]],
    ) -> dict[str, list[Any]]:
        """One reference worker's share of ``reference_outputs``; raises ``_Skip`` when the reference fails."""
        name = context.record.name
        outputs: dict[str, list[Any]] = {}
        try:
            if not worker.alive or not worker.loaded:
                self.wait_ready(worker)
                self.say(f"{name}: reference: import")
                worker.request(reference_load(self.spec), self.options.timeout_s, frozenset({wire.Loaded.TYPE}))
                worker.loaded = True
            if wanted and all(shift for _, _, shift, _ in wanted):
                self.say(f"{name}: reference outputs for {len(wanted)} audited call(s) ({worker.label})")
            for label, plan, shift, perturb in wanted:
                if not shift:
                    self.say(f"{name}: reference outputs, {label}")
                answer = worker.request(
                    wire.Reference(
                        plan=plan, outputs=plans.outputs, shift=shift, perturb=perturb, written=plans.written
                    ),
                    self.options.timeout_s,
                    frozenset({wire.Outputs.TYPE}),
                )
                assert isinstance(answer, wire.Outputs)
                new = [name for name in answer.written if name not in self.writes]
                if new:
                    raise _Writes(new)
                outputs[label] = [unpack(item) for item in answer.tensors]
        except (ImplementationFailed, WorkerGone, wire.WireError) as exc:
            worker.stop()
            kind = getattr(exc, "status", None) or getattr(exc, "kind", "protocol")
            detail = getattr(exc, "detail", str(exc))
            raise _Skip(f"the definition's reference failed ({kind}): {_last_line(detail)}") from None
        return outputs

    def environment(self, env: dict[str, Any]) -> StoredRecord:
        key = canon.sha256_hex(canon.canonical_bytes(env))
        if key not in self.environments:
            self.environments[key] = environment_record(env)
        return self.environments[key]

    def protocol(self, context: WorkloadContext, env: dict[str, Any]) -> StoredRecord:
        spec = protocol_spec(
            self.device,
            self.counts,
            self.options,
            context.tolerance,
            flush_bytes(self.device, env["hardware"]),
            self.isolation.label,
            len(self.set_labels),
            self.timer_name,
            default_tolerance(context.record, self.options, self.spec),
            context.names[context.declared :] if context.declared is not None else (),
        )
        if self.energy is not None:  # energy (issue 31): its own family, the method in the measurement
            spec = self.energy.protocol(spec)
        key = canon.sha256_hex(canon.canonical_bytes(spec))
        if key not in self.protocols:
            self.protocols[key] = protocol_record(spec)
        return self.protocols[key]


def tolerance_for_trials(spec: DefinitionSpec) -> int | None:
    """The trials of the definition's distribution judge (stated, else its family's), or None."""
    stated = spec.tolerance
    family = judges.contract(spec) or {}
    judge = (stated.judge if stated and stated.judge else None) or family.get("judge")
    if judge != judges.DISTRIBUTION:
        return None
    return (stated.trials if stated else None) or family.get("trials") or judges.DEFAULT_TRIALS


def _judge_inputs(plans: dict[str, wire.Plan], device: str, which: str) -> dict[str, Any]:
    """The inputs of ``plans[which]`` as the workers make them on ``device``, by name on the CPU (for a judge);
    made once per plan.  Empty for the timed calls when they have random inputs (an audited call's are rolled:
    kictl does not remake them)."""
    plan = plans[which]
    if which == "timed" and any(spec.kind == "random" for spec in plan.inputs):
        return {}
    cached = _JUDGE_INPUTS.get(id(plan))
    if cached is not None and cached[0] is plan:
        return cached[1]
    made = materialize_plans([plan], device)[0]
    found = {
        spec.name: value.cpu() if hasattr(value, "cpu") else value
        for spec, value in zip(plan.inputs, made, strict=True)
    }
    if len(_JUDGE_INPUTS) > 4:
        _JUDGE_INPUTS.clear()  # a workload's two plans at a time
    _JUDGE_INPUTS[id(plan)] = (plan, found)
    return found


_JUDGE_INPUTS: dict[int, tuple[wire.Plan, dict[str, Any]]] = {}


def reference_pool_size(device: str) -> int:
    """How many reference workers a session on ``device`` runs: ``$KICTL_REFERENCE_WORKERS`` where set (a
    resource, like a thread count: it changes no figure and no record), else ``REFERENCE_WORKERS_ON_GPU`` on a
    GPU (at most one per 4 CPUs) and ``REFERENCE_WORKERS_ON_CPU`` on the CPU.

    Raises ``UsageError`` for a value that is not a whole number from 1 to 64.
    """
    given = os.environ.get("KICTL_REFERENCE_WORKERS", "").strip()
    if given:
        if not given.isdigit() or not 1 <= int(given) <= 64:
            raise UsageError(f"KICTL_REFERENCE_WORKERS={given!r}: expected a whole number from 1 to 64")
        return int(given)
    if device == "cpu":
        return max(1, REFERENCE_WORKERS_ON_CPU)
    return max(1, min(REFERENCE_WORKERS_ON_GPU, usable_cpus() // 4))


def stream_rule(timer_name: str | None, dependencies_error: str | None) -> str | None:
    """How ``streamOrdered`` is judged for a timer (said in the check's detail); ``None`` off the CUPTI timer."""
    if timer_name != "cupti_device_time":
        return None
    if dependencies_error is None:
        return (
            "judged by CUDA's ordering from CUPTI's records (event records, stream waits, host synchronisations): "
            "work on other streams started after the call's inputs were ready and was waited for before its end"
        )
    return f"judged by time alone (CUPTI's dependency records could not be collected: {dependencies_error})"


def possible_timers(options: BenchOptions, device: str) -> tuple[str, ...]:
    """The timers a session of ``options`` on ``device`` may resolve (``_Session.resolve_timer``'s answers).

    More than one only where CUPTI is the default on CUDA: a worker where it does not attach times with CUDA
    events and says so.  Executors use this to recognise the protocol a job's run may name.
    """
    return tuple(row.name for row in timers.choices(device, options.timer, options.cuda_graph, options.time_setup))


class KeptWorkers:
    """Sandboxed workers kept alive from one session to the next, e.g. by an executor's worker for its device.

    One worker per (implementation or definition digest, device, isolation,
    CPUs, threads): a job of the same implementation on the same device finds
    its worker started and its sources imported (JIT caches warm), exactly
    as the workloads of one session do.  A worker that failed was stopped by
    its session and starts afresh.  ``close`` ends them all.
    """

    def __init__(self, base: Path | None = None) -> None:
        self._scratch = tempfile.TemporaryDirectory(prefix="kictl-workers-") if base is None else None
        self.base = Path(self._scratch.name) if self._scratch is not None else Path(str(base))
        self._workers: dict[tuple[Any, ...], WorkerProcess] = {}

    def worker(
        self,
        label: str,
        digest: str,
        device: str,
        isolation: sandbox.Isolation,
        cpus: tuple[int, ...],
        threads: int,
        progress: ProgressCallback,
    ) -> WorkerProcess:
        # an implementation's worker by its digest alone; kictl's reference workers by label too (there may be several)
        key = (label if label.startswith("reference") else "", digest, device, isolation, cpus, threads)
        found = self._workers.get(key)
        if found is None:
            logs = self.base / f"w{len(self._workers)}" / "logs"
            found = WorkerProcess(
                label,
                device,
                logs,
                isolation,
                cpus=cpus,
                threads=threads,
                progress=progress,
                cupti=not label.startswith("reference"),
                keep_freed_memory=label.startswith("reference"),
            )
            self._workers[key] = found
        found.progress = progress  # its label stays the first one: its log files are named after it
        return found

    def workers(self) -> list[WorkerProcess]:
        """The kept workers, in the order they were first asked for."""
        return list(self._workers.values())

    def close(self) -> None:
        """End every kept worker (asked all at once) and remove their logs."""
        workers = list(self._workers.values())
        self._workers.clear()
        for worker in workers:
            worker.ask_to_stop()
        for worker in workers:
            worker.stop()
        if self._scratch is not None:
            self._scratch.cleanup()


@dataclass(frozen=True)
class _Plans:
    """One workload's inputs as the wire carries them."""

    rounds: list[tuple[str, wire.Plan]]
    setup: wire.Plan
    timed: list[wire.Plan]
    outputs: tuple[wire.OutputSpec, ...]
    #: the inputs the reference writes, judged as outputs (``_Session.writes``)
    written: tuple[wire.OutputSpec, ...] = ()


def _guarded(driver: RunDriver, step: Callable[[], None]) -> None:
    """One phase of a driver; kictl's own failure there is recorded against this run only."""
    try:
        step()
    except EnvError:
        raise
    except Exception as exc:
        driver.fail("runtime_error", f"kictl could not run this implementation: {type(exc).__name__}: {exc}")


def _last_line(text: str | None) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no detail"


def _session(session: _Session, workloads: list[StoredRecord], began: float) -> BenchReport:
    """Every workload in turn (``began``: the bench's start on the monotonic clock, for ``--stop-after``)."""
    finished = False
    stop_after = session.options.stop_after_s
    report = session.report
    try:
        for done, workload in enumerate(workloads):
            elapsed = time.monotonic() - began
            if done and stop_after is not None and elapsed >= stop_after:
                # between workloads only: each run is whole, and the workloads done keep their records
                report.left = [item.name for item in workloads[done:]]
                report.warnings.append(
                    f"stopped after {elapsed:.0f} s (--stop-after {stop_after:g}): {done} of "
                    f"{len(workloads)} workload(s) measured; not started: {', '.join(report.left)}"
                )
                break
            held = len(report.records), len(report.runs)
            try:
                session.workload(workload)
            except KeyboardInterrupt:
                # Ctrl-C, or a SIGTERM (kictl bench turns it into one): a workload whose runs had all joined the
                # report (``_Session.judge``) is done; one still running keeps nothing, not even a workload record
                # its runs never joined.  The workers are stopped below, not kept.
                if session.judged is workload:
                    done += 1
                else:
                    del report.records[held[0] :], report.runs[held[1] :]
                report.interrupted = True
                report.left = [item.name for item in workloads[done:]]
                report.warnings.append(
                    f"interrupted after {time.monotonic() - began:.0f} s: {done} of {len(workloads)} workload(s) "
                    f"measured; not finished: {', '.join(report.left)}"
                )
                break
        finished = not report.interrupted
    finally:
        with session.clock.phase("stop"):
            session.close(keep=finished)
    report.phases = session.clock.report()
    report.records = [
        session.definition,
        *(impl.record for impl in session.implementations),
        *report.records,
        *session.protocols.values(),
        *session.environments.values(),
        *(run.run for run in report.runs if run.run is not None),
    ]
    return report


__all__ = [
    "BenchOptions",
    "BenchReport",
    "KeptWorkers",
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
