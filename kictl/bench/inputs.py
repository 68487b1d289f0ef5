"""A workload's inputs, planned without torch and made into tensors in the worker.

DESIGN §7: inputs come from the workload.  ``plan_inputs`` turns a Workload
into an ``InputPlan`` — plain data that crosses a process boundary — and
``materialize`` turns a plan into the positional arguments of ``run(...)``
(``definitions.signature(spec).inputs`` order) on a device.

* ``random``: a tensor of standard-normal values (floating dtypes) or small
  integers, drawn with a ``torch.Generator`` seeded from the workload's seed
  on the device that runs the workload: the CPU's generator on the CPU,
  torch's CUDA (Philox) generator on a GPU, whose values for a seed depend on
  the GPU's model (torch spreads the draw by its number of SMs), so a GPU run
  and a CPU run see different values, and every worker of a session (one
  device) the same ones.  Drawing on the CPU cost the h24 attention suite
  about 5 s of its 21 s on the H200 (call AR, benchmarks/HISTORY-2026-12-01.md).  Offset 0 (the timed
  inputs) uses the seed as given;
  offset ``k`` (correctness round ``k``) uses ``derive_seed(seed, k)``.  A
  random input without a seed is seeded from the workload's digest and the
  input's name.
* ``scalar``: the value, as a Python number.
* ``blob``: a tensor read from a safetensors blob of the registry.
* structural tensors (``qo_indptr``, ``kv_indices``, …): from
  ``families.structure(spec, workload, read_blob, seed_offset=k)``, synthesised
  from the axes when the workload ships no blob; the plan lists them in
  ``synthesized`` and the run records that list.
"""

from __future__ import annotations

import array
import hashlib
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kictl import blobs, families, layout
from kictl.bench import integrity, wire
from kictl.errors import RecordError
from kictl.records import BlobInput, DefinitionSpec, RandomInput, ScalarInput, StoredRecord, WorkloadSpec

BlobReader = Callable[[str], bytes]
FLOAT_DTYPES = frozenset({"float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"})


@dataclass(frozen=True, slots=True)
class InputSource:
    """How to make one input: ``kind`` is random, values (structure), blob or scalar."""

    name: str
    kind: str
    dtype: str
    shape: tuple[int, ...]
    seed: int | None = None
    values: tuple[int, ...] | None = None
    blob: bytes | None = None
    blob_key: str | None = None
    scalar: bool | int | float | None = None


@dataclass(frozen=True, slots=True)
class InputPlan:
    """Every input of one call, in the order of ``run``'s parameters."""

    offset: int
    sources: tuple[InputSource, ...]
    synthesized: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(source.name for source in self.sources)


