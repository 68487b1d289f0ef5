"""What every executor shares: the interface, the scheduler over worker slots, the check of what comes back.

An ``Executor`` holds long-lived workers (one per device: a local GPU, a Ray
actor), each running one job at a time.  ``Executor.run`` hands the jobs out
as workers come free and calls ``on_result`` as each job finishes, in
completion order.  A worker that fails as a device (it died, or its device
cannot be used) is reported through ``on_device_failure``, taken out of the
pool, and the job it held is retried once on another worker; a job that fails
as a job (its workload cannot be judged) is reported and not retried.

Workers only compute: what they send back is checked here, in the driver,
before anyone sees it: every record validates, the run is the run of the job
that was asked for (its definition, workload and implementation digests) and
names a protocol that is the one these settings give in the environment it
reports.  The driver writes and signs; workers never hold a key.
"""

from __future__ import annotations

import abc
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Self

from kictl.errors import EnvError, KictlError, RecordError
from kictl.executors import seam
from kictl.executors.jobs import Job, JobPlan
from kictl.records import BenchmarkRun, StoredRecord, record_from_value

#: What a worker's single job produced, as the worker reports it.
EventKind = Literal["result", "job_error", "device_error"]

#: Attempts a job gets when the device it ran on fails: the first and one retry elsewhere.
MAX_ATTEMPTS = 2


@dataclass(frozen=True)
class JobResult:
    """One finished job: its records (checked), or why it produced none."""

    job: Job
    worker: str
    records: tuple[StoredRecord, ...] = ()
    error: str | None = None
    attempts: int = 1
    #: wall seconds from handing the job to its (last) worker to its answer, as the driver saw them
    seconds: float = 0.0

    @property
    def run(self) -> StoredRecord | None:
        return next((record for record in self.records if record.kind == "BenchmarkRun"), None)


@dataclass(frozen=True)
class DeviceFailure:
    """A worker that failed as a device; ``job`` is what it held, if anything."""

    worker: str
    detail: str
    job: Job | None = None


@dataclass(frozen=True)
class WorkerEvent:
    """What a backend says happened on one worker slot."""

    slot: str
    kind: EventKind
    records: tuple[dict[str, Any], ...] = ()
    detail: str = ""


ResultCallback = Callable[[JobResult], None]
FailureCallback = Callable[[DeviceFailure], None]


class Executor(abc.ABC):
    """Long-lived workers that run jobs; use as a context manager (``start`` on enter, ``close`` on exit)."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abc.abstractmethod
    def start(self) -> None:
        """Start the workers; raises ``EnvError`` when none can start."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop the workers this executor started."""

    #: live worker -> the ExecutionEnvironment spec and the protocol context it reported at start
    _environments: dict[str, dict[str, Any]]
    _contexts: dict[str, dict[str, Any]]
    #: worker -> why it could not start
    failed_at_start: dict[str, str]

    def __init__(self) -> None:
        self._environments = {}
        self._contexts = {}
        self.failed_at_start = {}

    @property
    def environments(self) -> dict[str, dict[str, Any]]:
        """Live worker -> the ExecutionEnvironment spec it reported at start."""
        return dict(self._environments)

    def context(self, slot: str) -> dict[str, Any]:
        """The protocol context ``slot`` reported at start (``seam.protocol_context``)."""
        return dict(self._contexts.get(slot, {}))

    def _started(self, slot: str, message: Any, fallback: str) -> bool:
        """Record ``slot``'s start message: its environment and context, or why it did not start."""
        if (
            isinstance(message, dict)
            and message.get("type") == "ready"
            and isinstance(message.get("environment"), dict)
        ):
            self._environments[slot] = message["environment"]
            context = message.get("protocolContext")
            self._contexts[slot] = context if isinstance(context, dict) else {}
            return True
        detail = message.get("detail") if isinstance(message, dict) else None
        self.failed_at_start[slot] = str(detail or fallback)
        return False

    def _require_a_worker(self, what: str) -> None:
        """Raise ``EnvError`` (after closing) when no worker started."""
        if not self._environments:
            details = [f"{slot}: {why}" for slot, why in self.failed_at_start.items()]
            self.close()
            raise EnvError(f"no {what} could start", details=details)

    @abc.abstractmethod
    def submit(self, slot: str, job: Job, payload: str) -> None:
        """Give ``slot`` (idle) one job's payload (JSON text)."""

    @abc.abstractmethod
    def next_event(self) -> WorkerEvent:
        """Block until a busy slot reports; a slot that reports ``device_error`` is gone for good."""

    def run(
        self,
        plan: JobPlan,
        jobs: Sequence[Job],
        on_result: ResultCallback,
        on_device_failure: FailureCallback | None = None,
    ) -> None:
        """Run ``jobs`` on the live workers, calling ``on_result`` for each as it finishes.

        Every job gets exactly one ``on_result``: its records, or an error (a
        job error, a second device failure, or no worker left).
        """
        schedule(self, plan, jobs, on_result, on_device_failure or (lambda _failure: None))


