"""The job model: one implementation on one workload of one definition, under one set of settings (DESIGN §12).

A ``Job`` is named by the digests of what it runs (the Definition, the
Workload, the Implementation) and of the protocol settings it runs them
under (``BenchSettings``); its ``job_id`` is the digest of those four, so two
drivers that plan the same work name the same jobs, and the records a job
produces are content-addressed: results from anywhere merge with
``kictl add`` with no coordination.

``plan_jobs`` makes the job list of a bench (implementations × workloads, in a
stable order); ``shard`` cuts it into deterministic slices for batch
schedulers (a slice is chosen by the job id, never by position, so every
machine computes the same slices from the same inputs); ``skip_existing``
drops the jobs whose run is already in a registry for an environment.

A ``JobPayload`` is what travels to a worker: the job and the exact records
(and blobs) it needs, as JSON data; a worker needs no registry of its own and
never a key.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kictl import canon, families
from kictl.errors import KictlError, UsageError
from kictl.executors import seam
from kictl.executors.payload import BenchSettings, DigestStr, Job, JobPayload, OptionValue
from kictl.records import BenchmarkRun, DefinitionSpec, StoredRecord, WorkloadSpec
from kictl.store.registry import Registry


@dataclass
class JobPlan:
    """The jobs of a bench, in order, and everything a worker needs to run them."""

    definition: StoredRecord
    settings: BenchSettings
    jobs: list[Job]
    #: digest -> record, for the definition, every workload and every implementation
    records: dict[str, StoredRecord]
    #: blob digest -> bytes, for every blob a planned workload names
    blobs: dict[str, bytes] = field(default_factory=dict)
    #: the implementations that are the definition's reference (for speed-ups)
    reference_digests: frozenset[str] = frozenset()

    def label(self, job: Job) -> str:
        """``workload: implementation``, for progress lines."""
        return f"{self.records[job.workload_digest].name}: {self.records[job.implementation_digest].name}"

    def payload(self, job: Job) -> JobPayload:
        """What a worker needs to run ``job``: the job, its records as JSON values, its blobs."""
        workload = self.records[job.workload_digest]
        blobs = {digest: self.blobs[digest] for _, digest in workload.blob_references() if digest in self.blobs}
        return JobPayload(
            job=job,
            settings=self.settings,
            definition=self.records[job.definition_digest].raw,
            workload=workload.raw,
            implementation=self.records[job.implementation_digest].raw,
            blobs={digest: base64.b64encode(data).decode("ascii") for digest, data in blobs.items()},
        )


# --------------------------------------------------------------------------- planning


def plan_jobs(
    registry: Registry,
    definition_ref: str,
    implementation_refs: Sequence[str],
    settings: BenchSettings,
    *,
    workloads: Sequence[str] = (),
    workdir: Path,
) -> JobPlan:
    """The jobs of ``kictl bench``: every implementation on every selected workload, workload by workload.

    The order is the one a plain ``kictl bench`` runs them in: for each workload
    (by label), the definition's reference first, then the implementations in
    the order given.  Implementations given as files or folders are made into
    records (their sources written under ``workdir``); a blob a workload names
    is read from the registry so that workers need none.

    Raises ``NotFoundError`` for unknown names, ``UsageError`` for bad paths,
    ``RecordError`` for invalid implementations.
    """
    if not implementation_refs:
        raise UsageError("give at least one --impl")
    definition, chosen, implementations = seam.resolve(
        registry, definition_ref, implementation_refs, workloads, workdir
    )
    records = {definition.digest: definition}
    blobs: dict[str, bytes] = {}
    for workload in chosen:
        records[workload.digest] = workload
        for _, digest in workload.blob_references():
            blobs[digest] = registry.read_blob(digest)
    references = set()
    for impl, is_reference in implementations:
        records[impl.digest] = impl
        if is_reference:
            references.add(impl.digest)
    ordered = sorted(implementations, key=lambda item: not item[1])
    jobs = [
        Job(
            definition_digest=definition.digest,
            workload_digest=workload.digest,
            implementation_digest=impl.digest,
            settings_digest=settings.digest,
        )
        for workload in chosen
        for impl, _ in ordered
    ]
    return JobPlan(definition, settings, jobs, records, blobs, frozenset(references))


def estimated_work(plan: JobPlan, job: Job) -> int:
    """Bytes plus FLOPs the job's workload must do by its family's formulas (0 where none applies)."""
    definition = plan.records[job.definition_digest].model.spec
    workload = plan.records[job.workload_digest].model.spec
    assert isinstance(definition, DefinitionSpec)
    assert isinstance(workload, WorkloadSpec)
    try:
        amount = families.work(definition, workload, plan.blobs.__getitem__)
    except (KictlError, KeyError, ValueError):
        return 0
    return amount.bytes + (amount.flops or 0)


def largest_first(plan: JobPlan, jobs: Sequence[Job]) -> list[Job]:
    """``jobs`` in the order to hand them out: the most work first, planned order among equals.

    With workers in parallel the suite's wall time is at least its longest
    job; starting the longest jobs first keeps a long one from starting last
    (longest-processing-time-first list scheduling).  Results are reported in
    planned order whatever the order of running.
    """
    costs = {job.job_id: estimated_work(plan, job) for job in jobs}
    return sorted(jobs, key=lambda job: -costs[job.job_id])


# --------------------------------------------------------------------------- shards


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/N"`` as ``(i, N)`` with ``0 <= i < N``; raises ``UsageError`` otherwise."""
    found = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if found is None:
        raise UsageError(f"--shard {text!r}: expected i/N, e.g. 0/4")
    index, count = int(found.group(1)), int(found.group(2))
    if count < 1 or index >= count:
        raise UsageError(f"--shard {text}: need 0 <= i < N")
    return index, count


