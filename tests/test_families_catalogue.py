"""The family modules of FlashInfer Trace's families (issue 42): valid inputs, references on the CPU, floors,
legal shape ranges.

Each family's inputs are drawn for every one of its definitions at a small shape and checked against what a
valid input is (indptr never decreasing and ending at its axis, page and slot ids in range and distinct,
distributions that sum to one, …) and against the definition's own ``constraints``, evaluated on the tensors.
One definition per family then runs its reference on those inputs on the CPU.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch

from kictl import families
from kictl.bench.judge.inputs import GENERATED, materialize_one, plan_inputs
from kictl.errors import RecordError
from kictl.families.legal import legal_axes, range_constraints
from kictl.records import DefinitionSpec, WorkloadSpec
from tests.families_catalogue import NEW_FAMILIES, definitions_of, run_reference, small_workload


def _inputs(spec: DefinitionSpec, offset: int, *, full: bool) -> tuple[dict[str, int], dict[str, Any]]:
    """Axes and inputs of the small workload: structure and generated inputs made, others made when ``full``
    (else shape-only tensors on the meta device)."""
    family = families.family_for(spec.family)
    workload = small_workload(spec, family.structural(spec))
    plan = plan_inputs(spec, workload, tuple(spec.inputs), None, offset=offset)
    model = workload.model.spec
    assert isinstance(model, WorkloadSpec)
    axes = families.full_axes(spec, model.axes)
    made: dict[str, Any] = {}
    for source in plan.sources:
        if full or source.kind in ("values", "scalar") or source.kind.startswith(GENERATED):
            made[source.name] = materialize_one(source, "cpu")
        else:
            made[source.name] = torch.empty(source.shape, dtype=getattr(torch, source.dtype), device="meta")
    return axes, made


def _indptr(values: Any, end: int) -> None:
    items = values.tolist()
    assert items[0] == 0
    assert items[-1] == end
    assert all(a <= b for a, b in itertools.pairwise(items))


def _distinct_in_range(values: list[int], high: int) -> None:
    assert len(set(values)) == len(values)
    assert all(0 <= value < high for value in values)


def _valid(spec: DefinitionSpec, axes: dict[str, int], made: dict[str, Any]) -> None:
    """What a valid input of the family is, checked on the drawn tensors."""
    if "qo_indptr" in made:
        _indptr(made["qo_indptr"], axes["total_q"])
    if "kv_indptr" in made:
        _indptr(made["kv_indptr"], axes["total_kv"] if "total_kv" in axes else axes["num_kv_indices"])
    if "kv_indices" in made:
        _distinct_in_range(made["kv_indices"].tolist(), axes["num_pages"])
    if "kv_last_page_len" in made:
        assert all(1 <= value <= axes["page_size"] for value in made["kv_last_page_len"].tolist())
    if "kv_indptr" in made and "qo_indptr" in made and "total_kv" in axes:  # ragged: every causal query sees a key
        q, kv = made["qo_indptr"].tolist(), made["kv_indptr"].tolist()
        assert all(kv[b + 1] - kv[b] >= q[b + 1] - q[b] for b in range(len(q) - 1))
    if "sparse_indices" in made:
        tokens = axes["num_pages"] * axes["page_size"]
        for row in made["sparse_indices"].tolist():
            valid = [index for index in row if index != -1]
            assert row[: len(valid)] == valid  # padding only at the end
            _distinct_in_range(valid, tokens)
            assert len(valid) == min(axes["topk"], tokens)
    if "block_table" in made:
        width, size = axes["max_num_pages"], axes["page_size"]
        owned: list[int] = []
        for row, length in zip(made["block_table"].tolist(), made["seq_lens"].tolist(), strict=True):
            assert 1 <= length <= width * size
            owned += row[: -(-length // size)]
            assert all(0 <= page < axes["num_pages"] for page in row)
        _distinct_in_range(owned, axes["num_pages"])
    if "k_index_cache_fp8" in made:
        raw = made["k_index_cache_fp8"].view(torch.uint8).reshape(axes["num_pages"], -1)
        split = axes["page_size"] * (axes["head_dim_with_scale"] - 4)
        scales = raw[:, split:].contiguous().view(torch.float32)
        values = raw[:, :split].contiguous().view(torch.float8_e4m3fn).to(torch.float32)
        assert bool(torch.isfinite(values).all())
        assert bool((scales >= 0.5).all())
        assert bool((scales < 1.5).all())
    if "topk_ids" in made:
        packed = made["topk_ids"]
        experts = (packed >> 16).tolist()
        weights = (packed & 0xFFFF).to(torch.int16).view(torch.bfloat16).to(torch.float32)
        for row in experts:
            _distinct_in_range(row, axes["num_experts"])
        assert bool((weights > 0).all())
        assert torch.allclose(weights.sum(-1), torch.ones(axes["seq_len"]), atol=2e-2)
    if "cu_seqlens" in made:
        _indptr(made["cu_seqlens"], axes["total_seq_len"])
    for name, pool in (("initial_state_indices", "pool_size"), ("state_batch_indices", "state_cache_size")):
        if name in made:
            _distinct_in_range(made[name].tolist(), axes[pool])
    if "probs" in made:
        probs = made["probs"].to(torch.float64)
        assert bool((probs >= 0).all())
        assert torch.allclose(probs.sum(-1), torch.ones(axes["batch_size"], dtype=torch.float64), atol=1e-4)
    if "top_k" in made:
        assert all(1 <= k <= axes["vocab_size"] for k in made["top_k"].tolist())
    if "top_p" in made:
        assert bool((made["top_p"] > 0).all())
        assert bool((made["top_p"] <= 1).all())
    if "positions" in made:
        assert all(0 <= p < axes["max_seq_len"] for p in made["positions"].tolist())
    if spec.family == "mamba-ssu":  # Mamba-2's per-head parameters, broadcast over head_dim as FlashInfer takes them
        for name, free in (("dt", 2), ("A", 1), ("D", 1), ("dt_bias", 1)):
            tensor = made[name]
            assert tensor.device.type != "meta", f"{spec.name}: {name} is drawn as independent random values"
            first = tensor[(slice(None),) * free + (slice(0, 1),) * (tensor.dim() - free)]
            assert torch.equal(tensor, first.expand(tensor.shape)), f"{spec.name}: {name} is not one value per head"
            assert tensor.float().std() > 0, name  # and not one value for all
        assert bool((made["A"] < 0).all())


def _constraints_hold(spec: DefinitionSpec, axes: dict[str, int], made: dict[str, Any]) -> None:
    """Every ``constraints`` expression of the definition, evaluated on the axes and the inputs."""
    namespace = {**axes, **made}
    for text in spec.constraints or ():
        assert eval(text, {"__builtins__": {}}, namespace), f"{spec.name}: {text}"  # a definition's data


@pytest.mark.parametrize("family", NEW_FAMILIES)
def test_every_definition_gets_valid_inputs(family: str) -> None:
    """Every definition of the family: its own module, inputs valid and within its constraints, for the timed
    inputs and a correctness round, the same for the same seed, and bytes no more than the generic count."""
    for spec in definitions_of(family):
        module = families.family_for(spec.family)
        assert module.name != "generic", spec.name
        for offset in (0, 1):
            axes, made = _inputs(spec, offset, full=False)
            _valid(spec, axes, made)
            _constraints_hold(spec, axes, made)
        workload = small_workload(spec, module.structural(spec)).model.spec
        assert isinstance(workload, WorkloadSpec)
        assert families.structure(spec, workload) == families.structure(spec, workload)
        amount = families.work(spec, workload)
        generic = sum(families.tensor_bytes(spec, name, amount_axes(spec, workload)) for name in spec.inputs)
        generic += sum(families.tensor_bytes(spec, name, amount_axes(spec, workload)) for name in spec.outputs)
        assert 0 < amount.bytes <= generic
        assert amount.flops is None or amount.flops >= 0


def amount_axes(spec: DefinitionSpec, workload: WorkloadSpec) -> dict[str, int]:
    return families.full_axes(spec, workload.axes)


def _smallest(family: str) -> DefinitionSpec:
    def size(spec: DefinitionSpec) -> int:
        workload = small_workload(spec, []).model.spec
        assert isinstance(workload, WorkloadSpec)
        axes = families.full_axes(spec, workload.axes)
        return sum(families.tensor_bytes(spec, name, axes) for name in spec.inputs)

    return min(definitions_of(family), key=size)


@pytest.mark.parametrize(
    "family", [pytest.param(name, marks=pytest.mark.heavy) if name == "moe" else name for name in NEW_FAMILIES]
)
def test_the_reference_runs_on_the_cpu(family: str) -> None:
    """The family's smallest definition runs its reference on the CPU on a small generated workload; its
    outputs have the definition's shapes and dtypes and hold no NaN."""
    spec = _smallest(family)
    axes, made = _inputs(spec, 1, full=True)
    result = run_reference(spec, list(made.values()))
    outputs = result if isinstance(result, tuple) else (result,)
    assert len(outputs) == len(spec.outputs)
    for (name, tensor), value in zip(spec.outputs.items(), outputs, strict=True):
        assert tuple(value.shape) == families.tensor_shape(spec, name, axes), name
        assert str(value.dtype).removeprefix("torch.") == tensor.dtype, name
        if value.dtype.is_floating_point:
            assert not bool(torch.isnan(value.float()).any()), f"{spec.name}: {name} holds NaN"


