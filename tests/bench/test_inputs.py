"""Inputs: planned without torch, drawn where the workload runs from the workload's seeds, fresh per round."""

from __future__ import annotations

import json
import os

import pytest
import torch

from kictl import blobs
from kictl.bench.judge.inputs import derive_seed, materialize, plan_inputs
from kictl.definitions import signature
from kictl.errors import RecordError
from kictl.records import DefinitionSpec, StoredRecord, WorkloadSpec, new_record
from kictl.store.registry import Registry

PREFILL = "gqa_paged_prefill_causal_h20_kv4_d128_ps64"


def _definition(registry: Registry, name: str) -> tuple[StoredRecord, DefinitionSpec]:
    record = registry.resolve(name, ["Definition"])
    assert isinstance(record.model.spec, DefinitionSpec)
    return record, record.model.spec


def _workload(registry: Registry, definition: StoredRecord, label: str) -> StoredRecord:
    return next(
        r
        for r in registry.iter_records(["Workload"])
        if r.name == label and r.raw["spec"]["definitionDigest"] == definition.digest
    )


def test_derive_seed_keeps_offset_zero_and_separates_rounds() -> None:
    assert derive_seed(7, 0) == 7
    seeds = {derive_seed(7, offset) for offset in range(1, 50)}
    assert len(seeds) == 49
    assert 7 not in seeds
    assert derive_seed(7, 1) == derive_seed(7, 1)
    assert all(0 <= seed < 2**63 for seed in seeds)


def test_plan_follows_the_reference_order_and_lists_synthesised_structure(bundled_registry: Registry) -> None:
    definition, spec = _definition(bundled_registry, PREFILL)
    workload = _workload(bundled_registry, definition, "b8x_q128_p64")
    order = signature(spec).inputs
    plan = plan_inputs(spec, workload, order, bundled_registry.read_blob)
    assert plan.names == order
    assert set(plan.synthesized) == {"qo_indptr", "kv_indptr", "kv_indices", "kv_last_page_len"}
    kinds = {source.name: source.kind for source in plan.sources}
    assert kinds == {
        "q": "random",
        "k_cache": "random",
        "v_cache": "random",
        "qo_indptr": "values",
        "kv_indptr": "values",
        "kv_indices": "values",
        "kv_last_page_len": "values",
        "sm_scale": "scalar",
    }
    q = next(source for source in plan.sources if source.name == "q")
    assert q.seed == 41
    assert q.shape == (1024, 20, 128)


def test_materialize_is_deterministic_and_matches_a_plain_torch_draw(bundled_registry: Registry) -> None:
    definition, spec = _definition(bundled_registry, PREFILL)
    workload = _workload(bundled_registry, definition, "q16_p1")
    order = signature(spec).inputs
    plan = plan_inputs(spec, workload, order, bundled_registry.read_blob)
    first = dict(zip(order, materialize(plan, "cpu"), strict=True))
    second = dict(zip(order, materialize(plan, "cpu"), strict=True))
    expected_q = torch.randn((16, 20, 128), generator=torch.Generator().manual_seed(11)).to(torch.bfloat16)
    assert torch.equal(first["q"], expected_q)
    for name in order:
        if isinstance(first[name], torch.Tensor):
            assert torch.equal(first[name], second[name]), name
    assert first["q"].dtype == torch.bfloat16
    assert first["kv_indices"].dtype == torch.int32
    assert first["sm_scale"] == pytest.approx(0.08838834764831843)
    assert isinstance(first["sm_scale"], float)


