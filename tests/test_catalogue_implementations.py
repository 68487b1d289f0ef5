"""The implementations that serve a whole family of the catalogue, and ``benchmarks/catalogue.py``'s plan (issue 43).

Each torch implementation under ``implementations/families/`` runs through the real ``kictl bench`` on the CPU
against its definition's reference (the smallest workload of one definition per signature, few calls); the
FlashInfer wrappers cannot run here (no CUDA), so their manifests are made into Implementation records and their
``run``/``setup`` signatures are checked against every definition they are mapped to.  The plan's rules (which
implementations, which workloads, which FlashInfer modules to build, what is measured already, the budget) are
tested on the bundled registry.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import importlib.util
import itertools
import json
import signal
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kictl.bench.judge.implementation import load_implementation
from kictl.store.registry import Registry
from tests.bench.conftest import FAST, IMPLEMENTATIONS
from tests.conftest import REPO_ROOT, RunCli

SCRIPT = REPO_ROOT / "benchmarks" / "catalogue.py"
FAMILIES = REPO_ROOT / "implementations" / "families"
HOPPER_SERVED = (
    "gemm",
    "rmsnorm",
    "gqa-paged-attention",
    "gqa-ragged-attention",
    "mla-ragged-attention",
    "mla-paged-attention",
    "sampling",
    "rope",
    "mamba-ssu",
)


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("catalogue_script", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["catalogue_script"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


catalogue = _script()
DEFINITIONS = {item.name: item for item in catalogue.load_definitions(REPO_ROOT)}
DIGEST_FAMILY = {item.digest: item.family for item in DEFINITIONS.values()}


def _planned(**options: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    fresh = copy.deepcopy(list(DEFINITIONS.values()))  # plan() fills the items in; loading them again took 1 s
    settings: dict[str, Any] = {
        "wanted": [],
        "families": [],
        "skip": [],
        "held": None,
        "flashinfer": True,
        "importable": lambda name: True,  # the GPU machine's view; the CPU here has neither FlashInfer nor CuTe DSL
    }
    settings.update(options)
    chosen, left = catalogue.plan(fresh, registry_root=REPO_ROOT, **settings)
    return {item.name: item for item in chosen}, {item.name: item for item in left}


def _parameters(path: Path, function: str) -> tuple[list[str], bool] | None:
    """(positional parameter names, whether it takes *args) of a module-level function of an implementation."""
    manifest = json.loads((path / "implementation.json").read_text())
    entry = manifest["entryPoint"].split("::")[0]
    tree = ast.parse((path / entry).read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return [arg.arg for arg in node.args.args], node.args.vararg is not None
    return None


def _accepts(parameters: tuple[list[str], bool] | None, inputs: list[str]) -> bool:
    assert parameters is not None
    names, rest = parameters
    return inputs[: len(names)] == names and (len(inputs) == len(names) or rest)


# --------------------------------------------------------------------------- the mapping and the manifests


def test_every_mapped_folder_makes_an_implementation_record_for_every_definition_it_serves() -> None:
    """Each entry of serves.json is a folder kictl takes (FlashInfer's included: their manifests are checked
    here, since they cannot run), and its run()/setup() take every mapped definition's inputs in order."""
    table = catalogue.serves()
    registry = Registry(REPO_ROOT)
    served: dict[str, int] = {}
    for item in DEFINITIONS.values():
        if catalogue.own_implementations(item.name):
            continue
        for path in catalogue.family_implementations(item.family, item.inputs, table):
            relative = path.relative_to(FAMILIES).as_posix()
            served[relative] = served.get(relative, 0) + 1
            loaded = load_implementation(str(path), registry.load(item.digest), registry)
            assert loaded.record.raw["spec"]["definitionDigest"] == item.digest
            if relative == "reference":
                assert loaded.is_reference
                continue
            assert not loaded.is_reference
            assert _accepts(_parameters(path, "run"), item.inputs), (relative, item.name, item.inputs)
            setup = _parameters(path, "setup")  # kictl calls it with the same arguments, when there is one
            assert setup is None or _accepts(setup, item.inputs), (relative, item.name)
    assert set(served) == set(table["serves"]), "an entry of serves.json serves no definition"


def test_an_implementation_is_not_mapped_to_a_signature_it_cannot_take() -> None:
    rmsnorm = catalogue.family_implementations("rmsnorm", ["hidden_states", "weight"])
    fused = catalogue.family_implementations("rmsnorm", ["hidden_states", "residual", "weight"])
    assert [path.name for path in rmsnorm] == ["reference", "torch_rmsnorm", "flashinfer_rmsnorm"]
    assert [path.name for path in fused] == ["reference", "torch_fused_add_rmsnorm", "flashinfer_fused_add_rmsnorm"]
    assert [path.name for path in catalogue.family_implementations("gemm", ["B", "A"])] == ["reference"]
    assert [path.name for path in catalogue.family_implementations("rope", ["A", "B"])] == ["reference"]
    for path in (FAMILIES / "gqa-paged-attention" / "flashinfer_decode",):
        parameters = _parameters(path, "run")
        assert not _accepts(parameters, ["q", "k_cache", "v_cache", "qo_indptr", "kv_indptr", "kv_indices"])


