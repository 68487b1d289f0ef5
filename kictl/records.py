"""The six kinds of record of docs/records.md, as pydantic models, and how records are loaded.

Every record is ``{apiVersion, kind, metadata, spec}``; one discriminated
union over ``kind`` (``RECORD_ADAPTER``) validates any of them.  Members are
camelCase on the wire and snake_case in Python.  Unknown members are errors;
optional members that a record does not have stay absent, and a record's
digest covers exactly the members it has (``canon.record_digest`` over the
JSON value as read, never over a re-serialised model).

Validation is strict: strings are not numbers, latencies are integers, digests
are ``sha256:`` and 64 lowercase hex digits, timestamps are RFC 3339 UTC with
milliseconds and ``Z``.  Loaded records are ``StoredRecord`` values that keep
the model, the JSON value it came from and the digest together.

Why one module of some 800 lines: it is docs/records.md as code, read side
by side with it.  The six kinds share their member types (digests,
timestamps, tensors, timing) and one discriminated union; split by kind, each
part would be a hundred lines importing the shared types back.

Its size (over 600 lines) is the schema of six kinds in one discriminated union: their members refer to each
other's types, and docs/records.md documents them in the same order.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

from kictl import canon
from kictl.dtypes import DType as DType  # re-exported: the one dtype table (kictl.dtypes)
from kictl.errors import RecordError
from kictl.layout import KINDS as KINDS  # re-exported: the models and the layout name the same kinds

API_VERSION = "kernelindex.dev/v1alpha1"

# --------------------------------------------------------------------------- scalar types

SafeInt = Annotated[int, Field(ge=-canon.MAX_SAFE_INTEGER, le=canon.MAX_SAFE_INTEGER)]
NonNegativeInt = Annotated[int, Field(ge=0, le=canon.MAX_SAFE_INTEGER)]
PositiveInt = Annotated[int, Field(ge=1, le=canon.MAX_SAFE_INTEGER)]
Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
HexSha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
#: Names are printable ASCII without spaces (docs/records.md: no Unicode normalisation happens).
Name = Annotated[str, StringConstraints(pattern=r"^[!-~]+$", max_length=256)]
#: a device's product name: printable ASCII (single spaces allowed inside), so that no look-alike letter can
#: open a board of its own (``kictl.lookup.fold_name`` catches the ASCII look-alikes in review)
Product = Annotated[str, StringConstraints(pattern=r"^[!-~]+( [!-~]+)*$", max_length=128)]
FamilyName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=128)]
Ratio = Annotated[float, Field(ge=0.0, le=1.0)]
NonNegativeFloat = Annotated[float, Field(ge=0.0)]

_TIMESTAMP_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def _check_timestamp(value: str) -> str:
    if not _TIMESTAMP_RE.match(value):
        raise ValueError("timestamps are RFC 3339 UTC with milliseconds and Z, e.g. 2026-11-30T07:31:00.000Z")
    try:
        datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"not a real date and time: {value}") from exc
    return value


Timestamp = Annotated[str, AfterValidator(_check_timestamp)]


def format_timestamp(moment: datetime) -> str:
    """A timezone-aware datetime as RFC 3339 UTC with milliseconds and ``Z``."""
    if moment.tzinfo is None:
        raise ValueError("format_timestamp needs a timezone-aware datetime")
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_timestamp(value: str) -> datetime:
    """The UTC datetime of a record timestamp."""
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def now_timestamp() -> str:
    """The current time as a record timestamp."""
    return format_timestamp(datetime.now(UTC))


Status = Literal[
    "passed",
    "incorrect_numerical",
    "incorrect_shape",
    "incorrect_dtype",
    "runtime_error",
    "compile_error",
    "timeout",
    "reward_hack",
]
Statistic = Literal["mean", "median", "min", "max", "p10", "p90"]
STATUSES: tuple[str, ...] = Status.__args__  # type: ignore[attr-defined]
STATISTICS: tuple[str, ...] = Statistic.__args__  # type: ignore[attr-defined]


class WireModel(BaseModel):
    """Frozen, strict, closed, camelCase on the wire: the base of every part of a record.

    The policy and the trust module's documents (trust root, predicates) use it too.
    """

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        strict=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        defer_build=True,  # validators are built on first use: commands that never validate start faster
    )


class Metadata(WireModel):
    """Presentation only; not covered by the digest."""

    name: Name
    title: str | None = None
    labels: dict[str, str] | None = None


# --------------------------------------------------------------------------- Definition


class ConstAxis(WireModel):
    type: Literal["const"]
    value: SafeInt
    description: str | None = None


class VarAxis(WireModel):
    type: Literal["var"]
    description: str | None = None


Axis = Annotated[ConstAxis | VarAxis, Field(discriminator="type")]


class TensorSpec(WireModel):
    """An input or output: ``shape`` lists axis names, ``null`` for a scalar."""

    shape: tuple[str, ...] | None
    dtype: DType
    description: str | None = None


class Tolerance(WireModel):
    """Element-wise closeness: |out - ref| <= atol + rtol * |ref| on at least ``required_matched_ratio``.

    ``judge`` names another comparison where closeness does not fit the output (issue 42,
    ``kictl.families.judges``): ``index-set`` (top-k indices, any order), ``index-sequence`` (indices whose
    order matters) or ``distribution`` (samples: total variation at most ``max_total_variation`` over
    ``trials`` calls on one input).
    """

    atol: NonNegativeFloat | None = None
    rtol: NonNegativeFloat | None = None
    required_matched_ratio: Ratio | None = None
    judge: Literal["allclose", "index-set", "index-sequence", "distribution"] | None = None
    max_total_variation: Ratio | None = None
    trials: PositiveInt | None = None


class DefinitionSpec(WireModel):
    name: Name
    family: FamilyName
    description: str | None = None
    axes: dict[str, Axis]
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    constraints: tuple[str, ...] | None = None
    reference: str
    tags: tuple[str, ...] | None = None
    determinism: Literal["deterministic", "nondeterministic"] | None = None
    #: a function of the reference's module that makes the workloads' ``generated`` inputs (issue 42): called in
    #: kictl's reference worker as ``f(seed, <axes named by its other parameters>)``, it returns a dict name -> tensor.
    inputs_entrypoint: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    #: the precision contract: the loosest tolerance any run of this definition is judged at (docs/records.md).
    #: Workloads and the command line may tighten it, never loosen it; absent, kictl's defaults apply.
    tolerance: Tolerance | None = None

    @model_validator(mode="after")
    def _shapes_use_known_axes(self) -> DefinitionSpec:
        for group in ("inputs", "outputs"):
            for tensor_name, tensor in getattr(self, group).items():
                for axis in tensor.shape or ():
                    if axis not in self.axes:
                        raise ValueError(f"{group}.{tensor_name} uses axis {axis!r}, which axes does not declare")
        if not self.outputs:
            raise ValueError("a definition has at least one output")
        return self


# --------------------------------------------------------------------------- Workload


class RandomInput(WireModel):
    """A tensor of random values drawn from ``seed``."""

    type: Literal["random"]
    seed: NonNegativeInt | None = None


class ScalarInput(WireModel):
    type: Literal["scalar"]
    value: bool | SafeInt | float


class BlobInput(WireModel):
    """A tensor stored in a safetensors blob under ``registry/blobs/``.

    A blob the source named but did not ship is kept with its ``path`` and
    ``missing: true`` so that workloads whose blobs differ stay distinct.
    """

    type: Literal["blob"]
    digest: Digest | None = None
    key: str
    path: str | None = None
    missing: bool | None = None

    @model_validator(mode="after")
    def _digest_or_missing(self) -> BlobInput:
        if self.missing:
            if self.path is None:
                raise ValueError("a missing blob keeps the source's path")
        elif self.digest is None:
            raise ValueError("a blob input needs its digest (or missing: true and the source path)")
        return self


class SynthesizedInput(WireModel):
    """A structural tensor (indptr, indices, …) that the family synthesises from the axes."""

    type: Literal["synthesized"]
    seed: NonNegativeInt | None = None


class GeneratedInput(WireModel):
    """A tensor the definition's ``inputs_entrypoint`` makes from the axes and ``seed`` (in kictl's reference
    worker, never in an implementation's process)."""

    type: Literal["generated"]
    seed: NonNegativeInt | None = None


