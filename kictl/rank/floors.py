"""Physical floors of a workload on a GPU (docs/leaderboards.md): bytes over datasheet bandwidth, FLOPs over
datasheet peak; ``kictl floor``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kictl import families
from kictl.errors import RecordError, UsageError
from kictl.families.gpus import GPUS, find_gpu, normalize_product
from kictl.index.facts import DefinitionFacts, WorkFacts, WorkloadFacts
from kictl.index.query import QueryIndex
from kictl.lookup import closest
from kictl.records import DefinitionSpec, StoredRecord, WorkloadSpec


@dataclass(frozen=True, slots=True)
class FloorEstimate:
    """The physical floor of one workload on one datasheet GPU (docs/leaderboards.md)."""

    workload: str
    workload_name: str
    axes: dict[str, int]
    gpu: str
    bytes: int
    flops: int | None
    compute_dtype: str
    bandwidth_bound_ns: float
    compute_bound_ns: float | None
    floor_ns: float
    bound: str
    sources: tuple[str, ...]
    synthesized: tuple[str, ...]

    @property
    def method(self) -> str:
        return "bandwidth-bound" if self.bound == "bandwidth" else "compute-bound"

    def to_json(self) -> dict[str, Any]:
        """Exactly the members ``kictl floor --json`` publishes."""
        return {
            "workload": self.workload,
            "axes": self.axes,
            "gpu": self.gpu,
            "bytes": self.bytes,
            "flops": self.flops,
            "bandwidthBoundNs": _round_ns(self.bandwidth_bound_ns),
            "computeBoundNs": _round_ns(self.compute_bound_ns),
            "floorNs": _round_ns(self.floor_ns),
            "bound": self.bound,
            "sources": list(self.sources),
        }


def _round_ns(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def resolve_gpu(name: str, known: Iterable[str] = (), *, datasheet_only: bool = False) -> str:
    """The index's product name for ``--gpu``: a datasheet product or alias, or a product the registry names.

    Raises ``UsageError`` (exit 2: the option's value is not one of a known set)
    with the closest known names.
    """
    listed = find_gpu(name)
    if listed is not None:
        return listed.product
    product = normalize_product(name)
    registry_products = sorted(set(known))
    if not datasheet_only:
        for candidate in registry_products:
            if candidate.lower() == product.lower():
                return candidate
    choices = [gpu.product for gpu in GPUS] + ([] if datasheet_only else registry_products)
    aliases = [alias for gpu in GPUS for alias in gpu.aliases]
    near = closest(name, sorted(set(choices + aliases)))
    where = "in the datasheet table" if datasheet_only else "in the datasheet table or the registry"
    details = [f"closest known: {', '.join(near)}"] if near else [f"known: {', '.join(sorted(set(choices)))}"]
    raise UsageError(f"unknown GPU {name!r} ({where})", details=details)


def _spec_of(record: StoredRecord, kind: type[Any]) -> Any:
    spec = record.model.spec
    if not isinstance(spec, kind):
        raise RecordError(f"{record.digest} is a {record.kind}, not a {kind.__name__.removesuffix('Spec')}")
    return spec


def workload_work(index: QueryIndex, definition: DefinitionFacts, workload: WorkloadFacts) -> WorkFacts:
    """Bytes and FLOPs of a workload by its family's formulas, cached in the index.

    Raises ``RecordError`` when the workload does not fit its definition and
    ``RegistryError``/``NotFoundError`` when a record cannot be read.
    """
    cached = index.cached_work(workload.digest)
    if cached is not None:
        return cached
    definition_spec: DefinitionSpec = _spec_of(index.load_record(definition.digest), DefinitionSpec)
    workload_spec: WorkloadSpec = _spec_of(index.load_record(workload.digest), WorkloadSpec)
    made = families.structure(definition_spec, workload_spec, index.registry.read_blob, source=workload.name)
    family = families.family_for(definition_spec.family)
    work = WorkFacts(
        bytes=family.bytes_moved(definition_spec, made),
        flops=family.flops(definition_spec, made),
        compute_dtype=families.compute_dtype(definition_spec),
        synthesized=made.synthesized,
        notes=family.notes(definition_spec, made),
    )
    index.store_work(workload.digest, work)
    return work


def full_axes(index: QueryIndex, definition: DefinitionFacts, workload: WorkloadFacts) -> dict[str, int]:
    """The constant axes of the definition merged with the workload's variable ones."""
    spec: DefinitionSpec = _spec_of(index.load_record(definition.digest), DefinitionSpec)
    return families.full_axes(spec, workload.axes, source=workload.name)


def estimate_floor(
    index: QueryIndex, definition: DefinitionFacts, workload: WorkloadFacts, gpu: str
) -> FloorEstimate | None:
    """The floor of ``workload`` on ``gpu``, ``None`` when the GPU is not in the datasheet table.

    Raises ``RecordError`` when the workload does not fit its definition.
    """
    part = find_gpu(gpu)
    if part is None:
        return None
    work = workload_work(index, definition, workload)
    estimate = families.floor(families.Work(work.bytes, work.flops, work.compute_dtype, work.notes), part)
    return FloorEstimate(
        workload=workload.digest,
        workload_name=workload.name,
        axes=full_axes(index, definition, workload),
        gpu=part.product,
        bytes=work.bytes,
        flops=work.flops,
        compute_dtype=work.compute_dtype,
        bandwidth_bound_ns=estimate.bandwidth_bound_ns,
        compute_bound_ns=estimate.compute_bound_ns,
        floor_ns=estimate.floor_ns,
        bound=estimate.bound,
        sources=estimate.sources,
        synthesized=work.synthesized,
    )


def floors(
    index: QueryIndex, definition_ref: str, gpu_name: str, workload_ref: str | None = None
) -> tuple[DefinitionFacts, list[FloorEstimate]]:
    """``kictl floor``: the floor of every workload of a definition (or one) on a datasheet GPU.

    Raises ``NotFoundError`` (exit 3) for an unknown definition or workload,
    ``UsageError`` (exit 2) for a GPU not in the datasheet table, and
    ``RecordError`` for a workload that does not fit its definition.
    """
    definition = index.resolve_definition(definition_ref)
    gpu = resolve_gpu(gpu_name, datasheet_only=True)
    if workload_ref is not None:
        chosen = [index.resolve_workload(definition.digest, workload_ref)]
    else:
        chosen = index.workloads(definition.digest)
    out = []
    for workload in chosen:
        estimate = estimate_floor(index, definition, workload, gpu)
        assert estimate is not None
        out.append(estimate)
    return definition, out