def test_every_definition_of_the_served_families_gets_the_reference_flashinfer_and_torch() -> None:
    chosen, left = _planned()
    for item in DEFINITIONS.values():
        if item.family not in HOPPER_SERVED:
            continue
        assert item.name in chosen, (item.name, left.get(item.name) and left[item.name].reason)
        names = [path.name for path in chosen[item.name].implementations]
        assert names[0] == "reference"
        assert any(name.startswith("torch") for name in names), item.name
        if item.family != "gemm" and not chosen[item.name].bundled:  # the catalogue's GEMMs name no FlashInfer API
            assert sum(catalogue.uses_flashinfer(path) for path in chosen[item.name].implementations) == 1, names
    bundled = {name for name, item in chosen.items() if item.bundled}
    assert bundled == {
        "gemm_n4096_k4096",
        "rmsnorm_h4096",
        "gqa_paged_decode_h32_kv8_d128_ps1",
        "gqa_paged_prefill_causal_h20_kv4_d128_ps64",
        "gqa_paged_prefill_causal_h24_kv4_d128_ps1",
    }
    for name in bundled:  # the bundled definitions keep their own folders, every workload
        assert all(path.parent.name == name for path in chosen[name].implementations)
        assert len(chosen[name].chosen) == len(DEFINITIONS[name].workloads)
    assert list(chosen)[:5] == sorted(bundled, key=lambda n: (catalogue.FAMILY_ORDER.index(DEFINITIONS[n].family), n))
    for name, item in left.items():
        if DEFINITIONS[name].family not in HOPPER_SERVED:
            assert item.reason, name


def test_definitions_only_their_reference_serves_are_measured_last_with_the_reason() -> None:
    chosen, left = _planned()
    for item in DEFINITIONS.values():
        names = [path.name for path in chosen[item.name].implementations] if item.name in chosen else []
        only = chosen[item.name].reference_only if item.name in chosen else None
        if item.name.startswith("gdn_decode_"):
            assert names == ["reference", "flashinfer_gdn_decode", "torch_gdn_decode"]
        elif item.name.startswith("gdn_prefill_"):
            assert names == ["reference", "flashinfer_gdn_prefill"]  # no torch alternative: the reference is one
        elif item.name.startswith("gdn_mtp_"):  # its reference writes an input, judged as an output
            assert names == ["reference", "flashinfer_gdn_mtp", "torch_gdn_mtp"]
        elif item.name.startswith(("moe_fp8_block_scale_ds_routing_", "trtllm_fp4_block_scale_routed_moe_")):
            assert names == ["reference"]  # the other MoE definitions: tests/test_catalogue_moe.py
            assert only
            assert "Blackwell (sm100) only" in only
        elif item.name.startswith("dsa_sparse_attention_"):
            assert names == ["reference"]
            assert only
            assert "trtllm_batch_decode_with_kv_cache_mla" in only
        elif item.name.startswith("dsa_topk_indexer_"):
            assert names == ["reference"]
            assert only
            assert "names no FlashInfer API" in only
        if only:
            assert not left.get(item.name), item.name
    assert len([name for name, item in chosen.items() if "Blackwell" in item.reference_only]) == 8 + 2
    # every definition only its reference serves comes after every other one: a call measures kernels first
    order = [item.reference_only != "" for item in chosen.values()]
    assert order == sorted(order)
    assert order.count(True) == 8 + 2 + 1
    # FlashInfer's GDN kernels on Hopper are CuTe DSL kernels: without cutlass they are dropped, and said so
    chosen, left = _planned(importable=lambda name: name != "cutlass", families=["gdn"])
    assert [path.name for path in chosen["gdn_decode_qk4_v8_d128_k_last"].implementations] == [
        "reference",
        "torch_gdn_decode",
    ]
    assert (
        "flashinfer_gdn_decode (needs the Python module cutlass" in chosen["gdn_decode_qk4_v8_d128_k_last"].dropped[0]
    )
    assert [path.name for path in chosen["gdn_mtp_qk4_v8_d128_k_last"].implementations] == [
        "reference",
        "torch_gdn_mtp",
    ]
    prefill = chosen["gdn_prefill_qk4_v8_d128_k_last"]
    assert [path.name for path in prefill.implementations] == ["reference"]
    assert "flashinfer_gdn_prefill (needs the Python module cutlass" in prefill.dropped[0]
    assert list(chosen)[-3:] == sorted(name for name in chosen if name.startswith(("gdn_mtp_", "gdn_prefill_")))[-3:]


def test_a_reference_returning_output_dot_to_gives_its_order_to_the_outputs() -> None:
    """Mamba's reference returns ``output.to(x.dtype), new_state``: the outputs are in that order, not the
    record's sorted one (which would make every honest Mamba implementation 'incorrect_shape')."""
    from kictl.definitions import signature
    from kictl.records import DefinitionSpec

    spec = Registry(REPO_ROOT).load(DEFINITIONS["mamba_ssu_decode_h64_d64_s128_ng4"].digest).model.spec
    assert isinstance(spec, DefinitionSpec)
    assert list(spec.outputs) == ["new_state", "output"]
    assert signature(spec).outputs == ("output", "new_state")
    edited = spec.model_copy(update={"reference": spec.reference.replace("output.to(x.dtype), new_state", "x, y")})
    assert signature(edited).outputs == ("new_state", "output")  # names that are not outputs: the record's order


