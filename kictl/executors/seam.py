"""The one seam between the executors and the bench machinery.

Everything the executors need from ``kictl.bench`` goes through this module,
so that a change to the bench's worker protocol is met here and nowhere else:

* ``run_job(payload, device)``: run ONE job (one implementation on one
  workload) on one device and return the records it produced, as JSON values.
  Today it writes the job's three records (and blobs) into a scratch registry
  and calls ``kictl.bench.judge.session.run_bench`` for exactly that pair, so the
  worker, timer, sandbox and checks are those of a plain ``kictl bench``:
  measurement integrity does not depend on the executor.  The sandboxed bench
  workers (the implementation's and kictl's reference worker) are kept from
  one job to the next in this process (``kept_workers``), as one session keeps
  them from one workload to the next: nothing is imported twice.  Re-point it at the
  bench's own single-job entry point when there is one; its contract is
  "payload in, record dicts out, ``JobSkipped`` when the workload cannot be
  judged, ``EnvError`` when the device cannot be used".
* ``resolve``: the definition, workloads and implementations a bench names.
* ``capture_environment`` and ``protocol_context``: what a worker reports
  about its device and its machine at start (the context holds whatever the
  protocol record takes from the machine rather than from the settings:
  nothing today; the sandbox's isolation once the bench records it).
* ``expected_protocols`` / ``environment_digest``: what a run of a job
  in an environment would name, for ``--skip-existing`` and for the driver's
  check of what comes back.
"""

from __future__ import annotations

import atexit
import dataclasses
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kictl.bench.judge import sandbox
from kictl.bench.judge.implementation import load_implementation
from kictl.bench.judge.options import check_options, flush_bytes
from kictl.bench.judge.results import environment_record, protocol_record, protocol_spec
from kictl.bench.judge.session import (
    BenchOptions,
    KeptWorkers,
    default_tolerance,
    possible_timers,
    resolve_device,
    run_bench,
    select_workloads,
    tolerance_for,
)
from kictl.bench.worker.environment import capture
from kictl.definitions import signature
from kictl.errors import KictlError, RecordError, UsageError
from kictl.executors.payload import BenchSettings, JobPayload
from kictl.families.gpus import normalize_product
from kictl.records import DefinitionSpec, StoredRecord
from kictl.store.registry import Registry


class JobSkipped(KictlError):
    """The job's workload cannot be judged (the definition's reference, or kictl's worker, failed): no run."""


def options_for(settings: BenchSettings, device: str, workloads: Sequence[str] = ()) -> BenchOptions:
    """The ``BenchOptions`` of ``settings`` on ``device``.

    Raises ``RecordError`` for an option this kictl's bench does not have (a
    job planned by another version).
    """
    try:
        return BenchOptions(device=device, workloads=tuple(workloads), **settings.options)  # type: ignore[arg-type]
    except TypeError as exc:
        raise RecordError(f"job settings: {exc} (planned by another kictl version?)") from exc


def settings_of(options: BenchOptions, device_kind: str) -> BenchSettings:
    """The job-identity settings of bench ``options`` on devices of ``device_kind``."""
    values = {
        item.name: getattr(options, item.name)
        for item in dataclasses.fields(options)
        if item.name not in ("device", "workloads")
    }
    return BenchSettings(device_kind=device_kind, options=values)  # type: ignore[arg-type]


def check_settings(settings: BenchSettings) -> None:
    """Raises ``UsageError`` for settings ``kictl bench`` would refuse."""
    check_options(options_for(settings, "cpu" if settings.device_kind == "cpu" else "cuda:0"), settings.device_kind)


def device_kind(device: str) -> str:
    """``cpu`` or ``cuda`` for a device name; raises ``UsageError`` for anything else."""
    text = device.strip().lower()
    if text == "cpu":
        return "cpu"
    if text == "cuda" or (text.startswith("cuda:") and text[5:].isdigit()):
        return "cuda"
    raise UsageError(f"device {device!r}: expected cpu, cuda or cuda:N")


def resolve(
    registry: Registry,
    definition_ref: str,
    implementation_refs: Sequence[str],
    workloads: Sequence[str],
    workdir: Path,
) -> tuple[StoredRecord, list[StoredRecord], list[tuple[StoredRecord, bool]]]:
    """(definition, its selected workloads, [(implementation record, is the reference)]) as ``kictl bench`` sees them.

    Raises ``NotFoundError``, ``UsageError`` or ``RecordError`` as ``run_bench`` does.
    """
    definition = registry.resolve(definition_ref, ["Definition"])
    spec = definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    signature(spec, source=f"{definition.name} reference")
    chosen = select_workloads(registry, definition, workloads)
    implementations: list[tuple[StoredRecord, bool]] = []
    for ref in implementation_refs:
        loaded = load_implementation(ref, definition, registry)
        if all(record.digest != loaded.record.digest for record, _ in implementations):
            implementations.append((loaded.record, loaded.is_reference))
    return definition, chosen, implementations


