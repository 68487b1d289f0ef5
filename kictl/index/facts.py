"""The facts the query index holds about each record: small frozen rows, no pydantic."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class DefinitionFacts:
    digest: str
    name: str
    title: str | None
    family: str
    reference_sha256: str


@dataclass(frozen=True, slots=True)
class WorkloadFacts:
    digest: str
    name: str
    definition: str
    axes: dict[str, int]


@dataclass(frozen=True, slots=True)
class ImplementationFacts:
    digest: str
    name: str
    definition: str | None
    project: str | None
    runtime: str
    availability: str | None
    revision: str | None
    entry_sha256: str | None


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What ranking needs to know about one run, with the facts of the records it names.

    ``gpu``, ``comparability`` and the names are ``None`` where the record they
    come from is not in the registry (a dangling reference): such a run belongs
    to no comparison group.  ``noise_ns`` is half the width of the run's 10-90 %
    band (``noise_source`` says from what: ``samples`` or ``p10p90``), ``None``
    when the run carries neither.
    """

    digest: str
    name: str
    definition: str | None
    workload: str
    workload_name: str | None
    implementation: str
    implementation_name: str | None
    implementation_entry_sha256: str | None
    protocol: str
    comparability: str | None
    environment: str
    gpu: str | None
    status: str
    statistic: str | None
    latency_ns: int | None
    observed_at: str
    noise_ns: float | None
    noise_source: str | None
    native_reference_ns: int | None
    samples: int
    committed: bool = True


@dataclass(frozen=True, slots=True)
class WorkFacts:
    """The cached output of ``families.work`` for one workload."""

    bytes: int
    flops: int | None
    compute_dtype: str
    synthesized: tuple[str, ...]
    notes: dict[str, int]


@dataclass
class SyncReport:
    """What opening the index did: ``fresh``, ``incremental``, ``rebuilt`` or ``memory``."""

    mode: str = "fresh"
    parsed: int = 0
    git_changes: int = 0
    shards_listed: int = 0
    seconds: float = 0.0
    reasons: list[str] = field(default_factory=list)