def test_without_flashinfer_the_plan_drops_the_flashinfer_wrappers() -> None:
    chosen, _ = _planned(flashinfer=False, families=["gqa-paged-attention"])
    assert chosen
    for item in chosen.values():
        assert not any(catalogue.uses_flashinfer(path) for path in item.implementations), item.name


# --------------------------------------------------------------------------- workloads, modules, measured


def test_all_of_a_small_suite_and_eight_spanning_a_large_one_on_a_log_scale() -> None:
    small = [(f"w{m}", {"M": m}) for m in (64, 1, 8)]
    assert catalogue.choose_workloads(small) == ["w1", "w8", "w64"]
    large = [(f"w{m:05d}", {"M": m}) for m in range(1, 44)] + [("x_again", {"M": 43})]
    picked = catalogue.choose_workloads(large)
    assert picked == ["w00001", "w00002", "w00003", "w00005", "w00009", "w00015", "w00025", "w00043"]
    assert "x_again" not in picked  # the same axes count once
    assert picked == catalogue.choose_workloads(list(reversed(large)))  # the input order does not matter
    sizes = [int(label[1:]) for label in picked]
    assert max(b / a for a, b in itertools.pairwise(sizes)) <= 2  # spanned in log, not bunched at one end
    # fewer on request (--workloads), still the smallest and the largest
    assert catalogue.choose_workloads(large, 4) == ["w00001", "w00004", "w00012", "w00043"]
    assert catalogue.choose_workloads(large, 1) == ["w00001"]
    # a suite bunched at small sizes (most captured GEMM suites) is still spanned up to its largest
    bunched = [(f"m{m:05d}", {"M": m}) for m in [*range(1, 40), 4096, 8192]]
    assert catalogue.choose_workloads(bunched)[-2:] == ["m04096", "m08192"]
    # two axes: size is their product
    grid = [(f"b{b}_k{k}", {"batch": b, "kv": k}) for b in (1, 4, 16, 64) for k in (512, 2048, 8192)]
    chosen = catalogue.choose_workloads(grid)
    assert chosen[0] == "b1_k512"
    assert chosen[-1] == "b64_k8192"
    assert len(chosen) == 8
    # the page pool only sizes an allocation: a big pool is no big workload, and pools alone do not differ
    pools = [(f"p{b}_{pages}", {"batch_size": b, "num_pages": pages}) for b in range(1, 10) for pages in (9, 10**6)]
    chosen = catalogue.choose_workloads(pools)
    assert [label.split("_")[0] for label in chosen] == ["p1", "p2", "p3", "p4", "p5", "p6", "p7", "p9"]
    # a real large suite of the catalogue (43 captured GEMM workloads)
    gemm = DEFINITIONS["gemm_n28672_k4096"]
    labels = catalogue.choose_workloads(gemm.workloads)
    sizes = sorted(axes["M"] for _, axes in gemm.workloads)
    by_label = dict(gemm.workloads)
    picked_sizes = [by_label[label]["M"] for label in labels]
    assert picked_sizes[0] == sizes[0]
    assert picked_sizes[-1] == sizes[-1]
    assert len(picked_sizes) == 8


def test_a_flashinfer_module_is_built_once_per_head_size_and_decode_kernel() -> None:
    decode = FAMILIES / "gqa-paged-attention" / "flashinfer_decode"
    prefill = FAMILIES / "gqa-paged-attention" / "flashinfer_prefill"
    ragged = FAMILIES / "ragged-attention" / "flashinfer_ragged"

    def key(path: Path, name: str) -> tuple[Any, ...]:
        return tuple(catalogue.warm_key(path, DEFINITIONS[name]))

    # group 8 and 2: the CUDA-core kernel; group 5: FlashInfer's tensor-core path, another module
    assert key(decode, "gqa_paged_decode_h16_kv2_d128_ps1") == key(decode, "gqa_paged_decode_h32_kv16_d128_ps64")
    assert key(decode, "gqa_paged_decode_h16_kv2_d128_ps1") != key(decode, "gqa_paged_decode_h20_kv4_d128_ps1")
    assert key(decode, "gqa_paged_decode_h5_kv1_d128_ps1") == key(decode, "gqa_paged_decode_h20_kv4_d128_ps64")
    # prefill: one module whatever the group
    assert key(prefill, "gqa_paged_prefill_causal_h5_kv1_d128_ps1") == key(
        prefill, "gqa_paged_prefill_causal_h32_kv8_d128_ps64"
    )
    # ragged: one module per head sizes
    assert key(ragged, "gqa_ragged_prefill_causal_h5_kv1_d128") == key(ragged, "gqa_ragged_prefill_causal_h32_kv8_d128")
    assert key(ragged, "gqa_ragged_prefill_causal_h5_kv1_d128") != key(ragged, "gqa_ragged_prefill_causal_h8_kv1_d256")
    assert key(ragged, "gqa_ragged_prefill_causal_h5_kv1_d128") != key(
        ragged, "mla_ragged_prefill_causal_h8_qk192_vo128"
    )
    # a bundled definition's own wrapper states no rule: warmed for its definition
    own = REPO_ROOT / "implementations" / "gqa_paged_decode_h32_kv8_d128_ps1" / "flashinfer_wrapper"
    assert key(own, "gqa_paged_decode_h32_kv8_d128_ps1") != key(own, "gqa_paged_decode_h16_kv2_d128_ps1")
    # the estimate counts a build for a new module only
    item = dataclasses.replace(DEFINITIONS["gqa_paged_decode_h16_kv2_d128_ps1"])
    item.implementations = catalogue.family_implementations(item.family, item.inputs)
    item.chosen = catalogue.choose_workloads(item.workloads)
    fresh = catalogue.estimate(item, set())
    built = catalogue.estimate(item, {catalogue.warm_key(decode, item)})
    assert fresh - built == catalogue.BUILD_SECONDS - catalogue.WARM_SECONDS
    # a module the carried cache holds (its key written there when it was built) only loads
    carried = catalogue.estimate(item, set(), frozenset({catalogue.key_text(catalogue.warm_key(decode, item))}))
    assert fresh - carried == catalogue.BUILD_SECONDS - catalogue.CACHED_SECONDS
    # the key's text names no path of this machine: the cache is carried from one machine to the next
    assert str(REPO_ROOT) not in catalogue.key_text(catalogue.warm_key(decode, item))


