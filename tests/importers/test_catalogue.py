"""The catalogue (issue 42): FlashInfer Trace written as definition folders, its labels, its suites, where it runs.

A hand-made dataset (tests/assets/importers/current_schema) is written by ``write_catalogue`` into a
registry made by `kictl init`, compiled, and read back through the CLI.  The bundled catalogue itself is
read in place (never copied: about 1,900 files).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from kictl import blobs, canon
from kictl.definitions import (
    GENERATED_SUITE,
    NOT_CAPTURED,
    placement,
    read_catalogue,
    workload_origin,
)
from kictl.errors import RecordError
from kictl.importers.flashinfer_bench.catalogue import LABEL_COMMIT, LABEL_PATH, LABEL_SOURCE, write_catalogue
from kictl.importers.flashinfer_bench.suites import generated_suite
from kictl.records import API_VERSION, DefinitionSpec, record_from_value
from kictl.store.registry import Registry
from tests.conftest import REPO_ROOT, RunCli
from tests.importers.conftest import CopyDataset, new_registry

COMMIT = "0123456789abcdef0123456789abcdef01234567"
SOURCE = "github:example/trace"
BUNDLED_COMMIT = "ecafa9c2c62007667838226068b21ca9ff1c9183"
HAND_WRITTEN = {
    "gemm_n4096_k4096",
    "gqa_paged_decode_h32_kv8_d128_ps1",
    "gqa_paged_prefill_causal_h20_kv4_d128_ps64",
    "gqa_paged_prefill_causal_h24_kv4_d128_ps1",
    "rmsnorm_h4096",
}
DECODE = "gqa_paged_decode_h2_kv1_d4_ps1"
PRESENT = "5b0c8d0e-1f7a-4c51-9a43-0d2f3b9e7a11"  # its blob ships with the dataset
ABSENT = "9e3f1a52-77c4-4d0b-8f1e-6a5b2c4d8e22"  # its blob does not


def _catalogue(copy_dataset: CopyDataset, tmp_path: Path, cli: RunCli) -> tuple[Path, Registry]:
    dataset = copy_dataset("current_schema")
    registry = new_registry(tmp_path / "registry")
    result = cli("definitions", "catalogue", dataset, "--commit", COMMIT, "--source", SOURCE,
                 "--registry", registry.root)  # fmt: skip
    assert result.exit_code == 0, result.output
    result = cli("definitions", "compile", "--registry", registry.root)
    assert result.exit_code == 0, result.output
    return dataset, registry


def _workloads(registry: Registry, name: str) -> list[Any]:
    digest = registry.resolve(name, ["Definition"]).digest
    return [r for r in registry.iter_records(["Workload"]) if r.raw["spec"]["definitionDigest"] == digest]


def test_missing_blobs_are_labelled_until_the_dataset_brings_them(
    copy_dataset: CopyDataset, tmp_path: Path, cli: RunCli
) -> None:
    """The catalogue keeps a blob the source did not ship as missing: labelled on the leaderboard and the
    records; importing the dataset with the blob (made here) adds the captured workload, which has no label."""
    dataset, registry = _catalogue(copy_dataset, tmp_path, cli)
    origins = {w.name: workload_origin(w.raw) for w in _workloads(registry, DECODE)}
    assert origins == {PRESENT: None, ABSENT: NOT_CAPTURED}
    board = cli("leaderboard", DECODE, "--registry", registry.root)
    assert board.exit_code == 0, board.output
    text = " ".join(board.stdout.split())
    assert f"inputs: 1 of 2 workload(s) {NOT_CAPTURED}: {ABSENT}" in text
    assert PRESENT not in text.split("inputs:", 1)[1]

    folder = dataset / "blob/workloads/gqa_paged" / DECODE
    data = blobs.write_safetensors(
        {"kv_indptr": blobs.int32_tensor([0, 5]), "kv_indices": blobs.int32_tensor([4, 2, 0, 1, 3])}
    )
    (folder / "absent.safetensors").write_bytes(data)
    imported = cli("import", "flashinfer-bench", dataset, "--registry", registry.root, "--json")
    assert imported.exit_code in (0, 1), imported.output
    report = json.loads(imported.stdout)
    assert not [s for s in report["skipped"] if s["kind"] in ("Definition", "Workload")], report["skipped"]
    assert report["counts"]["Definition"] == {"new": 0, "present": 2, "skipped": 0}  # the catalogue's digests
    captured = [w for w in _workloads(registry, DECODE) if w.name == ABSENT and workload_origin(w.raw) is None]
    assert len(captured) == 1
    assert captured[0].raw["spec"]["inputs"]["kv_indices"]["digest"] == canon.bytes_digest(data)
    board = cli("leaderboard", DECODE, "--workload", captured[0].digest, "--registry", registry.root)
    assert board.exit_code == 0, board.output
    assert "inputs:" not in board.stdout


def test_definitions_carry_provenance_and_suites_are_labelled(
    copy_dataset: CopyDataset, tmp_path: Path, cli: RunCli
) -> None:
    _, registry = _catalogue(copy_dataset, tmp_path, cli)
    for name in (DECODE, "gemm_n8_k4"):
        record = registry.resolve(name, ["Definition"])
        labels = record.raw["metadata"]["labels"]
        assert labels[LABEL_SOURCE] == SOURCE
        assert labels[LABEL_COMMIT] == COMMIT
        folder = "gemm" if name.startswith("gemm") else "gqa_paged"
        assert labels[LABEL_PATH] == f"current_schema/definitions/{folder}/{name}.json"
    manifest = read_catalogue(registry.root)
    assert manifest is not None
    assert manifest["commit"] == COMMIT
    assert {n: e["status"] for n, e in manifest["definitions"].items()} == {
        DECODE: "imported",
        "gemm_n8_k4": "imported",
    }
    shipped = {w.name for w in _workloads(registry, "gemm_n8_k4") if workload_origin(w.raw) is None}
    assert shipped  # the dataset ships gemm workloads: random inputs, the source's own, no label


def test_a_definition_without_workloads_gets_the_stated_suite(
    copy_dataset: CopyDataset, tmp_path: Path, cli: RunCli
) -> None:
    dataset = copy_dataset("current_schema")
    (dataset / "workloads/gemm/gemm_n8_k4.jsonl").unlink()
    shutil.rmtree(dataset / "traces")  # its evaluated lines name workloads too
    registry = new_registry(tmp_path / "registry")
    write_catalogue(dataset, registry.root, source=SOURCE, commit=COMMIT)
    assert cli("definitions", "compile", "--registry", registry.root).exit_code == 0
    suite = _workloads(registry, "gemm_n8_k4")
    assert sorted(w.raw["spec"]["axes"]["M"] for w in suite) == [1, 4, 16, 64, 256, 1024, 4096, 8192]
    assert {workload_origin(w.raw) for w in suite} == {GENERATED_SUITE}
    seeds = [sorted(i["seed"] for i in w.raw["spec"]["inputs"].values()) for w in suite]
    assert len({tuple(s) for s in seeds}) == len(suite)  # seeded, and recorded in each line
    board = cli("leaderboard", "gemm_n8_k4", "--registry", registry.root)
    assert f"8 of 8 workload(s) {GENERATED_SUITE}" in " ".join(board.stdout.split())


def test_a_hand_written_folder_is_kept_and_an_unrepresentable_definition_is_listed(
    copy_dataset: CopyDataset, tmp_path: Path, cli: RunCli
) -> None:
    """Attack: the catalogue must neither overwrite a hand-written definition nor drop one it cannot take."""
    dataset = copy_dataset("current_schema")
    source = json.loads((dataset / "definitions/gemm/gemm_n8_k4.json").read_text())
    odd = dict(source, name="gemm_fp4_n8_k4")
    odd["inputs"] = {**source["inputs"], "A": {**source["inputs"]["A"], "dtype": "float4_e2m1"}}
    (dataset / "definitions/gemm/gemm_fp4_n8_k4.json").write_text(json.dumps(odd))
    ruleless = dict(source, name="gemm_ruleless", axes={**source["axes"], "M": {"type": "var"}, "K2": {"type": "var"}})
    (dataset / "definitions/gemm/gemm_ruleless.json").write_text(json.dumps(ruleless))
    registry = new_registry(tmp_path / "registry")
    mine = registry.root / "definitions/gemm/gemm_n8_k4"
    mine.mkdir(parents=True)
    (mine / "definition.json").write_text('{"metadata": {"name": "gemm_n8_k4"}, "spec": {}}')
    before = (mine / "definition.json").read_bytes()
    report = write_catalogue(dataset, registry.root, source=SOURCE, commit=COMMIT)
    assert (mine / "definition.json").read_bytes() == before
    assert not (mine / "reference.py").exists()
    entries = report.entries
    assert entries["gemm_n8_k4"]["status"] == "hand-written"
    assert entries["gemm_fp4_n8_k4"]["status"] == "unrepresented"
    assert entries["gemm_ruleless"]["status"] == "imported"  # no suite rule covers K2: no workload, and it says so
    assert entries["gemm_ruleless"]["workloads"] == {"generated": 0}
    assert "no suite rule covers the variable axes K2, M" in entries["gemm_ruleless"]["noSuite"]
    assert "$.spec.inputs.A.dtype" in entries["gemm_fp4_n8_k4"]["reason"]
    manifest = read_catalogue(registry.root)
    assert manifest is not None
    assert manifest["definitions"]["gemm_fp4_n8_k4"]["status"] == "unrepresented"
    (mine / "definition.json").unlink()
    mine.rmdir()
    listed = cli("definitions", "list", "--registry", registry.root)
    assert listed.exit_code == 0, listed.output
    assert re.search(r"gemm_fp4_n8_k4 .*unrepresented: ", listed.stdout)
    rows = json.loads(cli("definitions", "list", "--registry", registry.root, "--json").stdout)
    (odd_row,) = [row for row in rows if row["name"] == "gemm_fp4_n8_k4"]
    assert odd_row["digest"] is None
    assert "$.spec.inputs.A.dtype" in odd_row["reason"]


def test_the_commit_must_be_a_full_commit(copy_dataset: CopyDataset, tmp_path: Path, cli: RunCli) -> None:
    registry = new_registry(tmp_path / "registry")
    result = cli("definitions", "catalogue", copy_dataset("current_schema"), "--commit", "ecafa9c2",
                 "--registry", registry.root)  # fmt: skip
    assert result.exit_code == 2
    assert "full 40-digit commit" in result.output
    assert not (registry.root / "definitions" / "catalogue.json").exists()


# --------------------------------------------------------------------------- where definitions run


def _spec(tags: list[str], dtype: str = "bfloat16") -> DefinitionSpec:
    raw = {
        "apiVersion": API_VERSION,
        "kind": "Definition",
        "metadata": {"name": "x"},
        "spec": {
            "name": "x", "family": "moe", "axes": {"n": {"type": "var"}},
            "inputs": {"a": {"shape": ["n"], "dtype": dtype}}, "outputs": {"b": {"shape": ["n"], "dtype": "bfloat16"}},
            "reference": "def run(a):\n    return a\n", "tags": tags,
        },
    }  # fmt: skip
    spec = record_from_value(raw).model.spec
    assert isinstance(spec, DefinitionSpec)
    return spec


@pytest.mark.parametrize(
    ("tags", "dtype", "needs"),
    [
        (["gpu:sm100"], "bfloat16", "blackwell"),
        (["fi_api:flashinfer.fused_moe.trtllm_fp8_block_scale_moe"], "bfloat16", "blackwell"),
        (["quantization:float4_e2m1fn_mxfp4"], "bfloat16", "blackwell"),
        ([], "float8_e4m3fn", "hopper"),
        (["quant:fp8"], "bfloat16", "hopper"),
        (["fi_api:flashinfer.gdn.gated_delta_rule_decode"], "bfloat16", "hopper"),
        (["fi_api:flashinfer.norm.rmsnorm", "model:x"], "bfloat16", "any"),
        ([], "float16", "any"),
    ],
)
def test_the_placement_rule(tags: list[str], dtype: str, needs: str) -> None:
    assert placement(_spec(tags, dtype)).needs == needs


# --------------------------------------------------------------------------- the bundled catalogue


def _bundled_manifest() -> dict[str, Any]:
    manifest = read_catalogue(REPO_ROOT)
    assert manifest is not None
    return manifest


def test_the_bundled_catalogue_lists_all_156_with_provenance() -> None:
    manifest = _bundled_manifest()
    entries = manifest["definitions"]
    assert manifest["source"] == "github:flashinfer-ai/flashinfer-bench"
    assert manifest["commit"] == BUNDLED_COMMIT
    assert len(entries) == 156
    assert {n for n, e in entries.items() if e["status"] == "hand-written"} == HAND_WRITTEN
    imported = {n for n, e in entries.items() if e["status"] == "imported"}
    assert len(imported) == 151
    families = {e["family"] for e in entries.values()}
    assert len(families) == 12
    folders = {p.parent.name: p.parent for p in (REPO_ROOT / "definitions").glob("*/*/definition.json")}
    assert set(folders) == imported | HAND_WRITTEN
    names = {
        json.loads(p.read_bytes())["spec"]["name"] for p in (REPO_ROOT / "registry/records/Definition").glob("*/*.json")
    }
    assert names == imported | HAND_WRITTEN  # every one compiled into its record
    for name in imported:
        document = json.loads((folders[name] / "definition.json").read_text())
        assert document["metadata"]["labels"][LABEL_COMMIT] == BUNDLED_COMMIT
        assert document["metadata"]["labels"][LABEL_PATH] == entries[name]["sourcePath"]


def _bundled_spec(name: str, family: str) -> DefinitionSpec:
    folder = REPO_ROOT / "definitions" / family / name
    document = json.loads((folder / "definition.json").read_text())
    raw = {"apiVersion": API_VERSION, "kind": "Definition", "metadata": document["metadata"],
           "spec": {**document["spec"], "reference": (folder / "reference.py").read_text()}}  # fmt: skip
    spec = record_from_value(raw).model.spec
    assert isinstance(spec, DefinitionSpec)
    return spec


def test_the_bundled_generated_suites_are_the_rule_s() -> None:
    """Every imported definition without shipped workloads holds exactly the suite the rule gives (8 lines)."""
    manifest = _bundled_manifest()
    generated = [n for n, e in manifest["definitions"].items() if "generated" in e.get("workloads", {})]
    assert len(generated) == 128
    for name in generated:
        family = manifest["definitions"][name]["family"]
        lines = [json.loads(line) for line in (REPO_ROOT / "definitions" / family / name / "workloads.jsonl").open()]
        assert len(lines) == 8
        assert [(line["metadata"]["name"], line["spec"]) for line in lines] == generated_suite(
            _bundled_spec(name, family)
        ), name


def test_bundled_placements() -> None:
    """The 19 MoE baselines need Blackwell; FP8 and GDN kernels Hopper; the rest any GPU."""
    needs: dict[str, dict[str, int]] = {}
    for name, entry in _bundled_manifest()["definitions"].items():
        where = placement(_bundled_spec(name, entry["family"])).needs
        needs.setdefault(entry["family"], {}).setdefault(where, 0)
        needs[entry["family"]][where] += 1
    assert needs["moe"] == {"blackwell": 19}
    assert needs["dsa-paged"] == {"blackwell": 2, "hopper": 1}
    assert needs["gdn"] == {"hopper": 6, "any": 3}
    assert all(set(counts) == {"any"} for family, counts in needs.items() if family not in ("moe", "dsa-paged", "gdn"))


def test_generated_suite_refuses_axes_no_rule_covers() -> None:
    with pytest.raises(RecordError, match="no suite rule covers the variable axes n"):
        generated_suite(_spec([]))


def test_the_site_lists_families_placement_provenance_and_labels(
    copy_dataset: CopyDataset, tmp_path: Path, cli: RunCli
) -> None:
    _, registry = _catalogue(copy_dataset, tmp_path, cli)
    out = tmp_path / "site"
    built = cli("site", "build", out, "--registry", registry.root)
    assert built.exit_code == 0, built.output
    front = " ".join((out / "index.html").read_text().split())
    assert "2 definitions in 2 families:" in front
    assert re.search(r'href="\./#family-gemm">gemm</a> \(1 definition, \d+ workloads\)', front)
    assert 'id="family-gqa-paged-attention">gqa-paged-attention (1 definition)</h3>' in front
    page = " ".join((out / "d" / DECODE / "index.html").read_text().split())
    assert "2 definitions in 2 families:" in page
    assert f"{SOURCE} at <code>{COMMIT[:12]}</code>" in page
    assert "any GPU: no FP8/FP4 tensor" in page
    assert ABSENT in page
    assert page.count("not the captured tensors") == 1
    index_rows = json.loads((out / "index.json").read_text())
    assert {row["runsOn"] for row in index_rows} == {"any"}


def test_definitions_list_shows_the_156() -> None:
    """`kictl definitions list` over the repository's registry, read in place (nothing is written)."""
    from typer.testing import CliRunner

    from kictl.cli import make_app

    result = CliRunner().invoke(make_app(), ["definitions", "list", "--registry", str(REPO_ROOT), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == 156
    assert all(row["digest"] for row in rows)
    moe = [row for row in rows if row["family"] == "moe"]
    assert len(moe) == 19
    assert {row["runsOn"] for row in moe} == {"blackwell"}


@pytest.mark.parametrize(
    ("raw", "origin"),
    [
        ({"spec": {"inputs": {"i": {"type": "blob", "key": "i", "path": "x", "missing": True}}}}, NOT_CAPTURED),
        # attack: metadata cannot hide what the spec says (the digest covers the spec, not the metadata)
        (
            {
                "metadata": {"labels": {"kernelindex.dev/workloads": "captured"}},
                "spec": {"inputs": {"i": {"type": "blob", "key": "i", "path": "x", "missing": True}}},
            },
            NOT_CAPTURED,
        ),
        ({"spec": {"uuid": "u", "inputs": {"i": {"type": "synthesized", "seed": 1}}}}, NOT_CAPTURED),
        ({"spec": {"inputs": {"i": {"type": "synthesized", "seed": 1}}}}, None),  # hand-written, claims no capture
        ({"spec": {"uuid": "u", "inputs": {"i": {"type": "blob", "key": "i", "digest": "sha256:" + "0" * 64}}}}, None),
        ({"metadata": {"labels": {"kernelindex.dev/workloads": "generated"}}, "spec": {"inputs": {}}}, GENERATED_SUITE),
    ],
)
def test_workload_origin_reads_the_spec_first(raw: dict[str, Any], origin: str | None) -> None:
    assert workload_origin(raw) == origin


def _axes_only(expression: str, axes: dict[str, int]) -> bool | None:
    """The value of a constraint over axes alone (``len_indptr == batch_size + 1``), None when it names more."""
    import ast

    tree = ast.parse(expression, mode="eval")
    allowed = (ast.Expression, ast.Compare, ast.BinOp, ast.Name, ast.Constant, ast.Load, ast.operator, ast.cmpop)
    if not all(isinstance(node, allowed) for node in ast.walk(tree)):
        return None
    if not all(node.id in axes for node in ast.walk(tree) if isinstance(node, ast.Name)):
        return None
    return bool(eval(compile(tree, "<constraint>", "eval"), {"__builtins__": {}}, dict(axes)))


def test_every_catalogue_workload_satisfies_its_axes_constraints() -> None:
    """The suite rule (and the shipped axes) against each definition's own constraints over axes."""
    checked = 0
    for name, entry in _bundled_manifest()["definitions"].items():
        if entry["status"] != "imported":
            continue
        spec = _bundled_spec(name, entry["family"])
        consts = {axis: value.value for axis, value in spec.axes.items() if value.type == "const"}
        path = REPO_ROOT / "definitions" / entry["family"] / name / "workloads.jsonl"
        for line in path.read_text().splitlines():
            axes = {**consts, **json.loads(line)["spec"]["axes"]}
            for constraint in spec.constraints or ():
                verdict = _axes_only(constraint, axes)
                if verdict is not None:
                    assert verdict, (name, json.loads(line)["metadata"]["name"], constraint, axes)
                    checked += 1
    assert checked > 400  # 463 at ecafa9c2
