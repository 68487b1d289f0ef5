"""Per-family knowledge: structural inputs, their synthesis, and the work a workload does.

A *family* (``gqa-paged-attention``, ``gemm``, ``rmsnorm``, …) knows which of
a definition's inputs are structure rather than data (index tensors), how to
synthesise a valid structure from the axes and a seed when a workload ships
no blob, how many bytes must cross memory (each input read once, each output
written once; for paged attention only the KV pages actually referenced) and
how many FLOPs the definition's reference performs.  ``floor`` turns that
work into the physical floor of docs/leaderboards.md on a datasheet GPU.

Nothing here imports torch: structures are plain lists of ints, so floors and
leaderboards stay light.  ``kictl.bench`` turns the same lists into tensors.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kictl import blobs, dtypes
from kictl.errors import RecordError
from kictl.families.gpus import GPU
from kictl.render import peak as peak_text

if TYPE_CHECKING:  # the records (pydantic) are imported where a workload is read: a bench worker needs only gpus
    from kictl.records import DefinitionSpec, WorkloadSpec

#: Bytes per element of each dtype: the one table (``kictl.dtypes``).
DTYPE_BYTES = dtypes.BYTES

BlobReader = Callable[[str], bytes]


@dataclass(frozen=True, slots=True)
class Structure:
    """A workload made concrete: every axis's value and every structural tensor."""

    axes: dict[str, int]
    tensors: dict[str, list[int]]
    synthesized: tuple[str, ...] = ()
    seed: int = 0


@dataclass(frozen=True, slots=True)
class Work:
    """What a workload must do: bytes across memory, FLOPs (``None`` where no formula)."""

    bytes: int
    flops: int | None
    compute_dtype: str
    notes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Floor:
    """The larger of bytes over bandwidth and FLOPs over peak, on one GPU (docs/leaderboards.md)."""

    gpu: str
    bandwidth_bound_ns: float
    compute_bound_ns: float | None
    floor_ns: float
    bound: str  # "bandwidth" or "compute"
    sources: tuple[str, ...]

    @property
    def method(self) -> str:
        return "bandwidth-bound" if self.bound == "bandwidth" else "compute-bound"


# --------------------------------------------------------------------------- axes and tensors


def full_axes(spec: DefinitionSpec, workload_axes: dict[str, int], *, source: str = "workload") -> dict[str, int]:
    """Constant axes from the definition merged with the workload's variable ones.

    Raises ``RecordError`` when a variable axis has no value, a value is given
    for an axis the definition does not have, or a constant is contradicted.
    """
    axes: dict[str, int] = {}
    for name, axis in spec.axes.items():
        if axis.type == "const":
            given = workload_axes.get(name)
            if given is not None and given != axis.value:
                raise RecordError(f"{source}: axis {name} is constant {axis.value} in the definition, not {given}")
            axes[name] = axis.value
        elif name in workload_axes:
            axes[name] = workload_axes[name]
        else:
            raise RecordError(f"{source}: variable axis {name} has no value")
    unknown = sorted(set(workload_axes) - set(spec.axes))
    if unknown:
        raise RecordError(f"{source}: axes {', '.join(unknown)} are not axes of {spec.name}")
    negative = sorted(name for name, value in axes.items() if value < 0)
    if negative:
        raise RecordError(f"{source}: axes {', '.join(negative)} are negative")
    return axes


def tensor_shape(spec: DefinitionSpec, name: str, axes: dict[str, int]) -> tuple[int, ...]:
    """The concrete shape of an input or output (``()`` for a scalar)."""
    tensor = spec.inputs.get(name) or spec.outputs[name]
    return tuple(axes[axis] for axis in tensor.shape or ())


def tensor_bytes(spec: DefinitionSpec, name: str, axes: dict[str, int]) -> int:
    tensor = spec.inputs.get(name) or spec.outputs[name]
    return int(math.prod(tensor_shape(spec, name, axes)) * DTYPE_BYTES[tensor.dtype])


def paged_bytes(
    spec: DefinitionSpec, axes: dict[str, int], tokens: int, is_cache: Callable[[str, tuple[str, ...]], bool]
) -> int:
    """The bytes a paged kernel moves: of each cache input (``is_cache(name, shape)``; its first two axes page
    it, the rest are one token's) the ``tokens`` it reads, every other input and every output whole."""
    total = 0
    for name, tensor in spec.inputs.items():
        shape = tensor.shape or ()
        if is_cache(name, shape):
            per_token = math.prod(axes[axis] for axis in shape[2:])
            total += int(tokens * per_token * DTYPE_BYTES[tensor.dtype])
        else:
            total += tensor_bytes(spec, name, axes)
    return total + sum(tensor_bytes(spec, name, axes) for name in spec.outputs)


def compute_dtype(spec: DefinitionSpec) -> str:
    """The dtype whose peak bounds the arithmetic, as the definition's family says (``Family.compute_dtype``)."""
    return family_for(spec.family).compute_dtype(spec)


def first_float_dtype(spec: DefinitionSpec) -> str:
    """The dtype of the first floating-point input with a shape (the default compute dtype)."""
    for tensor in spec.inputs.values():
        if tensor.dtype.startswith(("float", "bfloat")) and tensor.shape:
            return tensor.dtype
    return next(iter(spec.inputs.values())).dtype if spec.inputs else "float32"


# --------------------------------------------------------------------------- families