WorkloadInput = Annotated[
    RandomInput | ScalarInput | BlobInput | SynthesizedInput | GeneratedInput, Field(discriminator="type")
]


class WorkloadSpec(WireModel):
    definition_digest: Digest
    axes: dict[str, SafeInt]
    inputs: dict[str, WorkloadInput]
    tolerance: Tolerance | None = None
    uuid: str | None = None


# --------------------------------------------------------------------------- Implementation


class SourceFile(WireModel):
    path: str
    sha256: HexSha256
    content: str

    @model_validator(mode="after")
    def _hash_matches(self) -> SourceFile:
        actual = hashlib.sha256(self.content.encode("utf-8")).hexdigest()
        if actual != self.sha256:
            raise ValueError(f"sha256 of {self.path} is {actual}, the record says {self.sha256}")
        return self


class ImplementationSpec(WireModel):
    name: Name
    project: str | None = None
    definition_digest: Digest | None = None
    runtime: str
    entry_point: Annotated[str, StringConstraints(pattern=r"^[^:]+::[A-Za-z_][A-Za-z0-9_]*$")]
    sources: tuple[SourceFile, ...]
    dependencies: dict[str, str] | None = None
    revision: str | None = None
    license: str | None = None
    availability: Literal["package", "source", "vendored"] | None = None
    author: str | None = None
    description: str | None = None
    target_hardware: tuple[str, ...] | None = None
    build_commands: tuple[str, ...] | None = None

    @model_validator(mode="after")
    def _entry_file_present(self) -> ImplementationSpec:
        entry_file = self.entry_point.split("::", 1)[0]
        paths = [source.path for source in self.sources]
        if entry_file not in paths:
            raise ValueError(f"entry point file {entry_file!r} is not among the sources {paths}")
        if len(set(paths)) != len(paths):
            raise ValueError("source paths repeat")
        return self