def capture_environment(device: str) -> dict[str, Any]:
    """The ExecutionEnvironment spec of ``device`` on this machine; raises ``EnvError`` when it cannot be used."""
    return capture(resolve_device(device), normalize_product)


def protocol_context(device: str) -> dict[str, Any]:
    """What the protocol record takes from the worker's machine rather than from the settings (JSON values).

    The sandbox's isolation label (it names the bubblewrap version found on
    this machine), or ``None`` when bubblewrap is missing or unusable here (a
    job that needs the sandbox then fails on this worker as a device would).
    """
    try:
        label: str | None = sandbox.resolve(False).label
    except KictlError:
        label = None
    return {"sandbox": label}


def environment_digest(environment: Mapping[str, Any]) -> str:
    """The digest of the ExecutionEnvironment record of ``environment`` (a spec)."""
    return environment_record(dict(environment)).digest


def expected_protocols(
    settings: BenchSettings,
    workload: StoredRecord,
    environment: Mapping[str, Any],
    context: Mapping[str, Any] | None = None,
    definition: StoredRecord | None = None,
) -> list[StoredRecord]:
    """The BenchmarkProtocol records a run of ``settings`` on ``workload`` may name.

    One per timer the session may resolve (``kictl.bench.judge.session.possible_timers``): on CUDA with the
    default timer, CUPTI's where it attaches and CUDA events' where it does not (the protocol says which).
    ``environment`` and ``context`` are what the worker reported at start
    (``capture_environment``, ``protocol_context``).
    """
    device = "cpu" if settings.device_kind == "cpu" else "cuda:0"
    options = options_for(settings, device)
    counts = check_options(options, device)
    hardware = environment["hardware"]
    # as kictl.bench.judge.session._Session: the isolation label and the number of timed input sets
    isolation = sandbox.NO_SANDBOX_LABEL if options.no_sandbox else (context or {}).get("sandbox") or "unrecorded"
    iterations = counts[1]
    sets = options.input_sets if iterations is None else min(options.input_sets, iterations * counts[2])
    spec = definition.model.spec if definition is not None else None
    contract = spec if isinstance(spec, DefinitionSpec) else None
    tolerance = tolerance_for(workload, options, contract)
    default = default_tolerance(workload, options, contract)
    return [
        protocol_record(
            protocol_spec(
                device,
                counts,
                options,
                tolerance,
                flush_bytes(device, hardware),
                str(isolation),
                max(1, sets),
                timer,
                default,
            )
        )
        for timer in possible_timers(options, device)
    ]


def run_job(payload: JobPayload, device: str) -> list[dict[str, Any]]:
    """Run one job on ``device`` with the bench machinery; the records it produced, as JSON values.

    The records are the Definition, Implementation, Workload, BenchmarkProtocol,
    ExecutionEnvironment and the one BenchmarkRun, exactly as ``kictl bench``
    would write them.  Raises ``RecordError`` for a payload whose records do
    not match the job, ``UsageError`` when the device is not of the job's
    kind, ``EnvError`` when the device cannot be used, ``JobSkipped`` when the
    workload cannot be judged.
    """
    definition, workload, implementation = payload.checked_records()
    blobs = payload.checked_blobs()
    if device_kind(device) != payload.settings.device_kind:
        raise UsageError(f"device {device} cannot run a job for {payload.settings.device_kind}")
    with tempfile.TemporaryDirectory(prefix="kictl-job-") as scratch:
        base = Path(scratch)
        registry = Registry(base / "registry")
        registry.add([definition, workload, implementation])
        for data in blobs.values():
            registry.add_blob(data)
        options = options_for(payload.settings, device, workloads=(workload.digest,))
        report = run_bench(
            registry,
            definition.digest,
            [implementation.digest],
            options,
            workdir=base / "work",
            kept=kept_workers(),
        )
    if report.skipped:
        raise JobSkipped("; ".join(f"{label}: {reason}" for label, reason in report.skipped))
    return [record.raw for record in report.records]


_KEPT: list[Any] = []


def kept_workers() -> KeptWorkers:
    """This process's long-lived bench workers (``kictl.bench.judge.session.KeptWorkers``), made at first use.

    A job of an implementation on this worker's device reuses the sandboxed
    worker an earlier job of it started (its import done, its JIT caches
    warm); ``close_workers`` ends them (the executor's worker does at exit).
    """
    if not _KEPT:
        _KEPT.append(KeptWorkers())
        atexit.register(close_workers)
    kept: KeptWorkers = _KEPT[0]
    return kept


def close_workers() -> None:
    """End the bench workers ``kept_workers`` kept (nothing when there are none)."""
    while _KEPT:
        _KEPT.pop().close()


__all__ = [
    "JobSkipped",
    "capture_environment",
    "check_settings",
    "close_workers",
    "device_kind",
    "environment_digest",
    "expected_protocols",
    "kept_workers",
    "options_for",
    "protocol_context",
    "resolve",
    "run_job",
    "settings_of",
]
