"""Running a bench's jobs on many devices and many machines (DESIGN §12).

``run_bench_jobs`` is the one call ``kictl bench`` (and ``kictl rerun``) make
for ``--devices``, ``--shard``, ``--executor``, ``--ray-address`` and
``--skip-existing``: it plans the jobs (``jobs.plan_jobs``), keeps the
chosen slice (``jobs.shard``), starts the executor (``local.LocalPool``: one
long-lived worker per local device; ``ray_executor.RayExecutor``: one Ray
actor per device of a cluster), drops the jobs already done in the
registry for the workers' environments, runs the rest and returns a
``BenchReport`` like a plain ``run_bench`` does, so the command renders and
writes it the same way.  The driver checks every record that comes back
(``base.check_result``) before it is in the report; workers never hold keys.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kictl.bench.judge.results import BenchReport, RunSummary
from kictl.bench.judge.session import BenchOptions, resolve_device
from kictl.errors import UsageError
from kictl.executors import seam
from kictl.executors.base import DeviceFailure, Executor, JobResult
from kictl.executors.jobs import (
    BenchSettings,
    Job,
    JobPayload,
    JobPlan,
    largest_first,
    parse_shard,
    plan_jobs,
    shard,
    skip_existing,
)
from kictl.executors.local import LocalPool, parse_devices
from kictl.executors.ray_executor import RayExecutor
from kictl.executors.seam import settings_of
from kictl.records import BenchmarkRun, StoredRecord
from kictl.store.registry import Registry

EXECUTORS = ("local", "ray")

ProgressCallback = Callable[[str], None]


def settings_from(options: BenchOptions, device_kind: str) -> BenchSettings:
    """The job-identity settings of ``kictl bench`` options on devices of ``device_kind``."""
    return settings_of(options, device_kind)


@dataclass
class JobsOutcome:
    """What happened beyond the records: the plan's size, the slice, what was skipped, failures."""

    planned: int = 0
    in_shard: int = 0
    already_done: int = 0
    results: list[JobResult] = field(default_factory=list)
    device_failures: list[DeviceFailure] = field(default_factory=list)
    workers: dict[str, str] = field(default_factory=dict)  # slot -> GPU product or CPU model
    startup_s: float = 0.0  # wall seconds to start the executor's workers
    run_s: float = 0.0  # wall seconds from the first job handed out to the last answer


def make_executor(
    executor: str,
    device_kind: str,
    *,
    devices: Sequence[str] = (),
    ray_address: str | None = None,
    ray_workers: int | None = None,
    accelerator_type: str | None = None,
) -> Executor:
    """A ``LocalPool`` over ``devices`` or a ``RayExecutor``; raises ``UsageError`` for an unknown executor."""
    if executor == "local":
        return LocalPool(list(devices))
    if executor == "ray":
        return RayExecutor(ray_address, device_kind=device_kind, workers=ray_workers, accelerator_type=accelerator_type)
    raise UsageError(f"--executor {executor!r}: expected one of {', '.join(EXECUTORS)}")