def secret_seed(secret: str, label: str, name: str) -> int:
    """The seed of input ``name`` in input set ``label`` under a session's secret (drawn at bench time)."""
    digest = hashlib.sha256(f"kictl-bench-secret:{secret}:{label}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & (2**53 - 1)  # within the wire's (and JSON's) safe integers


def with_secret_values(plan: InputPlan, secret: str, label: str) -> InputPlan:
    """``plan`` with every random input re-seeded from ``secret``: the same structure, fresh values."""
    sources = tuple(
        replace(source, seed=secret_seed(secret, label, source.name)) if source.kind == "random" else source
        for source in plan.sources
    )
    return replace(plan, sources=sources)


def to_wire(plan: InputPlan, label: str) -> wire.Plan:
    """``plan`` as the wire carries it to a worker."""
    specs = []
    for source in plan.sources:
        values = None
        if source.values is not None:
            values = array.array("q", source.values).tobytes()
            if sys.byteorder != "little":  # pragma: no cover - kictl runs on little-endian machines
                swapped = array.array("q", source.values)
                swapped.byteswap()
                values = swapped.tobytes()
        specs.append(
            wire.InputSpec(
                name=source.name,
                kind=source.kind,
                dtype=source.dtype,
                shape=source.shape,
                seed=source.seed,
                values=values,
                blob=source.blob,
                blob_key=source.blob_key,
                scalar=source.scalar,
            )
        )
    return wire.Plan(label=label, inputs=tuple(specs))


def derive_seed(seed: int, offset: int) -> int:
    """The seed of an input in round ``offset``: ``seed`` itself for offset 0, else a hash of both."""
    if offset == 0:
        return seed
    digest = hashlib.sha256(f"kictl-bench:{seed}:{offset}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


def _default_seed(workload_digest: str, name: str) -> int:
    digest = hashlib.sha256(f"{workload_digest}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


def plan_inputs(
    spec: DefinitionSpec,
    workload: StoredRecord,
    order: tuple[str, ...],
    read_blob: BlobReader | None,
    *,
    offset: int = 0,
) -> InputPlan:
    """The inputs of ``workload`` for round ``offset``, in ``order``.

    Raises ``RecordError`` when the workload does not fit the definition or
    names a blob that cannot be read.
    """
    model = workload.model.spec
    if not isinstance(model, WorkloadSpec):
        raise RecordError(f"{workload.name}: not a Workload")
    source = f"workload {workload.name}"
    made = families.structure(spec, model, read_blob, source=source, seed_offset=offset)
    axes = made.axes
    out: list[InputSource] = []
    for name in order:
        tensor = spec.inputs[name]
        shape = tuple(axes[axis] for axis in tensor.shape or ())
        given = model.inputs.get(name)
        if name in made.tensors:
            out.append(InputSource(name, "values", tensor.dtype, shape, values=tuple(made.tensors[name])))
        elif isinstance(given, ScalarInput):
            out.append(InputSource(name, "scalar", tensor.dtype, shape, scalar=given.value))
        elif isinstance(given, RandomInput):
            seed = given.seed if given.seed is not None else _default_seed(workload.digest, name)
            out.append(InputSource(name, "random", tensor.dtype, shape, seed=derive_seed(seed, offset)))
        elif isinstance(given, BlobInput):
            if given.missing or given.digest is None:
                raise RecordError(f"{source}: input {name} names a blob the source did not ship ({given.path})")
            if read_blob is None:
                raise RecordError(f"{source}: input {name} is a blob and no registry is at hand to read it")
            data = read_blob(given.digest)
            where = layout.blob_path(given.digest.removeprefix("sha256:"))  # the registry file, named in errors
            entries = blobs.read_header(data, source=f"{source}: input {name}: {where}")
            if given.key not in entries:
                raise RecordError(f"{source}: input {name}: {where} has no tensor {given.key!r}")
            out.append(InputSource(name, "blob", tensor.dtype, shape, blob=data, blob_key=given.key))
        else:
            raise RecordError(f"{source}: input {name} has no source")
    return InputPlan(offset=offset, sources=tuple(out), synthesized=made.synthesized)


# --------------------------------------------------------------------------- tensors (worker side)


def torch_dtype(name: str) -> Any:
    """The torch dtype of an index dtype name."""
    import torch

    return getattr(torch, name)


def drawn_on(device: str) -> str:
    """Where a worker on ``device`` draws random inputs: ``cpu``, or the GPU itself (``cuda:N``)."""
    return device if device.startswith("cuda") else "cpu"


def _random(source: InputSource, device: str = "cpu") -> Any:
    import torch

    assert source.seed is not None
    where = drawn_on(device)
    generator = torch.Generator(device=where)
    generator.manual_seed(source.seed)
    dtype = torch_dtype(source.dtype)
    if source.dtype in FLOAT_DTYPES:
        draw = torch.float64 if source.dtype == "float64" else torch.float32
        return torch.randn(source.shape, generator=generator, dtype=draw, device=where).to(dtype)
    if source.dtype == "bool":
        return torch.randint(0, 2, source.shape, generator=generator, dtype=torch.int64, device=where).to(torch.bool)
    low = 0 if source.dtype == "uint8" else -64
    return torch.randint(low, 64, source.shape, generator=generator, dtype=torch.int64, device=where).to(dtype)


def _from_blob(source: InputSource) -> Any:
    import torch

    assert source.blob is not None
    assert source.blob_key is not None
    entry = blobs.read_header(source.blob)[source.blob_key]
    stored = {value: key for key, value in blobs.SAFETENSORS_DTYPES.items()}.get(entry.dtype)
    if stored is None:
        raise RecordError(f"blob tensor {source.blob_key!r} has dtype {entry.dtype}, which kictl cannot read")
    raw = bytearray(source.blob[entry.start : entry.end])
    tensor = torch.frombuffer(raw, dtype=torch_dtype(stored)) if raw else torch.empty(0, dtype=torch_dtype(stored))
    if tensor.numel() != math.prod(source.shape):
        raise RecordError(
            f"blob tensor {source.blob_key!r} has {tensor.numel()} values, {source.name} needs {source.shape}"
        )
    return tensor.reshape(source.shape).to(torch_dtype(source.dtype))


def materialize_one(source: InputSource, device: str) -> Any:
    """One input as a tensor on ``device`` (or a Python number for a scalar)."""
    import torch

    if source.kind == "scalar":
        return source.scalar
    if source.kind == "values":
        assert source.values is not None
        tensor = torch.tensor(source.values, dtype=torch_dtype(source.dtype)).reshape(source.shape)
    elif source.kind == "random":
        tensor = _random(source, device)
    else:
        tensor = _from_blob(source)
    return tensor.to(device)


def materialize_spec(spec: wire.InputSpec, device: str) -> Any:
    """One input, as the wire described it, on ``device`` (worker side)."""
    import torch

    if spec.kind == "values" and spec.values is not None and spec.scalar is None:
        # index tensors straight from the wire's int64 bytes (as materialize_one would make them, without a
        # Python list of every index in between)
        raw = torch.frombuffer(bytearray(spec.values), dtype=torch.int64) if spec.values else torch.empty(0)
        return raw.to(torch.int64).to(torch_dtype(spec.dtype)).reshape(spec.shape).to(device)
    values = None
    if spec.values is not None:
        values = tuple(torch.frombuffer(bytearray(spec.values), dtype=torch.int64).tolist()) if spec.values else ()
    source = InputSource(
        name=spec.name,
        kind=spec.kind,
        dtype=spec.dtype,
        shape=spec.shape,
        seed=spec.seed,
        values=values,
        blob=spec.blob,
        blob_key=spec.blob_key,
        scalar=spec.scalar,
    )
    return materialize_one(source, device)


#: On the CPU each input is drawn by a generator of its own: inputs of this many elements or more are drawn in
#: threads of their own (torch lets go of the GIL while it draws), each from its own seed, so the values are the
#: same as one after another.  A GPU draws them one after another (it draws 30 M values in about a millisecond).
PARALLEL_ELEMENTS = 1 << 20
#: Threads that draw inputs at once, at most (and never more than the CPUs the process may use).
PARALLEL_INPUTS = 8


def materialize_plans(plans: Sequence[wire.Plan], device: str) -> list[list[Any]]:
    """Every input of every plan, on ``device``, as ``materialize_spec`` makes each; large inputs in threads.

    The result is the same as making each input in turn (each is drawn from its own seed, and each is a tensor
    of its own); only the time differs: the bundled attention workloads' input sets hold up to 29 M random values
    (``benchmarks/input_speed.py``, script at commit ``40f91c7``).
    """
    from kictl.bench.options import usable_cpus

    places = [(n, k) for n, plan in enumerate(plans) for k in range(len(plan.inputs))]
    large = [(n, k) for n, k in places if math.prod(plans[n].inputs[k].shape) >= PARALLEL_ELEMENTS]
    threads = min(PARALLEL_INPUTS, usable_cpus(), len(large)) if drawn_on(device) == "cpu" else 1
    made: dict[tuple[int, int], Any] = {}
    if threads > 1:
        from concurrent.futures import ThreadPoolExecutor

        before = integrity.os_threads()  # 0 where the OS does not tell: nothing is waited for
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kictl-inputs") as pool:
            tensors = pool.map(lambda place: materialize_spec(plans[place[0]].inputs[place[1]], device), large)
            made = dict(zip(large, tensors, strict=True))
        _threads_gone(before)
    out: list[list[Any]] = [[] for _ in plans]
    for n, k in places:
        out[n].append(made[(n, k)] if (n, k) in made else materialize_spec(plans[n].inputs[k], device))
    return out


def _threads_gone(before: int, limit_s: float = 1.0) -> None:
    """Wait until the drawing threads have left the process.  A joined thread ends its Python part first and
    leaves ``/proc/self/task`` a moment later; kictl's parent counts the worker's threads there right after
    ``Arm`` (``noThreadsLeft``), and a drawing thread still listed would be judged the implementation's."""
    deadline = time.monotonic() + limit_s
    while integrity.os_threads() > before and time.monotonic() < deadline:
        time.sleep(0.001)


def materialize(plan: InputPlan, device: str) -> list[Any]:
    """The positional arguments of ``run`` for ``plan`` on ``device``."""
    return [materialize_one(source, device) for source in plan.sources]
