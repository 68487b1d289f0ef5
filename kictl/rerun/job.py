"""What a rerun runs: the exact job of a published BenchmarkRun, rebuilt from the registry (DESIGN §10).

A ``RerunJob`` holds the original run and every record it names: the
Definition (with its embedded reference), the Workload, the Implementation
(with its embedded sources), the BenchmarkProtocol and the
ExecutionEnvironment.  ``ProtocolSettings`` are the protocol's measurement
and correctness settings (timer, warm-up, iterations, trials, correctness
rounds, tolerances, primary statistic, CUDA graph, setup in the timed
region), which the rerun repeats exactly.  Nothing is taken from the command
line that the protocol already says.

``select_runs`` turns the command line's selection into original runs:
digests (or unique prefixes, or names) and, with ``base``, every BenchmarkRun
file a branch adds since its merge base with ``base`` (the runs of a registry
pull request).

``refusals`` says why this machine may not rerun a job: another GPU product
than the original's environment, or a measurement whose comparability family
differs from the original protocol's.  A rerun that is forced past a refusal
can only be ``inconclusive``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kictl import canon
from kictl.errors import NotFoundError, RecordError, UsageError
from kictl.records import (
    BenchmarkProtocolSpec,
    BenchmarkRunSpec,
    ExecutionEnvironmentSpec,
    StoredRecord,
)
from kictl.store.registry import Registry

RUN_KIND = "BenchmarkRun"


@dataclass(frozen=True, slots=True)
class ProtocolSettings:
    """The settings of a BenchmarkProtocol that a rerun repeats; ``None`` takes the device's default."""

    device: str  # "cpu" or "cuda": where the original was measured
    timer: str
    statistic: str
    family: str
    harness: str
    warmup: int | None
    iterations: int | None
    trials: int | None
    rounds: int | None
    cuda_graph: bool
    time_setup: bool
    atol: float | None
    rtol: float | None
    matched_ratio: float | None
    #: seconds of timed calls the original's count stopped at (a GPU's default count is capped; adaptive counts)
    time_budget_s: float | None = None
    #: seconds of warm-up calls after which the original's warm-up ended early (``None``: its count was exact)
    warmup_budget_s: float | None = None

    @classmethod
    def from_protocol(cls, protocol: StoredRecord) -> ProtocolSettings:
        """The settings of ``protocol``; raises ``RecordError`` when it is no BenchmarkProtocol."""
        spec = protocol.model.spec
        if not isinstance(spec, BenchmarkProtocolSpec):
            raise RecordError(f"{protocol.digest} is a {protocol.kind}, not a BenchmarkProtocol")
        measurement = spec.measurement
        device = measurement.device
        if device is None:  # protocols of other harnesses do not say; a CPU timer says CPU
            device = "cpu" if measurement.timer == "perf_counter_ns" else "cuda"
        return cls(
            device="cpu" if device == "cpu" else "cuda",
            timer=measurement.timer,
            statistic=measurement.primary_statistic,
            family=spec.comparability.family,
            harness=spec.harness.name,
            warmup=measurement.warmup,
            iterations=measurement.iterations or None,
            trials=measurement.trials or None,
            rounds=spec.correctness.rounds,
            cuda_graph=bool(measurement.cuda_graph),
            time_setup=bool(measurement.setup_in_timed_region),
            atol=spec.correctness.atol,
            rtol=spec.correctness.rtol,
            matched_ratio=spec.correctness.required_matched_ratio,
            time_budget_s=measurement.time_budget_s,
            warmup_budget_s=measurement.warmup_time_budget_s,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "timer": self.timer,
            "primaryStatistic": self.statistic,
            "comparabilityFamily": self.family,
            "harness": self.harness,
            "warmup": self.warmup,
            "iterations": self.iterations,
            "trials": self.trials,
            "rounds": self.rounds,
            "cudaGraph": self.cuda_graph,
            "setupInTimedRegion": self.time_setup,
            "atol": self.atol,
            "rtol": self.rtol,
            "requiredMatchedRatio": self.matched_ratio,
            "timeBudgetS": self.time_budget_s,
            "warmupTimeBudgetS": self.warmup_budget_s,
        }


@dataclass(frozen=True, slots=True)
class RerunJob:
    """One original BenchmarkRun and the records that say exactly how to run it again."""

    run: StoredRecord
    definition: StoredRecord
    workload: StoredRecord
    implementation: StoredRecord
    protocol: StoredRecord
    environment: StoredRecord
    settings: ProtocolSettings

    @property
    def run_spec(self) -> BenchmarkRunSpec:
        spec = self.run.model.spec
        assert isinstance(spec, BenchmarkRunSpec)
        return spec

    @property
    def product(self) -> str:
        """The GPU (or CPU) product the original ran on."""
        spec = self.environment.model.spec
        assert isinstance(spec, ExecutionEnvironmentSpec)
        return spec.hardware.product

    @property
    def original_ns(self) -> int:
        timing = self.run_spec.timing
        assert timing is not None  # build_job only accepts passed runs
        return timing.primary_ns()