def test_skip_measured_leaves_out_what_the_registry_holds_on_that_gpu_product_only() -> None:
    h100 = catalogue.measured(REPO_ROOT, "H100 SXM")
    assert h100  # the bundled registry holds the H100 runs of the five bundled definitions
    chosen, left = _planned(held=h100)
    for name in ("gemm_n4096_k4096", "rmsnorm_h4096", "gqa_paged_decode_h32_kv8_d128_ps1"):
        assert name not in chosen
        assert "measured already" in left[name].reason
    held_definitions = {digest for digest, _, _ in h100}
    # a definition with no H100 run yet is planned, though its family has some (a GEMM until stop 60 measured the
    # last; RMSNorms now): chosen, or left out for a reason of its own, never as measured
    held_families = {item.family for item in DEFINITIONS.values() if item.digest in held_definitions}
    unmeasured = sorted(
        name
        for name, item in DEFINITIONS.items()
        if item.family in held_families and item.digest not in held_definitions
    )
    assert unmeasured  # until the catalogue is measured (issue 43)
    for name in unmeasured:
        assert name in chosen or "measured already" not in left[name].reason, name
    assert any(name in chosen for name in unmeasured)
    # the first definition of every family with no H100 run yet comes first: each new family's implementations meet
    # the GPU before any family goes deeper. Every family with kernels has H100 runs since stop 57 (MoE), so two
    # families' runs are taken out of what is held, as if never measured
    fresh = {"rope", "moe"}
    held = {entry for entry in h100 if DIGEST_FAMILY[entry[0]] not in fresh}
    chosen, _ = _planned(held=held)
    held_definitions = {digest for digest, _, _ in held}
    measured_families = {item.family for item in DEFINITIONS.values() if item.digest in held_definitions}
    kernels = [item for item in chosen.values() if not item.reference_only]  # those only a reference serves: last
    new_families = {item.family for item in kernels} - measured_families
    assert new_families >= fresh
    firsts = [item for item in kernels if not item.bundled][: len(new_families)]
    assert {item.family for item in firsts} == new_families
    assert all(item.name == min(x.name for x in kernels if x.family == item.family) for item in firsts)
    deeper = [item for item in kernels if not item.bundled][len(new_families) :]
    family_rank = [catalogue.FAMILY_ORDER.index(item.family) for item in deeper]
    assert family_rank == sorted(family_rank)  # then the families in their order
    assert list(chosen.values())[len(kernels) :] == [item for item in chosen.values() if item.reference_only]
    # FlashInfer-Bench's imported B200 runs are not kictl's: they measure nothing for this script
    assert catalogue.measured(REPO_ROOT, "B200") == set()
    # one implementation measured on every workload: only the others are left to run, on every workload
    item = DEFINITIONS["rmsnorm_h4096"]
    registry = Registry(REPO_ROOT)
    every, _ = _planned(wanted=["rmsnorm_h4096"])
    labels = every["rmsnorm_h4096"].chosen
    digests = {
        path.name: catalogue.implementation_digest(path, item.digest, registry)
        for path in every["rmsnorm_h4096"].implementations
    }
    assert sorted(digests) == ["reference", "torch_rmsnorm"]
    assert len(labels) > 2
    torch_held = {(item.digest, digests["torch_rmsnorm"], label) for label in labels}
    partial, _ = _planned(held=torch_held, wanted=["rmsnorm_h4096"])
    assert [path.name for path in partial["rmsnorm_h4096"].implementations] == ["reference"]
    assert partial["rmsnorm_h4096"].chosen == labels
    # a definition a budget stopped after two workloads: the rest of its workloads, with every implementation
    stopped = {(item.digest, digest, label) for digest in digests.values() for label in labels[:2]}
    rest, _ = _planned(held=stopped, wanted=["rmsnorm_h4096"])
    assert rest["rmsnorm_h4096"].chosen == labels[2:]
    assert sorted(path.name for path in rest["rmsnorm_h4096"].implementations) == ["reference", "torch_rmsnorm"]
    # both measured on every workload: nothing left of it
    _, done = _planned(held=stopped | torch_held | {(item.digest, digests["reference"], x) for x in labels})
    assert "measured already" in done["rmsnorm_h4096"].reason