# --------------------------------------------------------------------------- BenchmarkProtocol


class Harness(WireModel):
    name: str
    version: str | None = None
    repository: str | None = None
    #: the harness's source commit when it ran from a git checkout ("+dirty" when its files had changed)
    commit: str | None = None


class CorrectnessProtocol(WireModel):
    reference: str
    comparator: str
    atol: NonNegativeFloat | None = None
    rtol: NonNegativeFloat | None = None
    required_matched_ratio: Ratio | None = None
    rounds: PositiveInt | None = None


class EnergyMethod(WireModel):
    """``measurement.energy`` of an energy protocol (issue 31; kictl/bench/judge/energy.py says the method)."""

    counter: str
    method: str
    idle_s: NonNegativeFloat
    loop_s: NonNegativeFloat
    settle_s: NonNegativeFloat
    trials: PositiveInt
    cache: Literal["warm"]


class Measurement(WireModel):
    timer: str
    primary_statistic: Statistic
    warmup: NonNegativeInt | None = None
    #: Seconds after which the warm-up ended early, counted from the end of its first call; then one more call.
    warmup_time_budget_s: NonNegativeFloat | None = None
    iterations: NonNegativeInt | None = None
    trials: NonNegativeInt | None = None
    l2_flush: bool | None = None
    l2_flush_bytes: NonNegativeInt | None = None
    cuda_graph: bool | None = None
    input_policy: str | None = None
    setup_in_timed_region: bool | None = None
    device: str | None = None
    #: What lies between the timer's start and stop, in words (e.g. launches enqueued ahead of the start event).
    timed_region: str | None = None
    #: How the implementation's worker was isolated (issue 10), e.g. "bubblewrap 0.8.0: ..." or "none: --no-sandbox".
    isolation: str | None = None
    #: CPU threads the worker was pinned to and torch was allowed (issue 10).
    threads: PositiveInt | None = None
    #: Input sets the timed calls rotate over (same structure, fresh values).
    input_sets: PositiveInt | None = None
    #: Adaptive repetition: stop once the median's relative error is below this, or the budget is spent.
    target_relative_error: NonNegativeFloat | None = None
    time_budget_s: NonNegativeFloat | None = None
    #: The energy family (``kictl-nvml-energy``, issue 31): how energy per call was measured.
    energy: EnergyMethod | None = None


class Comparability(WireModel):
    family: str


class BenchmarkProtocolSpec(WireModel):
    harness: Harness
    correctness: CorrectnessProtocol
    measurement: Measurement
    comparability: Comparability


# --------------------------------------------------------------------------- ExecutionEnvironment