def test_mla_decode_floor_counts_referenced_pages_not_the_cache() -> None:
    """The captured MLA decode shape (989,669 pages of cache, 8 referenced): bytes are the 8 pages' tokens,
    queries and outputs, not the 1.14 GB cache."""
    spec = next((s for s in definitions_of("mla-paged-attention") if s.name.startswith("mla_paged_decode_h16")), None)
    if spec is None:
        pytest.skip("no mla_paged_decode_h16 definition")
    axes = {"batch_size": 1, "num_pages": 989669, "len_indptr": 2, "num_kv_indices": 8}
    structural = families.family_for(spec.family).structural(spec)
    workload = small_workload(spec, structural).model.spec
    assert isinstance(workload, WorkloadSpec)
    workload = workload.model_copy(update={"axes": axes})
    amount = families.work(spec, workload)
    full = families.full_axes(spec, axes)
    cache = families.tensor_bytes(spec, "ckv_cache", full) + families.tensor_bytes(spec, "kpe_cache", full)
    assert cache > 1e9
    tokens = 8 * full["page_size"] if "kv_last_page_len" not in spec.inputs else None
    if tokens is not None:
        assert amount.notes["kvTokens"] == tokens
    assert amount.bytes < 1e6  # a few pages and the queries: about 100 kB
    assert amount.flops == 1 * full["num_qo_heads"] * amount.notes["kvTokens"] * (2 * (512 + 64) + 2 * 512)


