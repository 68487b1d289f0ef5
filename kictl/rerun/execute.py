"""The one seam between reruns and the bench machinery (DESIGN §7, §10).

Everything a rerun needs from ``kictl.bench`` goes through the three
functions here, so that the bench can change underneath without touching
the rest of ``kictl.rerun``:

* ``machine_environment(device)``: the ExecutionEnvironment spec of this
  machine's device, before anything runs (to refuse a rerun on another GPU).
* ``measured_family(settings, device)``: the comparability family a bench
  session with these settings would record here.
* ``execute(registry, definition, implementations, workloads, settings, ...)``:
  run implementations on workloads exactly as ``kictl bench`` does and
  return, per (implementation, workload), the new BenchmarkRun with its
  ExecutionEnvironment and BenchmarkProtocol records.

Today ``execute`` calls ``kictl.bench.judge.session.run_bench``, the path
``kictl bench --impl <Implementation digest>...`` takes: each Implementation
record's embedded sources are written afresh into a private scratch folder
(mode 0700) and imported from there by the sandboxed worker, the
definition's reference runs in a worker of kictl's own, and the protocol's
settings become the session's options.  Before it runs, every source's
SHA-256 is checked against the record; afterwards, the session must report
exactly the Implementation record it was given.

Fresh seeds.  Every input value of a bench session is seeded from the
session's ``inputSecret`` (recorded in each run afterwards); a rerun made for
a request (``kictl.rerun.request``) uses the secret the request gives, which
the signer can recompute and no one else can.  The rounds' index structures
come from ``kictl.bench.judge.inputs.derive_seed``, a public function of the
workload's seeds, which ``execute`` salts with the request's ``seedSalt`` (128
random bits without a request) for the duration of the session: offset 0 (the
timed calls' structure) is unchanged.  Input plans are made in this (the
parent) process, so the salted function is the one that decides.  The seam is
not thread-safe: one rerun session per process at a time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import secrets
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kictl import canon
from kictl.bench.judge import correctness, inputs
from kictl.bench.judge.results import protocol_spec
from kictl.bench.judge.session import BenchOptions, run_bench
from kictl.bench.judge.session import resolve_device as bench_device
from kictl.bench.worker.environment import capture
from kictl.errors import RecordError
from kictl.families.gpus import normalize_product
from kictl.records import ImplementationSpec, StoredRecord
from kictl.rerun.job import ProtocolSettings
from kictl.store.registry import Registry

ProgressCallback = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class ExecutedRun:
    """What the bench made of one workload: the run and the records it names, or why there is none."""

    workload: str  # digest
    run: StoredRecord | None
    protocol: StoredRecord | None
    environment: StoredRecord | None
    skipped: str | None = None  # the workload could not be judged here (its reference or kictl's worker failed)


@dataclass(frozen=True, slots=True)
class Execution:
    """One bench session of a rerun: a result per workload and the salt of its correctness seeds."""

    runs: dict[tuple[str, str], ExecutedRun]  # (implementation digest, workload digest)
    seed_salt: str


def resolve_device(requested: str, settings: ProtocolSettings) -> str:
    """``cpu`` or ``cuda:N``; ``auto`` is the kind of device the original was measured on.

    Raises ``UsageError`` for an unknown device, ``EnvError`` for an absent GPU.
    """
    if requested.strip().lower() == "auto":
        return "cpu" if settings.device == "cpu" else bench_device("cuda")
    return bench_device(requested)


def machine_environment(device: str) -> dict[str, Any]:
    """The ExecutionEnvironment spec (JSON members) of ``device`` on this machine."""
    return capture(device, normalize_product)


_TIMER_OPTIONS = {"cupti_device_time": "cupti", "cuda_events": "events", "cuda_graph_replay": "graph"}


def _options(settings: ProtocolSettings, device: str, timeout_s: float, workloads: Sequence[str]) -> Any:
    return BenchOptions(
        device=device,
        warmup=settings.warmup,
        iterations=settings.iterations,
        trials=settings.trials,
        rounds=settings.rounds or BenchOptions().rounds,  # a protocol that does not say: the bench's default
        cuda_graph=settings.cuda_graph and device != "cpu",
        # the original's timer: CUPTI and CUDA events are families of their own (docs/bench.md, "Timers")
        timer=_TIMER_OPTIONS.get(settings.timer, "auto") if device != "cpu" else "auto",
        time_setup=settings.time_setup,
        statistic=settings.statistic,
        timeout_s=timeout_s,
        atol=settings.atol,
        rtol=settings.rtol,
        matched_ratio=settings.matched_ratio,
        # the original's budget: a capped count is capped again, an exact one (no budget recorded) stays exact
        time_budget_s=settings.time_budget_s,
        warmup_budget=settings.warmup_budget_s is not None,
        workloads=tuple(workloads),
    )


def measured_family(settings: ProtocolSettings, device: str) -> str:
    """The comparability family ``kictl bench`` records for these settings on ``device``."""
    tolerance = correctness.Tolerance(atol=0.0, rtol=0.0, required_matched_ratio=1.0)
    options = _options(settings, device, 1.0, ())
    spec = protocol_spec(device, (0, 1, 1), options, tolerance, 0 if device == "cpu" else 1)
    family: str = spec["comparability"]["family"]
    return family


def check_sources(implementation: StoredRecord) -> None:
    """Every embedded source's SHA-256 is the one the record states; raises ``RecordError``."""
    spec = implementation.model.spec
    if not isinstance(spec, ImplementationSpec):
        raise RecordError(f"{implementation.digest} is a {implementation.kind}, not an Implementation")
    for source in spec.sources:
        actual = canon.sha256_hex(source.content.encode("utf-8"))
        if actual != source.sha256:
            raise RecordError(
                f"{implementation.name}: source {source.path} hashes to {actual}, the record says {source.sha256}"
            )