class Hardware(WireModel):
    vendor: str | None = None
    #: printable ASCII, like every name (docs/records.md "Names"): "Н200" with a Cyrillic En is refused
    product: Product
    architecture: str | None = None
    compute_capability: str | None = None
    sm_count: NonNegativeInt | None = None
    memory_bytes: NonNegativeInt | None = None
    l2_cache_bytes: NonNegativeInt | None = None
    count: PositiveInt | None = None
    cpu: str | None = None


class Framework(WireModel):
    name: str
    version: str | None = None


class Software(WireModel):
    framework: Framework | None = None
    cuda_toolkit: str | None = None
    driver: str | None = None
    libraries: dict[str, str] | None = None
    python: str | None = None
    os: str | None = None


class ExecutionEnvironmentSpec(WireModel):
    hardware: Hardware
    software: Software


# --------------------------------------------------------------------------- BenchmarkRun


class LatencyNs(WireModel):
    mean: NonNegativeInt | None = None
    median: NonNegativeInt | None = None
    min: NonNegativeInt | None = None
    max: NonNegativeInt | None = None
    p10: NonNegativeInt | None = None
    p90: NonNegativeInt | None = None
    stdev: NonNegativeInt | None = None


class ClockReading(WireModel):
    """One NVML reading of the GPU (kictl.bench.worker.gpu_state)."""

    sm_clock_mhz: NonNegativeInt
    memory_clock_mhz: NonNegativeInt
    temperature_c: int
    power_milliwatts: NonNegativeInt
    throttle_reasons: tuple[str, ...] = ()


class Timing(WireModel):
    latency_ns: LatencyNs
    samples: tuple[NonNegativeInt, ...] | None = None
    primary_statistic: Statistic
    #: Samples whose call was wholly enqueued before the GPU reached the start event (host ahead).
    enqueued_ahead: NonNegativeInt | None = None
    #: The device-side spin put before each start event to keep the GPU busy while the host enqueues.
    device_spin_ns: NonNegativeInt | None = None
    #: Half-width of the median's ~95% confidence interval over the median, when the samples were taken.
    median_relative_error: NonNegativeFloat | None = None
    #: Why the timed calls stopped (a fixed count, the target error reached, the time budget spent).
    stop_reason: str | None = None
    #: Warm-up calls made, where the protocol's warm-up time budget ended them before its count.
    warmup_calls: NonNegativeInt | None = None
    #: Timed calls whose outputs kictl's parent fetched and checked (chosen after each call returned).
    audited: NonNegativeInt | None = None
    #: The CPUs the worker was pinned to.
    cpus: tuple[NonNegativeInt, ...] | None = None
    #: Median wall time kictl's parent saw around each timed call's request.
    parent_wall_ns: NonNegativeInt | None = None
    #: The machine's 1-minute load average at the end of the run.
    load_average: NonNegativeFloat | None = None
    #: CUPTI timer: median of the CUDA events figures of the same calls (the cross-check), and the kernels,
    #: copies and memsets each call caused (median)
    events_median_ns: NonNegativeInt | None = None
    kernels_per_call: NonNegativeInt | None = None
    #: CUPTI timer: median of the device time each call's activities covered (its span less the gaps between
    #: them: what a profiler's sum of kernel durations adds up, without the profiler's own cost per kernel)
    busy_median_ns: NonNegativeInt | None = None
    #: GPU: NVML readings before and after the timed calls, and whether the clocks held (no throttling)
    clocks: tuple[ClockReading, ...] | None = None
    clocks_steady: bool | None = None
    clocks_detail: str | None = None

    @model_validator(mode="after")
    def _primary_present(self) -> Timing:
        if getattr(self.latency_ns, self.primary_statistic) is None:
            raise ValueError(f"the primary statistic {self.primary_statistic!r} has no value in latencyNs")
        return self

    def primary_ns(self) -> int:
        value = getattr(self.latency_ns, self.primary_statistic)
        assert isinstance(value, int)
        return value


class RunCorrectness(WireModel):
    comparator: str
    maximum_absolute_error: NonNegativeFloat | None = None
    maximum_relative_error: NonNegativeFloat | None = None
    matched_ratio: Ratio | None = None
    rounds: PositiveInt | None = None