def test_moe_floor_is_a_lower_bound_for_any_routing() -> None:
    """Routing from logits: at least top_k experts are read (EP: those that must be local); pre-computed
    routing: exactly the experts the ids name."""
    for spec in definitions_of("moe"):
        module = families.family_for(spec.family)
        workload = small_workload(spec, module.structural(spec)).model.spec
        assert isinstance(workload, WorkloadSpec)
        made = families.structure(spec, workload)
        experts, pairs = module.routing(spec, made)  # type: ignore[attr-defined]
        axes = made.axes
        top_k = module.top_k(spec, axes)  # type: ignore[attr-defined]
        if "topk_ids" in made.tensors:
            assert experts == len({value >> 16 for value in made.tensors["topk_ids"]})
            assert pairs == axes["seq_len"] * top_k
        else:
            local = axes.get("num_local_experts", axes.get("num_experts", 0))
            total = axes.get("num_experts", local)
            assert experts == max(0, top_k - (total - local))
            assert pairs == axes["seq_len"] * experts


def test_impossible_axes_are_refused() -> None:
    """Axes no valid structure has are a RecordError, not an invalid input."""
    cases = [
        ("gqa-ragged-attention", {"len_indptr": 2, "total_q": 5, "total_kv": 3}),
        ("mamba-ssu", {"batch_size": 4, "state_cache_size": 3}),
        ("gdn", {"batch_size": 4, "seq_len": 2, "pool_size": 3}),
    ]
    for family, axes in cases:
        spec = next(s for s in definitions_of(family) if set(axes) <= {n for n, a in s.axes.items() if a.type == "var"})
        full = families.full_axes(spec, axes)
        with pytest.raises(RecordError):
            families.family_for(family).synthesize(spec, full, 0)