def shard_of(job: Job, count: int) -> int:
    """Which of ``count`` shards ``job`` belongs to: its id's leading 64 bits modulo ``count``.

    Depends on nothing but the job's id, so every machine agrees without talking.
    """
    return int(canon.digest_hex(job.job_id)[:16], 16) % count


def shard(jobs: Sequence[Job], index: int, count: int) -> list[Job]:
    """The jobs of slice ``index`` of ``count``, in their planned order.

    The slices are disjoint and together hold every job exactly once; a job's
    slice depends only on its id (not on its position or the other jobs), so
    planning a superset of workloads does not move jobs between slices.
    Raises ``UsageError`` for an impossible slice.
    """
    if count < 1 or not 0 <= index < count:
        raise UsageError(f"shard {index}/{count}: need 0 <= i < N")
    seen: set[str] = set()
    chosen = []
    for job in jobs:
        key = job.job_id
        if key in seen:
            continue
        seen.add(key)
        if shard_of(job, count) == index:
            chosen.append(job)
    return chosen


# --------------------------------------------------------------------------- skipping


def done_job_ids(
    registry: Registry,
    plan: JobPlan,
    environments: Iterable[Mapping[str, Any]],
    context: Mapping[str, Any] | None = None,
) -> set[str]:
    """Ids of planned jobs whose BenchmarkRun is already in ``registry`` for every one of ``environments``.

    A run counts when it names the job's definition, workload and
    implementation, the environment's digest, and the protocol digest these
    settings give in that environment (whatever its status: a failure is a
    result too).
    """
    envs = list(environments)
    if not envs:
        return set()
    present: set[tuple[str | None, str, str, str, str]] = set()
    for record in registry.iter_records(["BenchmarkRun"]):
        assert isinstance(record.model, BenchmarkRun)
        spec = record.model.spec
        present.add(
            (
                spec.definition_digest,
                spec.workload_digest,
                spec.implementation_digest,
                spec.protocol_digest,
                spec.environment_digest,
            )
        )
    done = set()
    for job in plan.jobs:
        workload = plan.records[job.workload_digest]
        if all(
            any(
                (
                    job.definition_digest,
                    job.workload_digest,
                    job.implementation_digest,
                    protocol.digest,
                    seam.environment_digest(env),
                )
                in present
                for protocol in seam.expected_protocols(
                    plan.settings, workload, env, context, plan.records.get(job.definition_digest)
                )
            )
            for env in envs
        ):
            done.add(job.job_id)
    return done


def skip_existing(
    jobs: Sequence[Job],
    registry: Registry,
    plan: JobPlan,
    environments: Iterable[Mapping[str, Any]],
    context: Mapping[str, Any] | None = None,
) -> list[Job]:
    """``jobs`` less those already done in ``registry`` for every one of ``environments``."""
    done = done_job_ids(registry, plan, environments, context)
    return [job for job in jobs if job.job_id not in done]


__all__ = [
    "BenchSettings",
    "DigestStr",
    "Job",
    "JobPayload",
    "JobPlan",
    "OptionValue",
    "done_job_ids",
    "estimated_work",
    "largest_first",
    "parse_shard",
    "plan_jobs",
    "shard",
    "shard_of",
    "skip_existing",
]