class SourceNative(WireModel):
    source: str
    benchmark: str | None = None
    external_id: str | None = None
    metrics: dict[str, float | None] | None = None


class IntegrityCheck(WireModel):
    result: Literal["passed", "failed", "skipped"]
    detail: str | None = None


class EnergyTrial(WireModel):
    """One back-to-back loop of an energy run (issue 31)."""

    calls: PositiveInt
    loop_ns: NonNegativeInt
    joules_per_call: NonNegativeFloat
    board_joules_per_call: NonNegativeFloat
    board_watts: NonNegativeFloat
    idle_watts: NonNegativeFloat
    window_ms: NonNegativeFloat
    counter_steps: NonNegativeInt
    uncertainty: NonNegativeFloat


class RunEnergy(WireModel):
    """A run's energy per call (issue 31): the median of its trials, idle draw subtracted."""

    counter: str
    joules_per_call: NonNegativeFloat
    board_joules_per_call: NonNegativeFloat
    average_watts: NonNegativeFloat
    idle_watts: NonNegativeFloat
    calls_per_joule: NonNegativeFloat | None = None
    ns_per_call: NonNegativeInt
    spread: NonNegativeFloat
    counter_period_ms: NonNegativeFloat
    counter_period_range_ms: tuple[NonNegativeFloat, NonNegativeFloat]
    counter_unit_millijoules: PositiveInt
    uncertainty: NonNegativeFloat
    power_limit_milliwatts: NonNegativeInt | None = None
    trials: tuple[EnergyTrial, ...] = Field(min_length=1)
    clocks: tuple[ClockReading, ...] | None = None
    clocks_steady: bool | None = None
    clocks_detail: str | None = None


class BenchmarkRunSpec(WireModel):
    status: Status
    status_detail: str | None = None
    timing: Timing | None = None
    observed_at: Timestamp
    correctness: RunCorrectness | None = None
    definition_digest: Digest | None = None
    workload_digest: Digest
    implementation_digest: Digest
    protocol_digest: Digest
    environment_digest: Digest
    source_native: SourceNative | None = None
    integrity: dict[str, IntegrityCheck] | None = None
    synthesized_inputs: tuple[str, ...] | None = None
    #: The secret drawn at bench time that seeded the correctness rounds' and timed calls' values (issue 10),
    #: disclosed once the run is over so that anyone can rebuild those inputs.
    input_secret: str | None = None
    #: Energy per call, in runs of the ``kictl-nvml-energy`` family (issue 31).
    energy: RunEnergy | None = None

    @model_validator(mode="after")
    def _passed_has_timing(self) -> BenchmarkRunSpec:
        if self.status == "passed" and self.timing is None:
            raise ValueError("a passed run has timing")
        return self


# --------------------------------------------------------------------------- records


class Definition(WireModel):
    api_version: Literal["kernelindex.dev/v1alpha1"]
    kind: Literal["Definition"]
    metadata: Metadata
    spec: DefinitionSpec

    @model_validator(mode="after")
    def _alias_is_name(self) -> Definition:
        if self.metadata.name != self.spec.name:
            raise ValueError(f"metadata.name {self.metadata.name!r} differs from spec.name {self.spec.name!r}")
        return self


class Workload(WireModel):
    api_version: Literal["kernelindex.dev/v1alpha1"]
    kind: Literal["Workload"]
    metadata: Metadata
    spec: WorkloadSpec


class Implementation(WireModel):
    api_version: Literal["kernelindex.dev/v1alpha1"]
    kind: Literal["Implementation"]
    metadata: Metadata
    spec: ImplementationSpec


class BenchmarkProtocol(WireModel):
    api_version: Literal["kernelindex.dev/v1alpha1"]
    kind: Literal["BenchmarkProtocol"]
    metadata: Metadata
    spec: BenchmarkProtocolSpec


class ExecutionEnvironment(WireModel):
    api_version: Literal["kernelindex.dev/v1alpha1"]
    kind: Literal["ExecutionEnvironment"]
    metadata: Metadata
    spec: ExecutionEnvironmentSpec


class BenchmarkRun(WireModel):
    api_version: Literal["kernelindex.dev/v1alpha1"]
    kind: Literal["BenchmarkRun"]
    metadata: Metadata
    spec: BenchmarkRunSpec