def _load(registry: Registry, digest: str, kind: str, owner: StoredRecord, member: str) -> StoredRecord:
    try:
        record = registry.load(digest)
    except NotFoundError as exc:
        raise NotFoundError(
            f"run {owner.digest}: $.spec.{member} names {digest}, which is not in {registry.root}"
        ) from exc
    if record.kind != kind:
        raise RecordError(f"run {owner.digest}: $.spec.{member} names a {record.kind}, not a {kind}")
    return record


def build_job(registry: Registry, digest: str) -> RerunJob:
    """The job of the BenchmarkRun ``digest`` (a full digest), from the registry's records.

    Raises ``NotFoundError`` for a missing record, ``RecordError`` for a
    record of the wrong kind or without the members a rerun needs,
    ``UsageError`` for a run that did not pass (there is no latency to check).
    """
    run = registry.load(digest)
    if run.kind != RUN_KIND:
        raise UsageError(f"{digest} is a {run.kind}; only BenchmarkRun records are rerun")
    spec = run.model.spec
    assert isinstance(spec, BenchmarkRunSpec)
    if spec.status != "passed" or spec.timing is None:
        raise UsageError(f"run {run.name} ({digest}) has status {spec.status}: only passed runs are rerun")
    if spec.definition_digest is None:
        raise RecordError(f"run {run.name} ({digest}) names no definition; its job cannot be rebuilt")
    workload = _load(registry, spec.workload_digest, "Workload", run, "workloadDigest")
    workload_definition = workload.raw["spec"]["definitionDigest"]
    if workload_definition != spec.definition_digest:
        raise RecordError(f"run {digest}: its workload belongs to {workload_definition}, not {spec.definition_digest}")
    protocol = _load(registry, spec.protocol_digest, "BenchmarkProtocol", run, "protocolDigest")
    return RerunJob(
        run=run,
        definition=_load(registry, spec.definition_digest, "Definition", run, "definitionDigest"),
        workload=workload,
        implementation=_load(registry, spec.implementation_digest, "Implementation", run, "implementationDigest"),
        protocol=protocol,
        environment=_load(registry, spec.environment_digest, "ExecutionEnvironment", run, "environmentDigest"),
        settings=ProtocolSettings.from_protocol(protocol),
    )


def runs_added(registry: Registry, base: str, head: str = "HEAD") -> list[str]:
    """The BenchmarkRun records ``head`` adds since its merge base with ``base``, as full digests.

    Only files that are added (not edited: published records never change)
    count.  Raises ``NotFoundError`` for an unknown revision and
    ``RegistryError`` when the registry is no git repository.
    """
    history = registry.git
    merge_base = history.merge_base(base, head)
    found = []
    for change in history.changed_files(merge_base, head):
        if change.status != "A" or not change.path.endswith(".json"):
            continue
        stem = change.path.rsplit("/", 1)[-1][: -len(".json")]
        if not canon.is_hex_digest(stem):
            continue
        digest = canon.DIGEST_PREFIX + stem
        if registry.relative(registry.record_path(RUN_KIND, digest)) == change.path:
            found.append(digest)
    return sorted(found)


def select_runs(registry: Registry, references: Sequence[str], *, base: str | None = None) -> list[str]:
    """The full digests of the runs to rerun: each reference (digest, prefix or name) and, with ``base``,
    every run the current branch adds since ``base``.  In the given order, without repeats.

    Raises ``UsageError`` when nothing is selected, ``NotFoundError`` for an unknown reference.
    """
    chosen: list[str] = []
    for reference in references:
        chosen.append(registry.resolve(reference, [RUN_KIND]).digest)
    if base is not None:
        added = runs_added(registry, base)
        if not added and not references:
            raise UsageError(f"the branch adds no BenchmarkRun since {base}: nothing to rerun")
        chosen.extend(added)
    if not chosen:
        raise UsageError("name the runs to rerun (digests, prefixes or names), or give --base REV")
    return list(dict.fromkeys(chosen))


def refusals(job: RerunJob, product: str, family: str) -> list[str]:
    """Why a rerun of ``job`` measured here (``product``, comparability ``family``) would not be comparable."""
    reasons = []
    if product != job.product:
        reasons.append(f"it ran on {job.product}, this machine's device is {product}")
    if family != job.settings.family:
        reasons.append(
            f"its protocol's comparability family is {job.settings.family}, a rerun here would measure {family}"
        )
    return reasons


def group_jobs(jobs: Iterable[RerunJob]) -> list[list[RerunJob]]:
    """Jobs that one bench session runs together: one definition and protocol.

    A session runs every implementation of a group on every workload of it, so
    a group is split by implementation when that would run much more than was
    asked (more than twice the jobs).
    """
    groups: dict[tuple[str, str], list[RerunJob]] = {}
    for job in jobs:
        groups.setdefault((job.definition.digest, job.protocol.digest), []).append(job)
    out: list[list[RerunJob]] = []
    for group in groups.values():
        implementations = {job.implementation.digest for job in group}
        workloads = {job.workload.digest for job in group}
        if len(implementations) * len(workloads) <= 2 * len(group):
            out.append(group)
            continue
        split: dict[str, list[RerunJob]] = {}
        for job in group:
            split.setdefault(job.implementation.digest, []).append(job)
        out.extend(split.values())
    return out