def test_observed_workloads_give_the_legal_ranges() -> None:
    """A definition without stated ranges gets its observed workloads' range, and the family's relations:
    held-out shapes then apply, and every drawn shape has a valid structure."""
    spec = next(s for s in definitions_of("mla-paged-attention") if s.name.startswith("mla_paged_decode"))
    observed = [
        {"batch_size": 1, "num_pages": 900, "len_indptr": 2, "num_kv_indices": 8},
        {"batch_size": 64, "num_pages": 990, "len_indptr": 65, "num_kv_indices": 700},
    ]
    assert legal_axes(spec).unstated(["batch_size"]) == ["batch_size"]
    legal = legal_axes(spec, observed)
    assert legal.domains["batch_size"].low == 1
    assert legal.domains["batch_size"].high == 64
    assert legal.domains["num_kv_indices"].high == 700
    assert "len_indptr" in legal.derived
    variable = [name for name, axis in spec.axes.items() if axis.type == "var"]
    assert legal.unstated(variable) == []
    assert not legal.admits(legal.complete({"batch_size": 9, "num_pages": 900, "num_kv_indices": 8}))
    drawn = legal.complete({"batch_size": 9, "num_pages": 900, "num_kv_indices": 9})
    assert legal.admits(drawn)
    made = families.family_for(spec.family).synthesize(spec, families.full_axes(spec, drawn), 3)
    assert made["kv_indptr"][-1] == 9


def test_range_constraints_state_the_observed_ranges() -> None:
    """What an import states for a definition without ranges: the observed range of each free axis and the
    family's relations, in forms ``legal_axes`` reads back; the definition then has legal values."""
    spec = next(s for s in definitions_of("gdn") if s.name.startswith("gdn_mtp"))
    observed = [{"batch_size": 1, "seq_len": 2, "pool_size": 8}, {"batch_size": 16, "seq_len": 4, "pool_size": 64}]
    stated = range_constraints(spec, observed)
    assert "1 <= batch_size <= 16" in stated
    assert "2 <= seq_len <= 4" in stated
    assert "8 <= pool_size <= 64" in stated
    assert "batch_size <= pool_size" in stated
    variable = [name for name, axis in spec.axes.items() if axis.type == "var"]
    assert legal_axes(spec).unstated(variable) == variable
    restated = spec.model_copy(update={"constraints": (*(spec.constraints or ()), *stated)})
    legal = legal_axes(restated)
    assert legal.unstated(variable) == []
    assert not legal.admits(legal.complete({"batch_size": 9, "seq_len": 2, "pool_size": 8}))
    assert legal.admits(legal.complete({"batch_size": 8, "seq_len": 3, "pool_size": 8}))
    assert not legal.admits(legal.complete({"batch_size": 8, "seq_len": 5, "pool_size": 8}))