def test_a_workload_whose_reference_would_outrun_a_call_is_left_for_one_of_its_own() -> None:
    """The H100's measured reference calls predict the rest, in proportion to size: ``h40_kv10_ps1``'s reference
    took 1.74 s a call on ``b1_q128`` (and about 13 s on ``b1_q512``, which a call then spent its budget on)."""
    seconds = catalogue.reference_seconds(REPO_ROOT, "H100 SXM")
    slow = DEFINITIONS["gqa_paged_prefill_causal_h40_kv10_d128_ps1"]
    assert seconds[slow.digest, "b1_q128"] > 1.0
    assert catalogue.reference_seconds(REPO_ROOT, "B200") == {}
    held = catalogue.measured(REPO_ROOT, "H100 SXM")
    chosen, left = _planned(
        held=held, reference_times=seconds, wanted=[slow.name, "gqa_paged_prefill_causal_h5_kv1_d128_ps1"]
    )
    assert slow.name not in chosen
    assert "scaled by size" in left[slow.name].reason
    assert "1.74 s a call on b1_q128" in left[slow.name].reason
    # a fast reference loses nothing: the same plan as without the times
    fast = "gqa_paged_decode_h5_kv1_d128_ps1"
    assert _planned(reference_times=seconds, wanted=[fast])[0][fast].chosen == _planned(wanted=[fast])[0][fast].chosen
    # part of a suite: the workloads up to about MAX_WORKLOAD_SECONDS stay, the larger are listed
    sizes = dict(slow.workloads)
    smallest = min(sizes, key=lambda label: catalogue.workload_size(sizes[label]))
    per_call = catalogue.MAX_WORKLOAD_SECONDS / catalogue.REFERENCE_CALLS / 2  # half the cap at the smallest
    chosen, _ = _planned(reference_times={(slow.digest, smallest): per_call}, wanted=[slow.name])
    kept = chosen[slow.name]
    assert smallest in kept.chosen
    assert 0 < len(kept.chosen) < len(catalogue.choose_workloads(kept.workloads))
    assert "scaled by size" in kept.dropped[-1]


def test_a_definition_never_measured_takes_its_siblings_reference_time_and_the_estimate_counts_it() -> None:
    """Stop 57's first call planned ``gqa_paged_prefill_causal_h6_kv1_d128_ps1`` at 126 s for 8 workloads with no
    H100 run of its own, and spent 348 s on 5 of them (its reference: 4.2 s a call on ``b1_q2048``). A sibling (the
    same family and variable axes: the same reference at other head counts) measured on this product predicts it:
    its largest measured workload, scaled by size; and the estimate counts ``REFERENCE_CALLS`` calls of it."""
    new, sibling = (
        DEFINITIONS["gqa_paged_prefill_causal_h6_kv1_d128_ps64"],
        DEFINITIONS["gqa_paged_prefill_causal_h5_kv1_d128_ps64"],
    )
    sizes = dict(sibling.workloads)
    small, large = min(sizes, key=lambda label: catalogue.workload_size(sizes[label])), "b2_q1024"
    # the largest says the time: a small workload's fixed cost (slow for its size) would drop everything
    times = {(sibling.digest, large): 3.7, (sibling.digest, small): 0.05}
    chosen, _ = _planned(reference_times=times, wanted=[new.name])
    item = chosen[new.name]
    assert f"3.70 s a call on {sibling.name}'s {large}" in item.dropped[-1]
    assert 0 < len(item.chosen) < len(catalogue.choose_workloads(item.workloads))
    assert sorted(item.reference_calls) == sorted(item.chosen)
    mine = dict(item.workloads)
    for label in item.chosen:
        want = 3.7 * catalogue.workload_size(mine[label]) / catalogue.workload_size(sizes[large])
        assert item.reference_calls[label] == pytest.approx(want)
    plain = catalogue.estimate(dataclasses.replace(item, reference_calls={}), set())
    assert catalogue.estimate(item, set()) == pytest.approx(
        plain + catalogue.REFERENCE_CALLS * sum(item.reference_calls.values())
    )
    # its own runs come first; another family's times predict nothing
    own = {(new.digest, item.chosen[0]): 0.001, **times}
    assert "3.70 s" not in " ".join(_planned(reference_times=own, wanted=[new.name])[0][new.name].dropped)
    gemm = DEFINITIONS["gemm_n2048_k4096"]
    assert _planned(reference_times=times, wanted=[gemm.name])[0][gemm.name].reference_calls == {}


def test_the_estimate_counts_the_outputs_the_parent_judges() -> None:
    """Stop 58 planned every GEMM at 37 s; ``gemm_n34816_k5120`` took 161 s, most of it judging 23 outputs a run of
    up to 570 MB (1.1 s an audit at 352 MB). The estimate counts each chosen workload's output bytes, from the
    definition's shapes and dtypes at the workload's axes, so a GEMM of wide outputs is planned longer than a
    narrow one with the same workloads and runs."""
    chosen, _ = _planned(wanted=["gemm_n34816_k5120", "gemm_n256_k3072"])
    wide, narrow = chosen["gemm_n34816_k5120"], chosen["gemm_n256_k3072"]
    assert len(wide.chosen) == len(narrow.chosen)
    assert len(wide.implementations) == len(narrow.implementations)
    for item, n in ((wide, 34816), (narrow, 256)):
        axes = dict(item.workloads)
        for label in item.chosen:
            assert catalogue.output_bytes(item, label) == axes[label]["M"] * n * 2  # C is M x N float16
    extra = catalogue.estimate(wide, set()) - catalogue.estimate(narrow, set())
    judged = sum(catalogue.output_bytes(wide, w) - catalogue.output_bytes(narrow, w) for w in wide.chosen)
    want = catalogue.JUDGED_SECONDS_PER_BYTE * catalogue.JUDGED_OUTPUTS * len(wide.implementations) * judged
    assert extra == pytest.approx(want)
    assert extra > 60
    # a definition whose axes do not give its outputs' shapes is planned as before, not refused
    assert catalogue.output_bytes(dataclasses.replace(wide, spec=None), wide.chosen[0]) == 0
    assert catalogue.output_bytes(wide, "no such workload") == 0