class Family:
    """The generic family: no structural inputs, all bytes counted, no FLOP formula."""

    name = "generic"
    structural_inputs: frozenset[str] = frozenset()

    def structural(self, spec: DefinitionSpec) -> list[str]:
        """The definition's inputs that this family treats as structure, in order."""
        return [name for name in spec.inputs if name in self.structural_inputs]

    def synthesize(self, spec: DefinitionSpec, axes: dict[str, int], seed: int) -> dict[str, list[int]]:
        """A valid structure for ``axes``, the same for the same seed."""
        wanted = self.structural(spec)
        if wanted:  # pragma: no cover - subclasses that declare structure synthesise it
            raise RecordError(f"family {self.name} cannot synthesise {', '.join(wanted)}")
        return {}

    def check_axes(self, spec: DefinitionSpec, axes: dict[str, int]) -> None:
        """Raise ``RecordError`` when no valid structure has these axes (cheap: draws nothing)."""

    def bytes_moved(self, spec: DefinitionSpec, structure: Structure) -> int:
        return sum(tensor_bytes(spec, name, structure.axes) for name in (*spec.inputs, *spec.outputs))

    def flops(self, spec: DefinitionSpec, structure: Structure) -> int | None:
        return None

    def notes(self, spec: DefinitionSpec, structure: Structure) -> dict[str, int]:
        return {}

    def compute_dtype(self, spec: DefinitionSpec) -> str:
        """The dtype whose peak bounds the FLOPs (the lowest precision the arithmetic may legally run in)."""
        return first_float_dtype(spec)

    def generated(self, spec: DefinitionSpec) -> dict[str, str]:
        """Inputs whose values must have a structure random draws lack (a distribution, a probability, a
        packed cache), each with the name of the ``kictl.bench.wire.generators`` function that draws them."""
        return {}

    def relations(self, spec: DefinitionSpec) -> list[str]:
        """Constraints that hold for every valid structure of this family (``kictl.families.legal`` forms):
        relations between axes, and the smallest legal value of an axis."""
        return []


_REGISTRY: dict[str, Family] = {}


def register(family: Family, *names: str) -> None:
    for name in (family.name, *names):
        _REGISTRY[name] = family


def family_for(name: str) -> Family:
    """The family of that name, or the generic family."""
    _load_builtin()
    return _REGISTRY.get(name, _GENERIC)


def known_families() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


_GENERIC = Family()
_LOADED = False


def _load_builtin() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    # the registry loads its families on first use: each imports this package (tests/test_imports.py's one shape)
    from kictl.families import attention, gdn, gemm, mamba, moe, norm, rope, sampling, sparse

    for module in (attention, gemm, norm, sparse, moe, gdn, mamba, sampling, rope):
        module.register_all()


# --------------------------------------------------------------------------- workloads


def structure(
    spec: DefinitionSpec,
    workload: WorkloadSpec,
    read_blob: BlobReader | None = None,
    *,
    source: str = "workload",
    seed_offset: int = 0,
) -> Structure:
    """The concrete axes and structural tensors of a workload.

    Structural inputs come from their blob when the workload names one and
    ``read_blob`` can read it; otherwise they are synthesised from the axes
    and the workload's seed (plus ``seed_offset``) and listed in
    ``Structure.synthesized``.  Raises ``RecordError`` on inconsistent axes or blobs.
    """
    from kictl.records import BlobInput, SynthesizedInput  # pydantic: a bench worker imports this package without it

    axes = full_axes(spec, workload.axes, source=source)
    family = family_for(spec.family)
    names = family.structural(spec)
    tensors: dict[str, list[int]] = {}
    missing: list[str] = []
    seed = 0
    for name in names:
        given = workload.inputs.get(name)
        if isinstance(given, BlobInput) and given.digest is not None and read_blob is not None:
            try:
                data = read_blob(given.digest)
            except (OSError, RecordError, LookupError):
                missing.append(name)
                continue
            tensors[name] = blobs.read_int_tensor(data, given.key, source=f"{source}: blob {given.digest}")
        else:
            if isinstance(given, SynthesizedInput) and given.seed is not None:
                seed = given.seed
            missing.append(name)
    synthesized: tuple[str, ...] = ()
    if missing:
        made = family.synthesize(spec, axes, seed + seed_offset)
        for name in missing:
            tensors[name] = made[name]
        synthesized = tuple(missing)
    for name in names:
        expected = math.prod(tensor_shape(spec, name, axes))
        if len(tensors[name]) != expected:
            raise RecordError(f"{source}: {name} has {len(tensors[name])} values, its shape says {expected}")
    return Structure(axes=axes, tensors=tensors, synthesized=synthesized, seed=seed + seed_offset)


def work(spec: DefinitionSpec, workload: WorkloadSpec, read_blob: BlobReader | None = None) -> Work:
    """Bytes and FLOPs of a workload by its family's formulas."""
    made = structure(spec, workload, read_blob)
    family = family_for(spec.family)
    return Work(
        bytes=family.bytes_moved(spec, made),
        flops=family.flops(spec, made),
        compute_dtype=family.compute_dtype(spec),
        notes=family.notes(spec, made),
    )


def floor(amount: Work, gpu: GPU) -> Floor:
    """The physical floor of ``amount`` on ``gpu`` (an estimate, never evidence)."""
    bandwidth_ns = amount.bytes / gpu.memory_bandwidth * 1e9
    sources = [f"{gpu.product} memory bandwidth {peak_text(gpu.memory_bandwidth, 'B/s')}: {gpu.source}"]
    compute_ns: float | None = None
    if amount.flops is not None:
        peak, used = gpu.peak_for(amount.compute_dtype)
        compute_ns = amount.flops / peak * 1e9
        sources.append(f"{gpu.product} dense {used} peak {peak_text(peak, 'FLOP/s')}: {gpu.source}")
    if compute_ns is not None and compute_ns > bandwidth_ns:
        return Floor(gpu.product, bandwidth_ns, compute_ns, compute_ns, "compute", tuple(sources))
    return Floor(gpu.product, bandwidth_ns, compute_ns, bandwidth_ns, "bandwidth", tuple(sources))