AnyRecord: TypeAlias = Definition | Workload | Implementation | BenchmarkProtocol | ExecutionEnvironment | BenchmarkRun
AnySpec: TypeAlias = (
    DefinitionSpec
    | WorkloadSpec
    | ImplementationSpec
    | BenchmarkProtocolSpec
    | ExecutionEnvironmentSpec
    | BenchmarkRunSpec
)
RECORD_ADAPTER: TypeAdapter[AnyRecord] = TypeAdapter(
    Annotated[AnyRecord, Field(discriminator="kind")], config=ConfigDict(defer_build=True)
)
_RECORD_CLASSES: dict[str, type[AnyRecord]] = {
    "Definition": Definition,
    "Workload": Workload,
    "Implementation": Implementation,
    "BenchmarkProtocol": BenchmarkProtocol,
    "ExecutionEnvironment": ExecutionEnvironment,
    "BenchmarkRun": BenchmarkRun,
}
_SPEC_KINDS: dict[type[AnySpec], str] = {
    DefinitionSpec: "Definition",
    WorkloadSpec: "Workload",
    ImplementationSpec: "Implementation",
    BenchmarkProtocolSpec: "BenchmarkProtocol",
    ExecutionEnvironmentSpec: "ExecutionEnvironment",
    BenchmarkRunSpec: "BenchmarkRun",
}