def test_a_bench_past_its_stop_after_keeps_what_it_measured_and_the_script_lists_it(tmp_path: Path) -> None:
    """``kictl bench --stop-after`` as this script runs it: past it no workload starts, the workloads done keep
    their records (both implementations on b1, nothing of b7), and the script reads kictl's line about the rest."""
    out = tmp_path / "latency" / "rmsnorm_h4096"
    impls = [
        arg
        for name in ("reference", "torch_rmsnorm")
        for arg in ("--impl", str(IMPLEMENTATIONS / "rmsnorm_h4096" / name))
    ]
    done = catalogue._kictl(
        "bench", "rmsnorm_h4096", *impls, "--workload", "b1", "--workload", "b7", *FAST, "--stop-after", "0",
        "--out", str(out), log=tmp_path / "kictl.log", timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    line = catalogue._stopped_line(done.stderr)
    assert line.startswith("stopped after "), done.stderr
    assert line.endswith("(--stop-after 0): 1 of 2 workload(s) measured; not started: b7")
    rows = catalogue._rows(out)
    assert sorted(row["name"].split(".")[1] for row in rows) == ["b1", "b1"]
    assert all(row["status"] == "passed" for row in rows)


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (
            ["--definition", "gemm_n4096_k409"],
            "--definition gemm_n4096_k409: no such definition (closest: gemm_n4096_k4096",
        ),
        (["--skip", "rmsnorm_h40960"], "--skip rmsnorm_h40960: no such skip (closest: rmsnorm_h4096"),
        (["--family", "gem"], "--family gem: no such family (closest: gemm)"),
        (["--skip-measured", "H1000"], "--skip-measured H1000: not a GPU product of the datasheet table"),
    ],
)
def test_a_name_the_registry_does_not_know_stops_the_script_in_one_line(
    tmp_path: Path, arguments: list[str], said: str
) -> None:
    """A misspelt definition planned nothing and exited 0 (and an unknown product measured everything again): on the
    GPU machine that is a device call spent. Now exit 2, one line, before any work."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path / "out"), "--plan", *arguments],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert said in done.stderr.splitlines()[-1]
    assert not (tmp_path / "out").exists()


def test_skip_measured_takes_a_products_alias_as_the_records_name_it(tmp_path: Path) -> None:
    """``--skip-measured H100`` is the H100 SXM the records name: the same plan as with the full name."""
    done = [
        subprocess.run(
            [
                sys.executable,
                str(SCRIPT),
                "--out",
                str(tmp_path / product),
                "--plan",
                "--skip-measured",
                product,
                "--family",
                "gemm",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            cwd=REPO_ROOT,
        )
        for product in ("H100", "H100 SXM")
    ]
    assert done[0].returncode == done[1].returncode == 0, done[0].stderr
    assert done[0].stdout == done[1].stdout
    assert "measured already" in done[0].stdout


def test_a_budget_too_small_for_any_definition_starts_none_and_lists_them_as_left(tmp_path: Path) -> None:
    wanted = ["gemm_n128_k2048", "rmsnorm_h128"]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path / "out"), "--budget", "5"]
        + [arg for name in wanted for arg in ("--definition", name)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert sorted((tmp_path / "out" / "left.txt").read_text().split()) == wanted
    assert not (tmp_path / "out" / "latency").exists()  # nothing was started
    assert "left for a later call (budget): gemm_n128_k2048" in done.stdout
    # the next call takes what is left
    left = tmp_path / "out" / "left.txt"
    again = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path / "next"), "--plan", "--definitions-from", str(left)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert "plan: 2 definition(s) to measure" in again.stdout
    assert all(f"plan: {name} (" in again.stdout for name in wanted)


def test_a_kictl_past_the_budget_is_interrupted_then_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the budget a kictl gets SIGTERM (``kictl bench`` then writes the workloads it finished:
    tests/bench/test_interrupt.py), and one that outlives ``GRACE_S`` after it is killed, nothing kept."""
    log = tmp_path / "kictl.log"
    done = catalogue._kictl("definitions", "list", log=log, timeout=0.001)
    assert done.returncode == -signal.SIGTERM  # a command without a handler ends at the signal
    assert "interrupted after 0 s (budget)" in log.read_text()
    assert catalogue._kictl("definitions", "list", log=log, timeout=120).returncode == 0
    monkeypatch.setattr(catalogue, "GRACE_S", 1.0)
    deaf = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    )
    killed = catalogue._run_within([sys.executable, "-c", deaf], timeout=1.0)
    assert killed.returncode == catalogue.KILLED
    assert "killed after 2 s (budget)" in killed.stderr
    line = "warning: interrupted after 41 s: 1 of 3 workload(s) measured; not finished: b7, b64"
    assert catalogue._stopped_line(f"wrote 8 records to x.json\n{line}\n") == line.removeprefix("warning: ")


