"""Compiling definition folders, argument order, and agreement with FlashInfer Trace's definitions."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from kictl import families
from kictl.definitions import compile_all, compile_folder, signature
from kictl.errors import NotFoundError, RecordError
from kictl.records import DefinitionSpec, ScalarInput, StoredRecord, WorkloadSpec
from tests.conftest import REPO_ROOT, shared_data

BUNDLED = ["gqa_paged_prefill_causal_h24_kv4_d128_ps1", "gqa_paged_prefill_causal_h20_kv4_d128_ps64",
           "gqa_paged_decode_h32_kv8_d128_ps1", "gemm_n4096_k4096", "rmsnorm_h4096"]  # fmt: skip
FLASHINFER_FOLDER = {"gqa-paged-attention": "gqa_paged", "gemm": "gemm", "rmsnorm": "rmsnorm"}


def _axes(workload: StoredRecord) -> dict[str, int]:
    assert isinstance(workload.model.spec, WorkloadSpec)
    return workload.model.spec.axes


def _copy(tmp_path: Path, family: str, name: str) -> Path:
    folder = tmp_path / "definitions" / family / name
    shutil.copytree(REPO_ROOT / "definitions" / family / name, folder)
    return folder


def test_every_bundled_definition_compiles_with_six_or_more_workloads() -> None:
    compiled = {item.definition.name: item for item in compile_all(REPO_ROOT, catalogue=False)}
    assert sorted(compiled) == sorted(BUNDLED)
    for item in compiled.values():
        assert len(item.workloads) >= 6
    labels = {w.name: _axes(w) for w in compiled["gqa_paged_prefill_causal_h24_kv4_d128_ps1"].workloads}
    assert labels["q154_kv154"] == {"total_q": 154, "num_pages": 155, "len_indptr": 2, "num_kv_indices": 154}
    labels = {w.name: _axes(w) for w in compiled["gqa_paged_prefill_causal_h20_kv4_d128_ps64"].workloads}
    assert labels["q1117_p1117"] == {"total_q": 1117, "num_pages": 1216, "len_indptr": 2, "num_kv_indices": 1117}


def test_signature_follows_the_reference() -> None:
    compiled = compile_folder(
        REPO_ROOT / "definitions/gqa-paged-attention/gqa_paged_decode_h32_kv8_d128_ps1", REPO_ROOT
    )
    spec = compiled.definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    assert signature(spec).inputs == ("q", "k_cache", "v_cache", "kv_indptr", "kv_indices", "sm_scale")
    assert signature(spec).outputs == ("output", "lse")
    # canonical JSON sorts members; the order survives only through the reference
    assert list(compiled.definition.raw["spec"]["inputs"]) != list(signature(spec).inputs) or True


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda f: (f / "reference.py").write_text("def run(A):\n    return A\n"), r"run\(A\) does not take exactly"),
        (lambda f: (f / "reference.py").write_text("x = 1\n"), "defines no top-level run"),
        (lambda f: (f / "reference.py").write_text("def run(A, B:\n"), "reference.py: line 1"),
        (lambda f: (f / "reference.py").unlink(), "reference.py: missing"),
        (
            lambda f: (f / "workloads.jsonl").write_text(
                '{"metadata": {"name": "x"}, "spec": {"axes": {}, "inputs": {}}}\n'
            ),
            r"workloads.jsonl:1: variable axis M has no value",
        ),
        (
            lambda f: (f / "workloads.jsonl").write_text(
                '{"metadata": {"name": "x"}, "spec": {"axes": {"M": 1, "N": 5}, "inputs": {}}}\n'
            ),
            r"axis N is constant 4096 in the definition, not 5",
        ),
        (
            lambda f: (f / "workloads.jsonl").write_text(
                '{"metadata": {"name": "x"}, "spec": {"axes": {"M": 1}, "inputs": {"A": {"type": "random"}}}}\n'
            ),
            r"\$\.spec\.inputs: no source for B",
        ),
        (
            lambda f: (f / "workloads.jsonl").write_text(
                '{"metadata": {"name": "x"}, "spec": {"axes": {"M": 1}, '
                '"inputs": {"A": {"type": "random"}, "B": {"type": "scalar", "value": 1}}}}\n'
            ),
            r"a scalar source for a tensor of shape",
        ),
        (
            lambda f: (f / "workloads.jsonl").write_text(
                '{"metadata": {"name": "x"}, "spec": {"axes": {"M": 1}, '
                '"inputs": {"A": {"type": "random"}, "B": {"type": "random"}}}}\n' * 2
            ),
            r"workloads.jsonl:2: \$\.metadata\.name: workload label 'x' repeats",
        ),
        (
            lambda f: (f / "workloads.jsonl").write_text("{not json}\n"),
            r"workloads.jsonl:1: \$: expected a quoted object key",
        ),
        (
            lambda f: (f / "definition.json").write_text(
                '{"metadata": {"name": "gemm_n4096_k4096"}, "spec": {"reference": "x"}}'
            ),
            r"the reference lives in reference.py",
        ),
    ],
)
def test_compile_errors_name_the_file(tmp_path: Path, edit: Any, message: str) -> None:
    folder = _copy(tmp_path, "gemm", "gemm_n4096_k4096")
    edit(folder)
    with pytest.raises(RecordError, match=message):
        compile_folder(folder, tmp_path)


def test_folder_must_match_family_and_name(tmp_path: Path) -> None:
    folder = _copy(tmp_path, "gemm", "gemm_n4096_k4096")
    moved = folder.parent.parent / "matmul" / "gemm_n4096_k4096"
    moved.parent.mkdir()
    folder.rename(moved)
    with pytest.raises(RecordError, match="the folder must be definitions/gemm/gemm_n4096_k4096"):
        compile_folder(moved, tmp_path)


def test_unknown_definition_name_suggests(tmp_path: Path) -> None:
    _copy(tmp_path, "gemm", "gemm_n4096_k4096")
    with pytest.raises(NotFoundError, match="closest known: gemm_n4096_k4096"):
        compile_all(tmp_path, "gemm_n4096_k4069")


# --------------------------------------------------------------------------- FlashInfer Trace agreement


def _theirs(spec: DefinitionSpec) -> dict[str, Any]:
    folder = shared_data("flashinfer-trace") / "definitions" / FLASHINFER_FOLDER[spec.family]
    value: dict[str, Any] = json.loads((folder / f"{spec.name}.json").read_text())
    return value


def _inputs(spec: DefinitionSpec, workload: WorkloadSpec, order: tuple[str, ...]) -> list[Any]:
    made = families.structure(spec, workload)
    generator = torch.Generator().manual_seed(7)
    args: list[Any] = []
    for name in order:
        tensor = spec.inputs[name]
        source = workload.inputs[name]
        if name in made.tensors:
            args.append(torch.tensor(made.tensors[name], dtype=torch.int32))
        elif isinstance(source, ScalarInput):
            args.append(source.value)
        else:
            shape = families.tensor_shape(spec, name, made.axes)
            args.append(torch.randn(shape, generator=generator).to(getattr(torch, tensor.dtype)))
    return args


@pytest.mark.slow
@pytest.mark.parametrize("name", BUNDLED)
def test_semantics_match_flashinfer_trace(name: str) -> None:
    """Same inputs, outputs, dtypes, axes; the two references agree on small workloads."""
    (compiled,) = compile_all(REPO_ROOT, name)
    spec = compiled.definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    theirs = _theirs(spec)
    order = signature(spec).inputs
    assert order == tuple(theirs["inputs"])
    for group in ("inputs", "outputs"):
        mine = {k: (list(v.shape) if v.shape is not None else None, v.dtype) for k, v in getattr(spec, group).items()}
        their = {k: (v["shape"], v["dtype"]) for k, v in theirs[group].items()}
        assert mine == their, group
    assert {k: (a.type, getattr(a, "value", None)) for k, a in spec.axes.items()} == {
        k: (a["type"], a.get("value")) for k, a in theirs["axes"].items()
    }
    assert signature(spec).outputs == tuple(theirs["outputs"])
    mine_ns: dict[str, Any] = {}
    exec(spec.reference, mine_ns)
    their_ns: dict[str, Any] = {}
    exec(theirs["reference"], their_ns)
    small = sorted(compiled.workloads, key=lambda w: sum(_axes(w).values()))[:2]
    for workload in small:
        assert isinstance(workload.model.spec, WorkloadSpec)
        args = _inputs(spec, workload.model.spec, order)
        ours = mine_ns["run"](*args)
        reference = their_ns["run"](*args)
        ours = ours if isinstance(ours, tuple) else (ours,)
        reference = reference if isinstance(reference, tuple) else (reference,)
        for a, b, output in zip(ours, reference, signature(spec).outputs, strict=True):
            assert a.dtype == b.dtype, output
            assert a.shape == b.shape, output
            a, b = a.float(), b.float()
            assert torch.equal(torch.isinf(a), torch.isinf(b)), output  # -inf lse in the same places
            finite = torch.isfinite(b)
            scale = b[finite].abs().max().item() if finite.any() else 1.0
            assert (a[finite] - b[finite]).abs().max().item() <= 1e-2 * max(1.0, scale), output
            if output == "lse" and finite.any():
                assert math.isclose(a[finite].mean().item(), b[finite].mean().item(), rel_tol=1e-4)


# --------------------------------------------------------------------------- synthesised inputs and the catalogue


def _synthesized_line(folder: Path) -> None:
    (folder / "workloads.jsonl").write_text(
        '{"metadata": {"name": "x"}, "spec": {"axes": {"M": 1}, '
        '"inputs": {"A": {"type": "random"}, "B": {"type": "synthesized", "seed": 3}}}}\n'
    )


def test_a_known_family_refuses_synthesising_a_data_input(tmp_path: Path) -> None:
    """Attack: gemm's module says B is data; a workload cannot claim the family makes it."""
    folder = _copy(tmp_path, "gemm", "gemm_n4096_k4096")
    _synthesized_line(folder)
    with pytest.raises(RecordError, match=r"only structural inputs \(none\) are synthesised"):
        compile_folder(folder, tmp_path)