def run_bench_jobs(
    registry: Registry,
    definition_ref: str,
    implementation_refs: Sequence[str],
    options: BenchOptions,
    *,
    devices: str | None = None,
    shard_text: str | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    ray_workers: int | None = None,
    accelerator_type: str | None = None,
    skip_done: bool = False,
    progress: ProgressCallback | None = None,
    workdir: Path | None = None,
) -> tuple[BenchReport, JobsOutcome]:
    """Plan, slice, skip and run a bench's jobs on an executor; the report ``kictl bench`` renders.

    ``devices`` is ``--devices`` (local executor; default: the one
    ``options.device``); with ``--executor ray`` the device kind is
    ``options.device`` (``cpu``, else CUDA) and ``ray_workers`` actors start
    (default: one per GPU, or per CPU, of the cluster).  Jobs whose workload
    could not be judged, or whose worker failed twice, are in the report's
    ``skipped`` list.

    Raises ``UsageError`` for bad options, ``NotFoundError`` for unknown
    names, ``RecordError`` for invalid implementations, ``EnvError`` when no
    worker can start or Ray is missing.
    """
    say = progress or (lambda _text: None)
    if executor not in EXECUTORS:
        raise UsageError(f"--executor {executor!r}: expected one of {', '.join(EXECUTORS)}")
    if executor == "ray" and devices is not None:
        raise UsageError("--devices chooses local GPUs; with --executor ray, Ray places one actor per GPU")
    if executor == "local" and (ray_address is not None or ray_workers is not None or accelerator_type is not None):
        raise UsageError("--ray-address and the Ray options need --executor ray")
    index_count = parse_shard(shard_text) if shard_text is not None else None
    if executor == "local":
        if devices is not None:
            device_list = parse_devices(devices, options.device)
        else:
            device_list = [resolve_device(options.device)]
        kind = seam.device_kind(device_list[0])
    else:
        device_list = []
        kind = "cpu" if options.device.strip().lower() == "cpu" else "cuda"
    settings = settings_from(options, kind)
    seam.check_settings(settings)
    scratch = tempfile.TemporaryDirectory(prefix="kictl-jobs-") if workdir is None else None
    base = Path(scratch.name) if scratch is not None else workdir
    assert base is not None
    try:
        plan = plan_jobs(
            registry, definition_ref, implementation_refs, settings, workloads=options.workloads, workdir=base
        )
    finally:
        if scratch is not None:
            scratch.cleanup()
    outcome = JobsOutcome(planned=len(plan.jobs))
    jobs = shard(plan.jobs, *index_count) if index_count is not None else list(plan.jobs)
    outcome.in_shard = len(jobs)
    if jobs:
        begun = time.perf_counter()
        with make_executor(
            executor,
            kind,
            devices=device_list,
            ray_address=ray_address,
            ray_workers=ray_workers,
            accelerator_type=accelerator_type,
        ) as pool:
            outcome.startup_s = time.perf_counter() - begun
            outcome.workers = {slot: str(env["hardware"].get("product")) for slot, env in pool.environments.items()}
            say(f"{len(outcome.workers)} worker(s): " + ", ".join(f"{s} {p}" for s, p in outcome.workers.items()))
            if skip_done:
                before = len(jobs)
                context = pool.context(next(iter(pool.environments)))
                jobs = skip_existing(jobs, registry, plan, pool.environments.values(), context)
                outcome.already_done = before - len(jobs)
            total = len(jobs)

            def on_result(result: JobResult) -> None:
                outcome.results.append(result)
                status = result.run.raw["spec"]["status"] if result.run is not None else "no run"
                say(f"[{len(outcome.results)}/{total}] {plan.label(result.job)}: {status} on {result.worker}")

            def on_failure(failure: DeviceFailure) -> None:
                outcome.device_failures.append(failure)
                say(f"worker {failure.worker} failed: {failure.detail.splitlines()[0][:200] if failure.detail else ''}")

            begun = time.perf_counter()
            pool.run(plan, largest_first(plan, jobs), on_result, on_failure)
            outcome.run_s = time.perf_counter() - begun
    return report_of(plan, outcome), outcome


def report_of(plan: JobPlan, outcome: JobsOutcome) -> BenchReport:
    """The ``BenchReport`` of finished jobs, in the plan's order (as a plain ``run_bench`` orders them)."""
    order = {job.job_id: number for number, job in enumerate(plan.jobs)}
    results = sorted(outcome.results, key=lambda result: order[result.job.job_id])
    report = BenchReport(definition=plan.definition)
    summaries: list[RunSummary] = []
    extra: dict[str, StoredRecord] = {}
    for result in results:
        workload = plan.records[result.job.workload_digest]
        run = result.run
        if run is None:
            impl = plan.records[result.job.implementation_digest]
            report.skipped.append((workload.name, f"{impl.name}: {result.error or 'no run'}"))
            continue
        summaries.append(_summary(run, plan))
        for record in result.records:
            if record.kind in ("BenchmarkProtocol", "ExecutionEnvironment"):
                extra.setdefault(record.digest, record)
    _speedups(summaries, plan)
    report.runs = summaries
    used_workloads = {plan.records[r.job.workload_digest].digest for r in results if r.run is not None}
    used_impls = {r.job.implementation_digest for r in results if r.run is not None}
    ordered: list[StoredRecord] = [plan.definition]
    ordered += [record for digest, record in plan.records.items() if digest in used_impls]
    ordered += [record for digest, record in plan.records.items() if digest in used_workloads]
    ordered += [record for record in extra.values() if record.kind == "BenchmarkProtocol"]
    ordered += [record for record in extra.values() if record.kind == "ExecutionEnvironment"]
    ordered += [summary.run for summary in summaries if summary.run is not None]
    report.records = ordered
    return report


def _summary(run: StoredRecord, plan: JobPlan) -> RunSummary:
    assert isinstance(run.model, BenchmarkRun)
    spec = run.model.spec
    return RunSummary.from_spec(
        plan.records[spec.implementation_digest].name, plan.records[spec.workload_digest].name, spec, run
    )


def _speedups(summaries: list[RunSummary], plan: JobPlan) -> None:
    """Speed-up over the reference's run of the same workload, where it passed."""
    baseline: dict[str, int] = {}
    for summary in summaries:
        assert summary.run is not None
        impl = summary.run.raw["spec"]["implementationDigest"]
        if impl in plan.reference_digests and summary.status == "passed" and summary.latency_ns:
            baseline[summary.workload_digest] = summary.latency_ns
    for summary in summaries:
        reference = baseline.get(summary.workload_digest)
        if reference and summary.status == "passed" and summary.latency_ns:
            summary.speedup = reference / summary.latency_ns


__all__ = [
    "EXECUTORS",
    "BenchSettings",
    "DeviceFailure",
    "Executor",
    "Job",
    "JobPayload",
    "JobPlan",
    "JobResult",
    "JobsOutcome",
    "make_executor",
    "parse_shard",
    "plan_jobs",
    "report_of",
    "run_bench_jobs",
    "settings_from",
    "shard",
    "skip_existing",
]