# --------------------------------------------------------------------------- the torch implementations, on the CPU

#: One ``kictl bench`` session (two sandboxed workers, about 4 CPU-s before any work) per implementation and per
#: thing its code does differently, on the cheapest workload that still does it; definitions that differ only in
#: sizes the code reads from its inputs share one.  What each case adds:
CPU_CASES = [
    ("gemm_n128_k2048", "18c79630", "gemm/torch_matmul"),  # M 8
    ("rmsnorm_h128", "6abd9329", "rmsnorm/torch_rmsnorm"),  # 24 rows
    # rmsnorm/torch_fused_add_rmsnorm: benched by the smoke test below on fused_add_rmsnorm_h2048's smallest
    # workload, through the same kictl bench, and its run is asserted passed there
    # paged decode: with kv_last_page_len (page 64, partly filled last pages, 4 sequences of different lengths in
    # one batch) and without it (page 1), two signatures and two ways of finding a sequence's tokens
    ("gqa_paged_decode_h20_kv4_d128_ps64", "b4_kv2048", "gqa-paged-attention/torch_batched_decode"),
    ("gqa_paged_decode_h5_kv1_d128_ps1", "b1_kv512", "gqa-paged-attention/torch_batched_decode"),
    # paged prefill: the same two signatures (page 64: two pages, the last partly filled; page 1)
    ("gqa_paged_prefill_causal_h16_kv1_d128_ps64", "b1_q128", "gqa-paged-attention/torch_sdpa_prefill"),
    ("gqa_paged_prefill_causal_h6_kv1_d128_ps1", "b1_q16", "gqa-paged-attention/torch_sdpa_prefill"),
    # ragged: one head size, and MLA's QK 192 / VO 128 (the output's head size is the values', another family)
    ("gqa_ragged_prefill_causal_h5_kv1_d128", "b1_q128", "ragged-attention/torch_sdpa_ragged"),
    ("mla_ragged_prefill_causal_h8_qk192_vo128", "b1_q128", "ragged-attention/torch_sdpa_ragged"),
    # MLA paged decode and prefill: each with and without kv_last_page_len (page 64 and page 1)
    ("mla_paged_decode_h16_ckv512_kpe64_ps64", "b4_kv2048", "mla-paged-attention/torch_mla_decode"),
    ("mla_paged_decode_h8_ckv512_kpe64_ps1", "b1_kv512", "mla-paged-attention/torch_mla_decode"),
    ("mla_paged_prefill_causal_h16_ckv512_kpe64_ps64", "b1_q128", "mla-paged-attention/torch_mla_prefill"),
    ("mla_paged_prefill_causal_h8_ckv512_kpe64_ps1", "b1_q16", "mla-paged-attention/torch_mla_prefill"),
    # sampling, the distribution judge: its 100 trials sort the 128,256-token row 100 times, the cost of these
    # sessions, so one row each; the three signatures take different branches (top-k mask, top-p mask, both).
    # That each row is filtered by its own top_k and top_p is checked in this process on a small vocabulary
    # (test_torch_sampling_filters_each_row_by_its_own_parameters), where the rows' parameters differ by design
    ("top_k_sampling_from_probs_v128256", "b1", "sampling/torch_sampling"),
    ("top_p_sampling_from_probs_v128256", "b1", "sampling/torch_sampling"),
    ("top_k_top_p_sampling_from_probs_v128256", "b1", "sampling/torch_sampling"),
    ("rope_with_cos_sin_cache_neox_style_d128_rd64", "t16", "rope/torch_rope"),
    ("gdn_decode_qk4_v8_d128_k_last", "b4", "gdn/torch_gdn_decode"),
    # GDN MTP: its intermediate_states_buffer input is written, judged as an output (docs/bench.md)
    ("gdn_mtp_qk4_v8_d128_k_last", "b4_t2", "gdn/torch_gdn_mtp"),
    ("mamba_ssu_decode_h64_d64_s128_ng4", "b4", "mamba-ssu/torch_mamba_ssu"),  # outputs (output, new_state)
]