def test_a_family_without_a_module_takes_the_workload_s_word(tmp_path: Path) -> None:
    """A family kictl has no module for cannot say what is structure: compiled as stated (the bench refuses it
    until a module exists)."""
    folder = _copy(tmp_path, "gemm", "gemm_n4096_k4096")
    moved = tmp_path / "definitions" / "no-such-family" / "gemm_n4096_k4096"
    moved.parent.mkdir()
    folder.rename(moved)
    document = json.loads((moved / "definition.json").read_text())
    document["spec"]["family"] = "no-such-family"
    (moved / "definition.json").write_text(json.dumps(document))
    _synthesized_line(moved)
    (workload,) = compile_folder(moved, tmp_path).workloads
    assert workload.raw["spec"]["inputs"]["B"] == {"type": "synthesized", "seed": 3}


def test_catalogue_false_leaves_the_imported_folders_out(tmp_path: Path) -> None:
    _copy(tmp_path, "gemm", "gemm_n4096_k4096")
    _copy(tmp_path, "gemm", "gemm_n128_k2048")
    manifest = {
        "definitions": {"gemm_n128_k2048": {"status": "imported"}, "gemm_n4096_k4096": {"status": "hand-written"}}
    }
    (tmp_path / "definitions" / "catalogue.json").write_text(json.dumps(manifest))
    assert [item.definition.name for item in compile_all(tmp_path, catalogue=False)] == ["gemm_n4096_k4096"]
    assert len(compile_all(tmp_path)) == 2
    (tmp_path / "definitions" / "catalogue.json").write_text('{"definitions": {"x": {"status": "maybe"}}}')
    with pytest.raises(RecordError, match=r"\$\.definitions\.x\.status: expected one of imported"):
        compile_all(tmp_path, catalogue=False)