def schedule(
    executor: Executor,
    plan: JobPlan,
    jobs: Sequence[Job],
    on_result: ResultCallback,
    on_device_failure: FailureCallback,
) -> None:
    """Hand ``jobs`` to ``executor``'s idle workers; check and deliver each result; retry a device's job once."""
    pending: deque[Job] = deque(jobs)
    attempts: dict[str, int] = {}
    idle = list(executor.environments)
    busy: dict[str, Job] = {}
    started: dict[str, float] = {}
    while pending or busy:
        while pending and idle:
            slot, job = idle.pop(0), pending.popleft()
            attempts[job.job_id] = attempts.get(job.job_id, 0) + 1
            busy[slot] = job
            started[slot] = time.perf_counter()
            executor.submit(slot, job, plan.payload(job).to_json())
        if not busy:  # jobs left and no worker alive
            while pending:
                job = pending.popleft()
                on_result(JobResult(job, "", error="no worker left to run it", attempts=attempts.get(job.job_id, 0)))
            return
        event = executor.next_event()
        if event.slot not in busy:  # an idle worker died
            if event.kind == "device_error":
                idle = [slot for slot in idle if slot != event.slot]
                on_device_failure(DeviceFailure(event.slot, event.detail))
            continue
        job = busy.pop(event.slot)
        tries = attempts[job.job_id]
        seconds = time.perf_counter() - started.pop(event.slot)
        if event.kind == "device_error":
            on_device_failure(DeviceFailure(event.slot, event.detail, job))
            if tries < MAX_ATTEMPTS:
                pending.appendleft(job)
            else:
                on_result(JobResult(job, event.slot, error=f"device failed twice: {event.detail}", attempts=tries))
            continue
        idle.append(event.slot)
        if event.kind == "job_error":
            on_result(JobResult(job, event.slot, error=event.detail, attempts=tries, seconds=seconds))
            continue
        try:
            environment = executor.environments.get(event.slot)
            records = check_result(plan, job, event.records, environment, executor.context(event.slot))
        except KictlError as exc:
            refused = f"{event.slot} sent back records kictl refuses: {exc}"
            on_result(JobResult(job, event.slot, error=refused, attempts=tries, seconds=seconds))
            continue
        on_result(JobResult(job, event.slot, records=records, attempts=tries, seconds=seconds))


def check_result(
    plan: JobPlan,
    job: Job,
    raws: Sequence[Mapping[str, Any]],
    environment: Mapping[str, Any] | None,
    context: Mapping[str, Any] | None = None,
) -> tuple[StoredRecord, ...]:
    """The records a worker sent for ``job``, validated and tied to it.

    Exactly one BenchmarkRun, naming the job's definition, workload and
    implementation; every Definition, Workload and Implementation sent is the
    job's own; the run's protocol and environment records are among those sent;
    the protocol is the one the plan's settings give in that environment, and
    the environment is the one the worker reported at start.  Raises
    ``RecordError`` otherwise.
    """
    records = tuple(record_from_value(dict(raw), source=f"result of job {job.job_id[7:19]}") for raw in raws)
    by_digest = {record.digest: record for record in records}
    runs = [record for record in records if isinstance(record.model, BenchmarkRun)]
    if len(runs) != 1:
        raise RecordError(f"expected one BenchmarkRun, got {len(runs)}")
    assert isinstance(runs[0].model, BenchmarkRun)
    spec = runs[0].model.spec
    named = (spec.definition_digest, spec.workload_digest, spec.implementation_digest)
    if named != (job.definition_digest, job.workload_digest, job.implementation_digest):
        raise RecordError("the BenchmarkRun is not a run of the job that was asked for")
    own = {job.definition_digest, job.workload_digest, job.implementation_digest}
    for record in records:
        if record.kind in ("Definition", "Workload", "Implementation") and record.digest not in own:
            raise RecordError(f"a {record.kind} the job does not name: {record.digest}")
    protocol = by_digest.get(spec.protocol_digest)
    environment_record = by_digest.get(spec.environment_digest)
    if protocol is None or protocol.kind != "BenchmarkProtocol":
        raise RecordError("the run's BenchmarkProtocol was not sent")
    if environment_record is None or environment_record.kind != "ExecutionEnvironment":
        raise RecordError("the run's ExecutionEnvironment was not sent")
    if environment is not None and seam.environment_digest(environment) != environment_record.digest:
        raise RecordError("the run's environment is not the one the worker reported at start")
    expected = seam.expected_protocols(
        plan.settings,
        plan.records[job.workload_digest],
        environment_record.raw["spec"],
        context,
        plan.records.get(job.definition_digest),
    )
    if all(protocol.digest != record.digest for record in expected):
        differ = _differing(protocol.raw.get("spec"), expected[0].raw.get("spec")) if expected else []
        raise RecordError(
            "the run's protocol is not the one the job's settings give" + (f" ({'; '.join(differ)})" if differ else "")
        )
    return records


def _differing(sent: Any, expected: Any, path: str = "") -> list[str]:
    """The first few members where two JSON values differ, each as ``path: sent != expected`` (for an error)."""
    if isinstance(sent, dict) and isinstance(expected, dict):
        found: list[str] = []
        for key in sorted(set(sent) | set(expected), key=str):
            found += _differing(sent.get(key), expected.get(key), f"{path}.{key}" if path else str(key))
        return found[:3]
    if sent == expected:
        return []
    return [f"{path or 'spec'}: {str(sent)[:80]!r} != {str(expected)[:80]!r}"]


__all__ = [
    "MAX_ATTEMPTS",
    "DeviceFailure",
    "Executor",
    "JobResult",
    "WorkerEvent",
    "check_result",
    "schedule",
]