@contextlib.contextmanager
def fresh_correctness_seeds(salt: str) -> Iterator[None]:
    """Correctness rounds draw seeds salted with ``salt``; the timed inputs (offset 0) keep the workload's."""
    public = getattr(inputs, "derive_seed", None)
    if public is None:  # a bench that no longer derives seeds publicly draws secret ones itself
        yield
        return

    def salted(seed: int, offset: int) -> int:
        if offset == 0:
            return seed
        digest = hashlib.sha256(f"kictl-rerun:{salt}:{seed}:{offset}".encode()).digest()
        return int.from_bytes(digest[:8], "big") & (2**63 - 1)

    inputs.derive_seed = salted
    try:
        yield
    finally:
        inputs.derive_seed = public


def execute(
    registry: Registry,
    definition: StoredRecord,
    implementations: Sequence[StoredRecord],
    workloads: Sequence[StoredRecord],
    settings: ProtocolSettings,
    *,
    device: str,
    timeout_s: float,
    progress: ProgressCallback | None = None,
    input_secret: str | None = None,
    seed_salt: str | None = None,
) -> Execution:
    """Run each implementation on each workload with the protocol's settings, as ``kictl bench`` does.

    The result is keyed by ``(implementation digest, workload digest)``.
    Raises ``RecordError`` when a source does not match its hash or the
    session ran other implementations, ``EnvError`` when the device or a
    worker cannot start, and whatever ``run_bench`` raises for bad records.
    ``input_secret`` and ``seed_salt`` come from a rerun request; without one
    both are drawn here.
    """
    for implementation in implementations:
        check_sources(implementation)
    wanted_impls = list(dict.fromkeys(implementation.digest for implementation in implementations))
    wanted = list(dict.fromkeys(workload.digest for workload in workloads))
    options = dataclasses.replace(
        _options(settings, device, timeout_s, [canon.digest_hex(digest) for digest in wanted]),
        input_secret=input_secret or secrets.token_hex(16),
    )
    salt = seed_salt or secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="kictl-rerun-") as scratch, fresh_correctness_seeds(salt):
        report = run_bench(registry, definition.digest, wanted_impls, options, workdir=Path(scratch), progress=progress)
    ran = sorted(record.digest for record in report.records if record.kind == "Implementation")
    if ran != sorted(wanted_impls):
        raise RecordError(f"the bench session ran {ran}, not {sorted(wanted_impls)}")
    by_digest = {record.digest: record for record in report.records}
    labels = {workload.name: workload.digest for workload in workloads}
    results: dict[tuple[str, str], ExecutedRun] = {}
    for summary in report.runs:
        run = summary.run
        if run is None:
            continue
        spec = run.raw["spec"]
        results[(spec["implementationDigest"], spec["workloadDigest"])] = ExecutedRun(
            workload=spec["workloadDigest"],
            run=run,
            protocol=by_digest.get(spec["protocolDigest"]),
            environment=by_digest.get(spec["environmentDigest"]),
        )
    for label, reason in report.skipped:
        digest = labels.get(label)
        if digest is not None:
            for impl_digest in wanted_impls:
                results[(impl_digest, digest)] = ExecutedRun(digest, None, None, None, skipped=reason)
    for impl_digest in wanted_impls:
        for digest in wanted:
            results.setdefault(
                (impl_digest, digest),
                ExecutedRun(digest, None, None, None, skipped="the bench session reported nothing for it"),
            )
    return Execution(runs=results, seed_salt=salt)