#: For each kind, the members of its spec that name other records, and their kinds.
REFERENCE_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "Workload": (("definitionDigest", "Definition"),),
    "Implementation": (("definitionDigest", "Definition"),),
    "BenchmarkRun": (
        ("definitionDigest", "Definition"),
        ("workloadDigest", "Workload"),
        ("implementationDigest", "Implementation"),
        ("protocolDigest", "BenchmarkProtocol"),
        ("environmentDigest", "ExecutionEnvironment"),
    ),
}


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A validated record with the JSON value it was read from and its digest."""

    model: AnyRecord
    raw: dict[str, Any]
    digest: str

    @property
    def kind(self) -> str:
        return self.model.kind

    @property
    def name(self) -> str:
        return self.model.metadata.name

    @property
    def title(self) -> str | None:
        return self.model.metadata.title

    def references(self) -> Iterator[tuple[str, str, str]]:
        """``(member, digest, expected kind)`` for each record this one names."""
        spec = self.raw["spec"]
        for member, kind in REFERENCE_FIELDS.get(self.kind, ()):
            value = spec.get(member)
            if isinstance(value, str):
                yield member, value, kind

    def blob_references(self) -> Iterator[tuple[str, str]]:
        """``(input name, blob digest)`` for each blob a workload names."""
        if isinstance(self.model, Workload):
            for input_name, source in self.model.spec.inputs.items():
                if isinstance(source, BlobInput) and source.digest is not None:
                    yield input_name, source.digest


# --------------------------------------------------------------------------- errors


def _describe(error: Mapping[str, Any]) -> str:
    kind = error.get("type")
    if kind == "extra_forbidden":
        return "unknown member"
    if kind == "missing":
        return "missing member"
    if kind == "union_tag_invalid":
        ctx = error.get("ctx", {})
        return (
            f"unknown {ctx.get('discriminator', 'tag')} {ctx.get('tag')!r}; expected one of {ctx.get('expected_tags')}"
        )
    if kind == "union_tag_not_found":
        return f"missing member {error.get('ctx', {}).get('discriminator', '')}".rstrip()
    message = str(error.get("msg", "invalid"))
    return message.removeprefix("Value error, ")


def _json_path(raw: Any, loc: tuple[Any, ...]) -> str:
    """Map a pydantic error location onto the JSON value, dropping union tags."""
    path: list[str | int] = []
    node = raw
    for position, part in enumerate(loc):
        last = position == len(loc) - 1
        if isinstance(node, dict) and isinstance(part, str):
            if part in node:
                path.append(part)
                node = node[part]
            elif last:
                path.append(part)
            # else: a discriminated-union tag, not a member
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            path.append(part)
            node = node[part]
        elif last:
            path.append(part)
    return canon.format_path(tuple(path))


def validation_error(exc: ValidationError, raw: Any, source: str) -> RecordError:
    """One ``source: $.path: message`` line per problem, the first as the message."""
    located = [(_json_path(raw, tuple(err["loc"])), _describe(err)) for err in exc.errors()]
    (pointer, message), rest = located[0], located[1:]
    return RecordError(message, path=source, pointer=pointer, details=[f"{source}: {p}: {m}" for p, m in rest])


# --------------------------------------------------------------------------- loading


def _check_envelope(raw: Any, source: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise RecordError(f"a record is a JSON object, found {type(raw).__name__}", path=source, pointer="$")
    kind = raw.get("kind")
    if "kind" in raw and kind not in KINDS:
        raise RecordError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}", path=source, pointer="$.kind")
    return raw


def record_from_value(raw: Any, *, source: str = "<input>") -> StoredRecord:
    """Validate one record given as a parsed JSON value; raises ``RecordError``."""
    raw = _check_envelope(raw, source)
    try:
        model = RECORD_ADAPTER.validate_json(json.dumps(raw, allow_nan=False))
    except ValidationError as exc:
        raise validation_error(exc, raw, source) from exc
    except ValueError as exc:
        raise RecordError(str(exc), path=source) from exc
    return StoredRecord(model=model, raw=raw, digest=canon.record_digest(raw))


def load_record_file(data: bytes, *, source: str = "<input>") -> tuple[StoredRecord, bool]:
    """Parse strictly and validate one record file; raises ``RecordError``.

    Returns the record and whether ``data`` is its normal form (docs/records.md);
    the normal form and the digest come from one traversal.
    """
    raw = _check_envelope(canon.parse_record_json(data, source=source), source)
    try:
        normal, digest = canon.record_forms(raw)
    except RecordError:
        # an integer beyond ±(2^53-1): the strict parser says where, or reads it as the double it is
        raw = _check_envelope(canon.parse_json(data, source=source), source)
        normal, digest = canon.record_forms(raw)
    try:
        model = RECORD_ADAPTER.validate_json(data)
    except ValidationError as exc:
        raise validation_error(exc, raw, source) from exc
    return StoredRecord(model=model, raw=raw, digest=digest), normal == data


def record_from_bytes(data: bytes, *, source: str = "<input>") -> StoredRecord:
    """Parse strictly and validate one record file; raises ``RecordError``."""
    return load_record_file(data, source=source)[0]


def record_from_model(model: AnyRecord) -> StoredRecord:
    """The stored form of a record built in code: exactly the members that were set."""
    raw = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    raw["apiVersion"] = model.api_version
    raw["kind"] = model.kind
    return StoredRecord(model=model, raw=raw, digest=canon.record_digest(raw))


def new_record(
    spec: AnySpec, *, name: str, title: str | None = None, labels: dict[str, str] | None = None
) -> StoredRecord:
    """Wrap a spec into a record of its kind and return its stored form."""
    kind = _SPEC_KINDS[type(spec)]
    metadata: dict[str, Any] = {"name": name}
    if title is not None:
        metadata["title"] = title
    if labels is not None:
        metadata["labels"] = labels
    cls = _RECORD_CLASSES[kind]
    model = cls(api_version=API_VERSION, kind=kind, metadata=Metadata(**metadata), spec=spec)  # type: ignore[arg-type]
    return record_from_model(model)


def records_in_document(value: Any, *, source: str) -> list[tuple[str, Any]]:
    """Split a document into its records: one record, a list, or a manifest.

    A manifest is an object whose member values are records, e.g.
    ``{"run": {...}, "protocol": {...}}``.  Returns ``(source label, value)``
    pairs, the label naming the element (``file.json[2]``,
    ``file.json#run``).  Raises ``RecordError`` for anything else.
    """
    if isinstance(value, list):
        return [(f"{source}[{index}]", item) for index, item in enumerate(value)]
    if isinstance(value, dict):
        if "kind" in value or "apiVersion" in value or "spec" in value:
            return [(source, value)]
        if value and all(isinstance(item, dict) and "kind" in item for item in value.values()):
            return [(f"{source}#{key}", item) for key, item in value.items()]
        raise RecordError("neither a record (it has no kind) nor a manifest of records", path=source, pointer="$")
    raise RecordError("expected a record, a list of records or a manifest", path=source, pointer="$")


def spec_wire(record: StoredRecord) -> dict[str, Any]:
    """The spec of a record as JSON (the members it has)."""
    spec: dict[str, Any] = record.raw["spec"]
    return spec