@pytest.mark.parametrize("threshold", [1, 1 << 40], ids=["every-input-in-threads", "one-after-another"])
def test_inputs_drawn_in_threads_are_the_inputs_drawn_one_after_another(
    bundled_registry: Registry, monkeypatch: pytest.MonkeyPatch, threshold: int
) -> None:
    """A worker draws large inputs of all its input sets in threads: the same values, bit for bit, and every
    input a tensor of its own (a timed tensor sharing storage with an input set would be overwritten)."""
    from kictl.bench.judge.inputs import to_wire, with_secret_values
    from kictl.bench.wire import tensors as inputs_module
    from kictl.bench.wire.tensors import materialize_plans, materialize_spec

    monkeypatch.setattr(inputs_module, "PARALLEL_ELEMENTS", threshold)
    definition, spec = _definition(bundled_registry, PREFILL)
    workload = _workload(bundled_registry, definition, "q16_p1")
    base = plan_inputs(spec, workload, signature(spec).inputs, bundled_registry.read_blob)
    plans = [to_wire(with_secret_values(base, "secret", f"set {n}"), f"set {n}") for n in range(5)]
    plans.append(plans[0])  # the same plan twice: still tensors of their own
    threads = len(os.listdir("/proc/self/task"))
    made = materialize_plans(plans, "cpu")
    # the drawing threads have left the process when it returns: the parent counts a worker's threads right
    # after arming it (noThreadsLeft), and a joined thread is listed a moment after it is joined
    assert len(os.listdir("/proc/self/task")) == threads
    tensors = []
    for plan, values in zip(plans, made, strict=True):
        assert len(values) == len(plan.inputs)
        for item, value in zip(plan.inputs, values, strict=True):
            expected = materialize_spec(item, "cpu")
            if isinstance(expected, torch.Tensor):
                assert value.dtype == expected.dtype, item.name
                assert torch.equal(value, expected), item.name
                tensors.append(value)
            else:
                assert value == expected
    assert len({t.untyped_storage().data_ptr() for t in tensors if t.numel()}) == len([t for t in tensors if t.numel()])


def test_each_round_gets_fresh_values_and_fresh_structure(bundled_registry: Registry) -> None:
    definition, spec = _definition(bundled_registry, PREFILL)
    workload = _workload(bundled_registry, definition, "b8x_q128_p64")
    order = signature(spec).inputs
    rounds = [
        dict(zip(order, materialize(plan_inputs(spec, workload, order, None, offset=offset), "cpu"), strict=True))
        for offset in (0, 1, 2)
    ]
    for a, b in ((0, 1), (1, 2), (0, 2)):
        assert not torch.equal(rounds[a]["q"], rounds[b]["q"])
        assert not torch.equal(rounds[a]["kv_indices"], rounds[b]["kv_indices"])
    # the structure stays valid: every sequence's pages are distinct pages of the cache
    for inputs in rounds:
        indices = inputs["kv_indices"].tolist()
        assert len(set(indices)) == len(indices)
        assert max(indices) < inputs["k_cache"].shape[0]


def test_blob_inputs_are_read_from_the_registry(empty_registry: Registry) -> None:
    spec_members = {
        "name": "scale_rows",
        "family": "elementwise",
        "axes": {"n": {"type": "var"}},
        "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
        "reference": "def run(x):\n    return x * 2\n",
    }
    definition = new_record(DefinitionSpec.model_validate_json(json.dumps(spec_members)), name="scale_rows")
    values = torch.tensor([1.5, -2.0, 3.25], dtype=torch.float32)
    blob = blobs.write_safetensors({"x": ("float32", (3,), values.numpy().tobytes())})
    digest = empty_registry.add_blob(blob)
    workload = new_record(
        WorkloadSpec.model_validate_json(
            json.dumps(
                {
                    "definitionDigest": definition.digest,
                    "axes": {"n": 3},
                    "inputs": {"x": {"type": "blob", "digest": digest, "key": "x"}},
                }
            )
        ),
        name="three",
    )
    assert isinstance(definition.model.spec, DefinitionSpec)
    plan = plan_inputs(definition.model.spec, workload, ("x",), empty_registry.read_blob)
    (x,) = materialize(plan, "cpu")
    assert torch.equal(x, values)
    with pytest.raises(RecordError, match="no registry is at hand"):
        plan_inputs(definition.model.spec, workload, ("x",), None)


