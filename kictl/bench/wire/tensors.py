"""How an input on the wire becomes a tensor: the same on both sides of the sandbox.

The parent plans each input (``kictl.bench.judge.inputs``: a seed, index values or a blob) and sends the plan
(``wire.InputSpec``); the worker makes its tensors from it, and so does the parent where it needs the same
values (the CPU's staged input sets, the reference's inputs).  A random input is drawn from its seed by torch's
generator on the device that runs the workload (``drawn_on``).
"""

from __future__ import annotations

import array
import math
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kictl import blobs, dtypes
from kictl.bench import wire
from kictl.bench.wire import generators
from kictl.bench.wire.checks import os_threads
from kictl.bench.wire.lazy import torch_module
from kictl.errors import RecordError

#: The floating-point dtypes, whose random inputs are drawn from a normal distribution (``kictl.dtypes``).
FLOAT_DTYPES = dtypes.FLOATING
#: The kind prefix of an input a family's generator draws (``generated:<name>``, ``kictl.bench.wire.generators``).
GENERATED = "generated:"


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


def torch_dtype(name: str) -> Any:
    """The torch dtype of an index dtype name."""
    torch = torch_module()

    return getattr(torch, name)


def drawn_on(device: str) -> str:
    """Where a worker on ``device`` draws random inputs: ``cpu``, or the GPU itself (``cuda:N``)."""
    return device if device.startswith("cuda") else "cpu"


def _random(source: InputSource, device: str = "cpu") -> Any:
    torch = torch_module()

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
    torch = torch_module()

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
    torch = torch_module()

    if source.kind == "scalar":
        return source.scalar
    if source.kind == "values":
        assert source.values is not None
        tensor = torch.tensor(source.values, dtype=torch_dtype(source.dtype)).reshape(source.shape)
    elif source.kind == "random":
        tensor = _random(source, device)
    elif source.kind.startswith(GENERATED):
        assert source.seed is not None
        tensor = generators.draw(source.kind.removeprefix(GENERATED), source.shape, source.dtype, source.seed)
    else:
        tensor = _from_blob(source)
    return tensor.to(device)


def input_spec(source: InputSource) -> wire.InputSpec:
    """``source`` as the wire carries it to a worker (``materialize_spec`` makes it again): index values as
    little-endian int64 bytes, the rest as they are."""
    values = None
    if source.values is not None:
        packed = array.array("q", source.values)
        if sys.byteorder != "little":  # pragma: no cover - kictl runs on little-endian machines
            packed.byteswap()
        values = packed.tobytes()
    return wire.InputSpec(
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


def materialize_spec(spec: wire.InputSpec, device: str) -> Any:
    """One input, as the wire described it, on ``device`` (worker side)."""
    torch = torch_module()

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
    places = [(n, k) for n, plan in enumerate(plans) for k in range(len(plan.inputs))]
    large = [(n, k) for n, k in places if math.prod(plans[n].inputs[k].shape) >= PARALLEL_ELEMENTS]
    threads = min(PARALLEL_INPUTS, _usable_cpus(), len(large)) if drawn_on(device) == "cpu" else 1
    made: dict[tuple[int, int], Any] = {}
    if threads > 1:
        before = os_threads()  # 0 where the OS does not tell: nothing is waited for
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
    while os_threads() > before and time.monotonic() < deadline:
        time.sleep(0.001)


def _usable_cpus() -> int:
    """How many CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - Linux has it
        return os.cpu_count() or 1