@pytest.mark.slow
@pytest.mark.parametrize(("definition", "workload", "implementation"), CPU_CASES)
def test_torch_family_implementation_passes_kictl_bench_on_the_cpu(
    cli: RunCli, tmp_path: Path, definition: str, workload: str, implementation: str
) -> None:
    """The cheapest protocol (``FAST``: one round, no warm-up, one timed call, audited): what is asked is that
    the implementation is correct against the definition's reference, not its time."""
    assert FAMILIES / implementation in catalogue.family_implementations(
        DEFINITIONS[definition].family, DEFINITIONS[definition].inputs
    )
    result = cli(
        "bench", definition, "--impl", FAMILIES / implementation, "--workload", workload, *FAST,
        "--out", tmp_path / "out", "--registry", REPO_ROOT,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    runs = [
        record
        for manifest in (tmp_path / "out").glob("*.json")
        for record in json.loads(manifest.read_text()).values()
        if record["kind"] == "BenchmarkRun"
    ]
    assert len(runs) == 1
    assert runs[0]["spec"]["status"] == "passed"
    assert runs[0]["metadata"]["name"].startswith(Path(implementation).name + "_")


def test_torch_sampling_filters_each_row_by_its_own_parameters() -> None:
    """The sampler's masks read top_k and top_p per row: three rows of 300 tokens whose parameters differ (2, 40
    and every token; p 0.2, 0.7 and 1), each signature 100 calls, judged as kictl judges a sampling run.  A
    sampler that applied one row's parameter to all would put samples outside row 0's two tokens or leave
    row 2's tail unsampled."""
    torch = pytest.importorskip("torch")
    from kictl.bench.wire.generators import probability_rows

    path = FAMILIES / "sampling" / "torch_sampling" / "sampling.py"
    spec = importlib.util.spec_from_file_location("torch_sampling_under_test", path)
    assert spec is not None
    assert spec.loader is not None
    sampler = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sampler)
    probs = probability_rows((3, 300), torch.float32, 11)
    top_k = torch.tensor([2, 40, 0], dtype=torch.int32)
    top_p = torch.tensor([0.2, 0.7, 1.0], dtype=torch.float32)
    torch.manual_seed(3)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # 300-token rows: a second thread only adds its hand-offs
    try:
        _judge_each_row(sampler, probs, top_k, top_p)
    finally:
        torch.set_num_threads(threads)


def _judge_each_row(sampler: ModuleType, probs: Any, top_k: Any, top_p: Any) -> None:
    from kictl.families import judges

    for given in ({"top_k": top_k}, {"top_p": top_p}, {"top_k": top_k, "top_p": top_p}):
        samples = [sampler.run(probs, *given.values()) for _ in range(judges.DEFAULT_TRIALS)]
        found = judges.judge_distribution({"probs": probs, **given}, samples, limit=judges.DEFAULT_MAX_TOTAL_VARIATION)
        assert found.status == "passed", (list(given), found.detail)
        shared = {name: value[:1].expand(3) for name, value in given.items()}  # row 0's parameters for every row
        wrong = judges.judge_distribution({"probs": probs, **shared}, samples, limit=0.2)
        assert wrong.status == "incorrect_numerical", list(given)


@pytest.mark.slow
def test_smoke_runs_a_bundled_and_a_family_served_definition_on_the_cpu(tmp_path: Path) -> None:
    """The script's own path on the CPU; its family-served definition is the CPU check of
    ``rmsnorm/torch_fused_add_rmsnorm`` (``CPU_CASES`` leaves it to this test): fused_add_rmsnorm_h2048's smallest
    workload, that implementation's run passed beside the reference's."""
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), "--smoke"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    summary = (out / "summary.txt").read_text()
    assert "rmsnorm_h4096: latency exit 0" in summary
    assert "fused_add_rmsnorm_h2048: latency exit 0" in summary
    rows = {
        line.split()[0]: line.split()[1] for line in summary.splitlines() if line.startswith(("reference_", "torch_"))
    }
    assert list(rows.values()) == ["passed"] * 4
    implementations = sorted(name.split(".")[0].rsplit("_", 1)[0] for name in rows)
    assert implementations == ["reference", "reference", "torch_fused_add_rmsnorm", "torch_rmsnorm"]
    fused = next(name for name in rows if name.startswith("torch_fused_add_rmsnorm_"))
    smallest = catalogue.choose_workloads(DEFINITIONS["fused_add_rmsnorm_h2048"].workloads)[0]
    assert smallest.startswith(fused.split(".")[1]), (fused, smallest)  # the name is cut at 70 characters
    assert (out / "records.tgz").is_file()


def test_a_causal_prefill_workload_with_fewer_keys_than_queries_is_not_chosen_and_the_plan_says_so() -> None:
    """FlashInfer Trace's captured ps1 prefill suites mostly give fewer KV tokens than queries: there the reference
    writes NaN for the queries that see no key and FlashInfer writes 0 (H100, 12-07), so no honest kernel passes."""
    chosen, _ = _planned(wanted=["gqa_paged_prefill_causal_h32_kv4_d128_ps1"])
    item = chosen["gqa_paged_prefill_causal_h32_kv4_d128_ps1"]
    by_label = dict(item.workloads)
    assert item.chosen
    for label in item.chosen:
        axes = by_label[label]
        assert axes["total_q"] <= axes["num_kv_indices"] * item.axes["page_size"], (label, axes)
    keyless = [label for label, axes in item.workloads if catalogue.keyless_queries(item, axes)]
    assert "587455ef-3a57-4186-8d3e-56cabb0448c0" in keyless  # 42 queries, 2 keys: failed every kernel on the H100
    assert "a31a212f-5e08-4961-879d-781f5886cf06" not in keyless  # 2 and 2: passed
    assert any(f"{len(keyless)} of {len(item.workloads)} workload(s)" in text for text in item.dropped), item.dropped
    # a decode definition, or a prefill with keys enough, keeps every workload
    decode, _ = _planned(wanted=["gqa_paged_decode_h32_kv4_d128_ps1"])
    assert not any("KV tokens" in text for text in decode["gqa_paged_decode_h32_kv4_d128_ps1"].dropped)