def test_a_worker_makes_from_the_wire_what_the_plan_makes(bundled_registry: Registry) -> None:
    """Index tensors come straight from the wire's bytes in the worker: the same tensors as the plan's own."""
    from kictl.bench.judge.inputs import materialize_spec, to_wire

    definition, spec = _definition(bundled_registry, PREFILL)
    workload = _workload(bundled_registry, definition, "b8x_q128_p64")
    plan = plan_inputs(spec, workload, signature(spec).inputs, None, offset=1)
    direct = materialize(plan, "cpu")
    wired = [materialize_spec(item, "cpu") for item in to_wire(plan, "round 1").inputs]
    assert any(source.kind == "values" for source in plan.sources)
    for source, a, b in zip(plan.sources, direct, wired, strict=True):
        if isinstance(a, torch.Tensor):
            assert a.dtype == b.dtype, source.name
            assert a.shape == b.shape, source.name
            assert torch.equal(a, b), source.name
        else:
            assert a == b, source.name


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_gpu_draws_its_inputs_on_itself_the_same_every_time(bundled_registry: Registry) -> None:
    """On a GPU the inputs are drawn there (no host copy of 30 M values), the same for the same plan every time
    and in any order: the implementation's worker and kictl's reference workers see the same values."""
    from kictl.bench.judge.inputs import materialize_plans, materialize_spec, to_wire, with_secret_values

    definition, spec = _definition(bundled_registry, PREFILL)
    workload = _workload(bundled_registry, definition, "q16_p1")
    base = plan_inputs(spec, workload, signature(spec).inputs, bundled_registry.read_blob)
    plans = [to_wire(with_secret_values(base, "secret", f"set {n}"), f"set {n}") for n in range(3)]
    made = materialize_plans(plans, "cuda:0")
    again = materialize_plans(list(reversed(plans)), "cuda:0")[::-1]
    on_cpu = materialize_plans(plans, "cpu")
    q = [item.name for item in plans[0].inputs].index("q")
    for plan, values, repeated, cpu_values in zip(plans, made, again, on_cpu, strict=True):
        assert values[q].device.type == "cuda"
        assert torch.equal(values[q], repeated[q])
        assert not torch.equal(values[q].cpu(), cpu_values[q])  # another generator: other values
        assert torch.equal(values[q], materialize_spec(plan.inputs[q], "cuda:0"))
        assert abs(values[q].float().std().item() - 1.0) < 0.05
    assert not torch.equal(made[0][q], made[1][q])


def test_a_blob_that_is_no_safetensors_file_is_named_by_its_registry_file(empty_registry: Registry) -> None:
    """Issue 45: the error named the blob's digest only; it names the workload, the input and the file."""
    spec_members = {
        "name": "scale_rows",
        "family": "elementwise",
        "axes": {"n": {"type": "var"}},
        "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
        "reference": "def run(x):\n    return x * 2\n",
    }
    definition = new_record(DefinitionSpec.model_validate_json(json.dumps(spec_members)), name="scale_rows")
    assert isinstance(definition.model.spec, DefinitionSpec)
    for data, problem in ((b"not a safetensors file", "not a safetensors file"), (None, "has no tensor 'x'")):
        blob = data or blobs.write_safetensors({"y": ("float32", (1,), b"\0\0\0\0")})
        digest = empty_registry.add_blob(blob)
        inputs = {"x": {"type": "blob", "digest": digest, "key": "x"}}
        body = {"definitionDigest": definition.digest, "axes": {"n": 3}, "inputs": inputs}
        workload = new_record(WorkloadSpec.model_validate_json(json.dumps(body)), name="three")
        where = f"registry/blobs/{digest[7:9]}/{digest[7:]}"
        with pytest.raises(RecordError, match=f"^workload three: input x: {where}.*{problem}"):
            plan_inputs(definition.model.spec, workload, ("x",), empty_registry.read_blob)
