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

import ast
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from kictl import blobs, families, layout
from kictl.bench import wire
from kictl.bench.wire.tensors import FLOAT_DTYPES as FLOAT_DTYPES
from kictl.bench.wire.tensors import GENERATED as GENERATED
from kictl.bench.wire.tensors import InputSource as InputSource
from kictl.bench.wire.tensors import drawn_on as drawn_on
from kictl.bench.wire.tensors import input_spec
from kictl.bench.wire.tensors import materialize_one as materialize_one
from kictl.bench.wire.tensors import materialize_plans as materialize_plans
from kictl.bench.wire.tensors import materialize_spec as materialize_spec
from kictl.bench.wire.tensors import torch_dtype as torch_dtype
from kictl.errors import RecordError
from kictl.records import (
    BlobInput,
    DefinitionSpec,
    GeneratedInput,
    RandomInput,
    ScalarInput,
    StoredRecord,
    WorkloadSpec,
)

BlobReader = Callable[[str], bytes]
#: The kind of an input the definition's ``inputs_entrypoint`` makes, until ``resolve_entrypoint`` makes it.
ENTRYPOINT = "entrypoint"
#: ``generate(names, axes, seed)``: the definition's entrypoint run in kictl's reference worker; tensors as
#: ``(dtype, shape, bytes)`` by name.
EntrypointRunner = Callable[[tuple[str, ...], dict[str, int], int], dict[str, tuple[str, tuple[int, ...], bytes]]]


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
    """``plan`` with every random input re-seeded from ``secret``: the same structure, fresh values.

    A family's generated input (``generated:<name>``) is re-seeded from ``secret`` and its own seed, not the
    label: like structure, it is the same in every input set of one plan (a worker makes each set's random
    inputs only), and differs between rounds, whose plans differ.
    """

    def seeded(source: InputSource) -> InputSource:
        if source.kind == "random":
            return replace(source, seed=secret_seed(secret, label, source.name))
        if source.kind.startswith(GENERATED):
            return replace(source, seed=secret_seed(secret, f"generated {source.seed}", source.name))
        return source

    return replace(plan, sources=tuple(seeded(source) for source in plan.sources))


def to_wire(plan: InputPlan, label: str) -> wire.Plan:
    """``plan`` as the wire carries it to a worker (each input as ``wire.tensors.input_spec`` writes it)."""
    return wire.Plan(label=label, inputs=tuple(input_spec(source) for source in plan.sources))


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
    generated = families.family_for(spec.family).generated(spec)
    axes = made.axes
    out: list[InputSource] = []
    for name in order:
        tensor = spec.inputs[name]
        shape = tuple(axes[axis] for axis in tensor.shape or ())
        given = model.inputs.get(name)
        if name in made.tensors:
            out.append(InputSource(name, "values", tensor.dtype, shape, values=tuple(made.tensors[name])))
        elif name in generated and not isinstance(given, ScalarInput) and not _present_blob(given):
            seed = given.seed if isinstance(given, RandomInput) and given.seed is not None else None
            seed = _default_seed(workload.digest, name) if seed is None else seed
            kind = GENERATED + generated[name]
            out.append(InputSource(name, kind, tensor.dtype, shape, seed=derive_seed(seed, offset)))
        elif isinstance(given, GeneratedInput):
            if spec.inputs_entrypoint is None:
                raise RecordError(f"{source}: input {name} is generated, and {spec.name} names no inputs_entrypoint")
            seed = given.seed if given.seed is not None else _default_seed(workload.digest, ENTRYPOINT)
            out.append(InputSource(name, ENTRYPOINT, tensor.dtype, shape, seed=derive_seed(seed, offset)))
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


def entrypoint_call(
    spec: DefinitionSpec, names: tuple[str, ...], axes: dict[str, int], seed: int
) -> tuple[wire.Plan, tuple[wire.OutputSpec, ...]]:
    """What kictl's reference worker is asked to call the definition's ``inputs_entrypoint`` with: its scalars
    (the seed, then the axes its parameters name) and the tensors ``names`` it must return, with their shapes
    and dtypes for ``axes``.  The session (timed inputs) and the export (the same tensors again) both ask this."""
    scalars = [("seed", seed & wire.SAFE_INT), *((axis, axes[axis]) for axis in entrypoint_parameters(spec))]
    plan = wire.Plan(
        label="inputs",
        inputs=tuple(
            wire.InputSpec(name=name, kind="scalar", dtype="int64", shape=(), scalar=value) for name, value in scalars
        ),
    )
    outputs = tuple(
        wire.OutputSpec(name=name, shape=families.tensor_shape(spec, name, axes), dtype=spec.inputs[name].dtype)
        for name in names
    )
    return plan, outputs


def entrypoint_parameters(spec: DefinitionSpec) -> tuple[str, ...]:
    """The axes the definition's ``inputs_entrypoint`` takes after its seed, by its parameters' names (a stored
    definition's axes are in canonical, not written, order).  Raises ``RecordError``."""
    try:
        tree = ast.parse(spec.reference)
    except SyntaxError as exc:
        raise RecordError(f"{spec.name}: the reference does not parse: line {exc.lineno}: {exc.msg}") from exc
    found = next(
        (node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == spec.inputs_entrypoint),
        None,
    )
    if found is None:
        raise RecordError(f"{spec.name}: the reference defines no top-level {spec.inputs_entrypoint}(...)")
    params = [arg.arg for arg in (*found.args.posonlyargs, *found.args.args)]
    unknown = [name for name in params[1:] if name not in spec.axes]
    if not params or unknown:
        raise RecordError(
            f"{spec.name}: {spec.inputs_entrypoint}({', '.join(params)}) must take a seed and then axes "
            f"({', '.join(unknown) or 'no seed'} is none)"
        )
    return tuple(params[1:])


def resolve_entrypoint(plan: InputPlan, axes: dict[str, int], generate: EntrypointRunner) -> InputPlan:
    """``plan`` with the inputs of the definition's entrypoint made (one call for them all, seeded by the first
    one's seed) and held as a blob, as a captured tensor would be.

    Raises ``RecordError`` when the entrypoint's tensors are not the definition's dtypes and shapes.
    """
    wanted = [source for source in plan.sources if source.kind == ENTRYPOINT]
    if not wanted:
        return plan
    assert wanted[0].seed is not None
    made = generate(tuple(source.name for source in wanted), dict(axes), wanted[0].seed)
    for source in wanted:
        dtype, shape, _ = made[source.name]
        if dtype != source.dtype or tuple(shape) != source.shape:
            raise RecordError(
                f"the inputs entrypoint made {source.name} as {dtype} {list(shape)}, the definition says "
                f"{source.dtype} {list(source.shape)}"
            )
    blob = blobs.write_safetensors({source.name: made[source.name] for source in wanted})
    sources = tuple(
        replace(source, kind="blob", seed=None, blob=blob, blob_key=source.name)
        if source.kind == ENTRYPOINT
        else source
        for source in plan.sources
    )
    return replace(plan, sources=sources)


def _present_blob(given: object) -> bool:
    return isinstance(given, BlobInput) and not given.missing and given.digest is not None


# --------------------------------------------------------------------------- tensors (worker side)


def materialize(plan: InputPlan, device: str) -> list[Any]:
    """The positional arguments of ``run`` for ``plan`` on ``device``."""
    return [materialize_one(source, device) for source in plan.sources]
