"""kictl.importers.flashinfer_bench on the hand-made datasets of tests/assets/importers/."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kictl import canon
from kictl.errors import RegistryError, UsageError
from kictl.importers.flashinfer_bench import (
    COMPARABILITY_FAMILY,
    COMPARATOR,
    family_for_op_type,
    import_flashinfer_bench,
    read_dataset,
)
from kictl.importers.flashinfer_bench import traces as traces_module
from kictl.records import KINDS, StoredRecord
from kictl.store.registry import Registry
from kictl.validate import validate_registry
from tests.importers.conftest import CopyDataset, asset_dataset, tree_bytes

GEMM_W16 = "3d6c2b1a-0e9f-4a8b-b7c6-d5e4f3a2b133"
GEMM_W1 = "7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c44"
GQA_PRESENT = "5b0c8d0e-1f7a-4c51-9a43-0d2f3b9e7a11"
GQA_ABSENT = "9e3f1a52-77c4-4d0b-8f1e-6a5b2c4d8e22"
#: zone-less source timestamps read as UTC, cut (not rounded) to milliseconds
LEGACY_OBSERVED = {
    "2025-07-22T12:54:53.121350": "2025-07-22T12:54:53.121Z",
    "2025-07-22T12:55:01.500000": "2025-07-22T12:55:01.500Z",
    "2025-07-22T12:55:09.000001": "2025-07-22T12:55:09.000Z",
    "2025-07-22T12:55:17.999999": "2025-07-22T12:55:17.999Z",
    "2025-07-22T12:55:30": "2025-07-22T12:55:30.000Z",
}


def _records(registry: Registry, kind: str) -> list[StoredRecord]:
    return list(registry.iter_records([kind]))


def _by_name(registry: Registry, kind: str) -> dict[str, StoredRecord]:
    return {record.name: record for record in _records(registry, kind)}


def _spec(record: StoredRecord) -> dict[str, Any]:
    spec: dict[str, Any] = record.raw["spec"]
    return spec


def _source_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --------------------------------------------------------------------------- families


@pytest.mark.parametrize(
    ("op_type", "name", "family"),
    [
        ("gqa_paged", "gqa_paged_decode_h32_kv8_d128_ps1", "gqa-paged-attention"),
        ("gqa_ragged", "gqa_ragged_prefill_causal_h32_kv8_d128", "gqa-ragged-attention"),
        ("mla_paged", "mla_paged_decode_h16_ckv512_kpe64_ps1", "mla-paged-attention"),
        ("gemm", "gemm_n4096_k4096", "gemm"),
        ("rmsnorm", "fused_add_rmsnorm_h4096", "rmsnorm"),
        ("gqa", "gqa_paged_decode_h32_kv8_d128_ps1", "gqa-paged-attention"),  # the 2025 shape's coarse type
        ("gqa", "gqa_something_else", "gqa"),
        ("moe_fp8_block_scale", "moe_fp8_block_scale_ds_routing", "moe-fp8-block-scale"),
    ],
)
def test_family_for_op_type(op_type: str, name: str, family: str) -> None:
    assert family_for_op_type(op_type, name) == family


# --------------------------------------------------------------------------- today's schema


def test_current_schema_counts_and_validates(empty_registry: Registry) -> None:
    report = import_flashinfer_bench(empty_registry, asset_dataset("current_schema"))
    counts = report.counts()
    assert {kind: counts[kind]["new"] for kind in KINDS} == {
        "Definition": 2,
        "Workload": 4,
        "Implementation": 2,
        "BenchmarkProtocol": 1,
        "ExecutionEnvironment": 1,
        "BenchmarkRun": 5,
    }
    assert report.ok, report.skipped
    assert (report.blobs_new, report.blobs_present, len(report.missing_blobs)) == (1, 0, 1)
    validation = validate_registry(empty_registry)
    assert validation.ok, [str(problem) for problem in validation.problems]


def test_definition_keeps_family_tags_and_reference(empty_registry: Registry) -> None:
    dataset = asset_dataset("current_schema")
    import_flashinfer_bench(empty_registry, dataset)
    definitions = _by_name(empty_registry, "Definition")
    source = json.loads((dataset / "definitions/gqa_paged/gqa_paged_decode_h2_kv1_d4_ps1.json").read_text())
    spec = _spec(definitions["gqa_paged_decode_h2_kv1_d4_ps1"])
    assert spec["family"] == "gqa-paged-attention"
    assert spec["tags"] == source["tags"]
    assert spec["reference"] == source["reference"]
    assert spec["constraints"] == source["constraints"]
    assert spec["inputs"]["sm_scale"] == {"shape": None, "dtype": "float32"}
    assert spec["axes"]["len_indptr"] == {"type": "var", "description": "Length of kv_indptr."}
    assert _spec(definitions["gemm_n8_k4"])["family"] == "gemm"


def test_present_blob_is_copied_by_digest(empty_registry: Registry) -> None:
    dataset = asset_dataset("current_schema")
    import_flashinfer_bench(empty_registry, dataset)
    blob = (dataset / "blob/workloads/gqa_paged/gqa_paged_decode_h2_kv1_d4_ps1/present.safetensors").read_bytes()
    digest = canon.bytes_digest(blob)
    assert empty_registry.read_blob(digest) == blob
    workload = _by_name(empty_registry, "Workload")[GQA_PRESENT]
    inputs = _spec(workload)["inputs"]
    assert inputs["kv_indptr"] == {"type": "blob", "digest": digest, "key": "kv_indptr"}
    assert inputs["kv_indices"] == {"type": "blob", "digest": digest, "key": "kv_indices"}
    assert inputs["sm_scale"] == {"type": "scalar", "value": 0.5}
    assert inputs["q"] == {"type": "random"}
    assert _spec(workload)["uuid"] == GQA_PRESENT


def test_missing_blob_is_kept_with_its_path_and_reported(empty_registry: Registry) -> None:
    report = import_flashinfer_bench(empty_registry, asset_dataset("current_schema"))
    path = "./blob/workloads/gqa_paged/gqa_paged_decode_h2_kv1_d4_ps1/absent.safetensors"
    workload = _by_name(empty_registry, "Workload")[GQA_ABSENT]
    assert _spec(workload)["inputs"]["kv_indices"] == {
        "type": "blob",
        "key": "kv_indices",
        "path": path,
        "missing": True,
    }
    [missing] = report.missing_blobs
    assert (missing.path, missing.inputs, missing.workloads) == (path, 2, (GQA_ABSENT,))
    assert any("1 safetensors file(s) named by 2 input(s)" in note for note in report.notes)


def test_blob_outside_the_dataset_is_never_read(
    empty_registry: Registry, copy_dataset: CopyDataset, tmp_path: Path
) -> None:
    dataset = copy_dataset("current_schema")
    outside = tmp_path / "outside.safetensors"
    outside.write_bytes(
        (dataset / "blob/workloads/gqa_paged/gqa_paged_decode_h2_kv1_d4_ps1/present.safetensors").read_bytes() + b" "
    )
    workloads = dataset / "workloads/gqa_paged/gqa_paged_decode_h2_kv1_d4_ps1.jsonl"
    text = workloads.read_text().replace(
        "./blob/workloads/gqa_paged/gqa_paged_decode_h2_kv1_d4_ps1/absent.safetensors", "../../outside.safetensors"
    )
    workloads.write_text(text)
    report = import_flashinfer_bench(empty_registry, dataset)
    assert [blob.path for blob in report.missing_blobs] == ["../../outside.safetensors"]
    assert not empty_registry.blob_path(canon.bytes_digest(outside.read_bytes())).exists()


def test_blob_without_the_named_tensor_skips_the_line(empty_registry: Registry, copy_dataset: CopyDataset) -> None:
    dataset = copy_dataset("current_schema")
    workloads = dataset / "workloads/gqa_paged/gqa_paged_decode_h2_kv1_d4_ps1.jsonl"
    lines = workloads.read_text().splitlines()
    lines[0] = lines[0].replace('"tensor_key": "kv_indices"', '"tensor_key": "page_table"')
    workloads.write_text("\n".join(lines) + "\n")
    report = import_flashinfer_bench(empty_registry, dataset)
    [skipped] = report.skipped
    assert (skipped.file, skipped.line, skipped.kind) == (
        "workloads/gqa_paged/gqa_paged_decode_h2_kv1_d4_ps1.jsonl",
        1,
        "Workload",
    )
    assert "has no tensor 'page_table' (it has kv_indices, kv_indptr)" in skipped.message
    assert GQA_PRESENT not in _by_name(empty_registry, "Workload")


def test_implementation_embeds_sources_and_dependencies(empty_registry: Registry) -> None:
    dataset = asset_dataset("current_schema")
    report = import_flashinfer_bench(empty_registry, dataset)
    implementations = _by_name(empty_registry, "Implementation")
    source = json.loads((dataset / "solutions/alice/gemm/gemm_n8_k4/triton_tiled.json").read_text())
    spec = _spec(implementations["triton_tiled"])
    content = source["sources"][0]["content"]
    assert spec["sources"] == [{"path": "main.py", "sha256": canon.sha256_hex(content.encode()), "content": content}]
    assert spec["runtime"] == "triton"
    assert spec["entryPoint"] == "main.py::run"
    assert spec["author"] == "alice"
    assert spec["dependencies"] == {"torch": "*", "triton": ">= 3.0"}
    assert spec["targetHardware"] == ["NVIDIA_H100", "NVIDIA_B200"]
    assert spec["definitionDigest"] == _by_name(empty_registry, "Definition")["gemm_n8_k4"].digest
    assert any("spec.destination_passing_style" in note for note in report.notes)


def test_protocol_and_environment(empty_registry: Registry) -> None:
    import_flashinfer_bench(empty_registry, asset_dataset("current_schema"))
    [protocol] = _records(empty_registry, "BenchmarkProtocol")
    assert _spec(protocol) == {
        "harness": {"name": "flashinfer-bench", "repository": "https://github.com/flashinfer-ai/flashinfer-bench"},
        "correctness": {"reference": "definition reference implementation", "comparator": COMPARATOR},
        "measurement": {"timer": "harness_reported", "primaryStatistic": "mean"},
        "comparability": {"family": COMPARABILITY_FAMILY},
    }
    [environment] = _records(empty_registry, "ExecutionEnvironment")
    assert _spec(environment) == {
        "hardware": {"vendor": "NVIDIA", "product": "H100 SXM", "architecture": "sm_90"},
        "software": {
            "framework": {"name": "pytorch", "version": "2.8.0+cu128"},
            "cudaToolkit": "12.8",
            "libraries": {"triton": "3.4.0"},
        },
    }


def test_runs_follow_the_issue_mapping(empty_registry: Registry) -> None:
    dataset = asset_dataset("current_schema")
    import_flashinfer_bench(empty_registry, dataset)
    workloads = _by_name(empty_registry, "Workload")
    implementations = _by_name(empty_registry, "Implementation")
    [protocol] = _records(empty_registry, "BenchmarkProtocol")
    [environment] = _records(empty_registry, "ExecutionEnvironment")
    definition = _by_name(empty_registry, "Definition")["gemm_n8_k4"]
    runs = {(_spec(run)["sourceNative"]["externalId"], _spec(run)["status"]): run for run in _records(
        empty_registry, "BenchmarkRun"
    )}  # fmt: skip
    sources = _source_lines(dataset / "traces/alice/gemm/gemm_n8_k4.jsonl")
    assert len(runs) == len(sources)
    for source in sources:
        uuid = source["workload"]["uuid"]
        evaluation = source["evaluation"]
        status = evaluation["status"].lower()
        spec = _spec(runs[(f"trace/{source['solution']}/{uuid}", status)])
        assert spec["definitionDigest"] == definition.digest
        assert spec["workloadDigest"] == workloads[uuid].digest
        assert spec["implementationDigest"] == implementations[source["solution"]].digest
        assert spec["protocolDigest"] == protocol.digest
        assert spec["environmentDigest"] == environment.digest
        assert spec["sourceNative"]["source"] == "flashinfer-bench"
        assert spec["sourceNative"]["benchmark"] == "gemm_n8_k4"
        performance = evaluation["performance"]
        if performance is None:
            assert "timing" not in spec
            assert "metrics" not in spec["sourceNative"]
        else:
            assert spec["timing"] == {
                "latencyNs": {"mean": round(performance["latency_ms"] * 1e6)},
                "primaryStatistic": "mean",
            }
            assert spec["sourceNative"]["metrics"] == performance
        correctness = evaluation["correctness"]
        if correctness is None:
            assert "correctness" not in spec
        else:
            assert spec["correctness"] == {
                "comparator": COMPARATOR,
                "maximumAbsoluteError": correctness["max_absolute_error"],
                "maximumRelativeError": correctness["max_relative_error"],
            }
    observed = sorted(_spec(run)["observedAt"] for run in runs.values())
    # "+02:00" is converted to UTC; microseconds are cut to milliseconds
    assert observed == [
        "2026-03-01T08:00:05.250Z",
        "2026-03-01T10:00:00.000Z",
        "2026-03-01T10:01:00.123Z",
        "2026-03-01T10:01:10.000Z",
        "2026-03-01T10:01:20.000Z",
    ]
    assert all("statusDetail" not in _spec(run) for run in runs.values())


# --------------------------------------------------------------------------- the 2025 shape


def test_legacy_definitions_are_imported_faithfully(empty_registry: Registry) -> None:
    dataset = asset_dataset("legacy_shape")
    report = import_flashinfer_bench(empty_registry, dataset)
    assert report.ok, report.skipped
    definitions = _by_name(empty_registry, "Definition")
    gqa = _spec(definitions["gqa_paged_decode_h2_kv1_d4_ps1"])
    source = json.loads((dataset / "definitions/gqa/gqa_paged_decode_h2_kv1_d4_ps1.json").read_text())
    assert gqa["family"] == "gqa-paged-attention"
    assert gqa["inputs"]["sm_scale"] == {"shape": [], "dtype": "float32"}
    assert gqa["inputs"]["last_page_len"] == {"shape": ["batch_size"], "dtype": "int32"}
    assert gqa["reference"] == source["reference"]
    assert 'return {"output": output, "lse": lse}' in gqa["reference"]
    assert _spec(definitions["gemm_n_8_k_4"])["family"] == "gemm"


def test_legacy_traces_match_workload_lines_by_axes(empty_registry: Registry) -> None:
    dataset = asset_dataset("legacy_shape")
    report = import_flashinfer_bench(empty_registry, dataset)
    workloads = _by_name(empty_registry, "Workload")
    assert set(workloads) == {"0f1e2d3c-4b5a-4968-8776-a5b4c3d2e155", "1a2b3c4d-5e6f-4a0b-9c1d-2e3f4a5b6c66", "M3"}
    by_m = {_spec(record)["axes"]["M"]: record for record in workloads.values()}
    assert "uuid" not in _spec(by_m[3])
    runs = _records(empty_registry, "BenchmarkRun")
    implementations = {record.digest: record.name for record in _records(empty_registry, "Implementation")}
    seen = set()
    for source in _source_lines(dataset / "traces/gemm/gemm_n_8_k_4.jsonl"):
        m = source["workload"]["axes"]["M"]
        external = f"trace/{source['solution']}/{by_m[m].name}"
        [run] = [run for run in runs if _spec(run)["sourceNative"]["externalId"] == external]
        spec = _spec(run)
        assert spec["workloadDigest"] == by_m[m].digest
        label = source["solution"].removeprefix("gemm_n_8_k_4_")
        assert implementations[spec["implementationDigest"]] == f"{label}_gemm_n_8_k_4"
        stamp = source["evaluation"]["timestamp"]
        assert spec["statusDetail"] == f"observedAt: the source's timestamp {stamp} has no time zone; read as UTC"
        assert spec["observedAt"] == LEGACY_OBSERVED[stamp]
        seen.add(run.digest)
    assert len(seen) == 5
    assert any("1 trace line(s) without a workload uuid match no workload line" in note for note in report.notes)
    assert "traces name solution torch_gemm_n_8_k_4 as gemm_n_8_k_4_torch (2025 shape); matched" in report.notes


def test_legacy_environment_from_device(empty_registry: Registry) -> None:
    import_flashinfer_bench(empty_registry, asset_dataset("legacy_shape"))
    [environment] = _records(empty_registry, "ExecutionEnvironment")
    assert _spec(environment) == {
        "hardware": {"vendor": "NVIDIA", "product": "B200", "architecture": "sm_100"},
        "software": {
            "framework": {"name": "pytorch", "version": "2.7.1+cu128"},
            "cudaToolkit": "12.8",
            "libraries": {"triton": "3.3.1"},
        },
    }


def test_ambiguous_legacy_trace_is_skipped(empty_registry: Registry, copy_dataset: CopyDataset) -> None:
    dataset = copy_dataset("legacy_shape")
    workloads = dataset / "traces/workloads/gemm/gemm_n_8_k_4.workload.jsonl"
    twin = _source_lines(workloads)[0]
    twin["workload"]["uuid"] = "99999999-0000-4000-8000-000000000032"
    workloads.write_text(workloads.read_text() + json.dumps(twin) + "\n")
    report = import_flashinfer_bench(empty_registry, dataset)
    assert [(item.file, item.line) for item in report.skipped] == [
        ("traces/gemm/gemm_n_8_k_4.jsonl", 1),
        ("traces/gemm/gemm_n_8_k_4.jsonl", 2),
    ]
    assert "has no uuid and matches 2 workloads of gemm_n_8_k_4" in report.skipped[0].message


# --------------------------------------------------------------------------- NaN and Infinity


def test_non_finite_values_become_null_with_a_reason(empty_registry: Registry) -> None:
    report = import_flashinfer_bench(empty_registry, asset_dataset("non_finite_metrics"))
    assert report.ok, report.skipped
    runs = {_spec(run)["sourceNative"]["externalId"].rsplit("-", 1)[1]: _spec(run) for run in _records(
        empty_registry, "BenchmarkRun"
    )}  # fmt: skip
    for key in ("000000000001", "000000000002"):  # "NaN"/"Infinity" strings, then bare literals
        spec = runs[key]
        assert spec["status"] == "incorrect_numerical"
        assert spec["correctness"] == {
            "comparator": COMPARATOR,
            "maximumAbsoluteError": None,
            "maximumRelativeError": None,
        }
        assert spec["statusDetail"] == (
            "maximumAbsoluteError is null: the source reports max_absolute_error Infinity; "
            "maximumRelativeError is null: the source reports max_relative_error NaN"
        )
    passed = runs["000000000003"]
    assert passed["status"] == "passed"
    assert passed["timing"]["latencyNs"] == {"mean": 4200}
    assert passed["sourceNative"]["metrics"] == {
        "latency_ms": 0.0042,
        "reference_latency_ms": None,
        "speedup_factor": None,
    }
    assert "reference_latency_ms is null: the source reports NaN" in passed["statusDetail"]
    assert any(note.startswith("3 run(s) hold null") for note in report.notes)
    validation = validate_registry(empty_registry)
    assert validation.ok, [str(problem) for problem in validation.problems]


# --------------------------------------------------------------------------- malformed lines


def test_malformed_items_are_reported_and_skipped(empty_registry: Registry) -> None:
    report = import_flashinfer_bench(empty_registry, asset_dataset("malformed_lines"))
    workloads_file = "workloads/gemm/gemm_n8_k4.jsonl"
    traces_file = "traces/carol/gemm/gemm_n8_k4.jsonl"
    found = [(item.file, item.line, item.kind) for item in report.skipped]
    assert found == [
        ("definitions/gemm/gemm_float128.json", None, "Definition"),
        ("solutions/carol/gemm/gemm_n8_k4/entry_missing.json", None, "Implementation"),
        *[(workloads_file, line, "Workload") for line in (2, 3, 4, 5, 6, 9)],
        *[(traces_file, line, "BenchmarkRun") for line in (2, 3, 4, 5, 6, 7, 8, 9, 10)],
    ]
    text = [str(item) for item in report.skipped]
    assert text[2] == f"{workloads_file}:2: not JSON: Expecting ',' delimiter (column 125)"
    assert text[3] == f'{workloads_file}:3: duplicate key "axes"'
    assert text[4] == f"{workloads_file}:4: $.workload.axes.M: expected an integer, found a string"
    assert text[5] == f"{workloads_file}:5: $.workload.inputs.A.type: unknown input type 'url'"
    assert text[6] == f"{workloads_file}:6: definition gemm_unknown is not in the dataset (or was skipped)"
    assert text[7] == f"{workloads_file}:9: $.workload.axes: axes Z are not axes of gemm_n8_k4"
    assert text[8].startswith(f"{traces_file}:2: $.evaluation.status: unknown status 'EXPLODED'")
    assert text[9] == f"{traces_file}:3: $.solution: solution ghost_solution is not in the dataset (or was skipped)"
    assert text[10] == f"{traces_file}:4: $.evaluation: PASSED without a finite performance.latency_ms"
    assert text[11] == f"{traces_file}:5: $.evaluation.timestamp: not an ISO 8601 date and time: 'yesterday'"
    assert text[13] == f"{traces_file}:7: $.solution: an evaluation names no solution"
    assert text[14] == f"{traces_file}:8: not JSON: Expecting value (column 1)"
    assert text[0].startswith("definitions/gemm/gemm_float128.json: Definition record: $.spec.inputs.A.dtype: ")
    assert "entry point file 'kernel.py' is not among the sources" in text[1]
    # the rest is imported
    assert set(_by_name(empty_registry, "Workload")) == {
        "d00d0000-0000-4000-8000-000000000004",
        "d00d0000-0000-4000-8000-000000000064",
    }
    assert len(_records(empty_registry, "BenchmarkRun")) == 1
    assert report.counts()["BenchmarkRun"] == {"new": 1, "present": 0, "skipped": 9}
    assert not report.ok


def test_definition_defined_twice_with_other_content(empty_registry: Registry, copy_dataset: CopyDataset) -> None:
    dataset = copy_dataset("current_schema")
    source = json.loads((dataset / "definitions/gemm/gemm_n8_k4.json").read_text())
    source["description"] = "another text"
    (dataset / "definitions/gemm/zz_again.json").write_text(json.dumps(source))
    report = import_flashinfer_bench(empty_registry, dataset)
    [skipped] = report.skipped
    assert str(skipped) == (
        "definitions/gemm/zz_again.json: definition gemm_n8_k4 is already defined by "
        "definitions/gemm/gemm_n8_k4.json with other content"
    )


def test_not_a_dataset(empty_registry: Registry, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such folder"):
        import_flashinfer_bench(empty_registry, tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="is not a FlashInfer Trace dataset"):
        read_dataset(tmp_path / "empty")


# --------------------------------------------------------------------------- idempotency, dry run, atomicity


def test_importing_twice_adds_nothing(empty_registry: Registry) -> None:
    dataset = asset_dataset("current_schema")
    first = import_flashinfer_bench(empty_registry, dataset)
    before = tree_bytes(empty_registry.root)
    second = import_flashinfer_bench(empty_registry, dataset)
    assert tree_bytes(empty_registry.root) == before
    assert all(not outcome.new for outcome in second.outcomes)
    assert (second.blobs_new, second.blobs_present) == (0, 1)
    assert [o.record.digest for o in first.outcomes] == [o.record.digest for o in second.outcomes]


@pytest.mark.parametrize("name", ["current_schema", "legacy_shape", "non_finite_metrics", "malformed_lines"])
def test_digests_are_stable_across_registries(name: str, tmp_path: Path) -> None:
    from tests.importers.conftest import new_registry

    first = import_flashinfer_bench(new_registry(tmp_path / "a"), asset_dataset(name))
    second = import_flashinfer_bench(new_registry(tmp_path / "b"), asset_dataset(name))
    assert [o.record.digest for o in first.outcomes] == [o.record.digest for o in second.outcomes]
    assert tree_bytes(tmp_path / "a" / "registry") == tree_bytes(tmp_path / "b" / "registry")


def test_dry_run_writes_nothing(empty_registry: Registry) -> None:
    before = tree_bytes(empty_registry.root)
    report = import_flashinfer_bench(empty_registry, asset_dataset("current_schema"), dry_run=True)
    assert tree_bytes(empty_registry.root) == before
    assert report.dry_run
    assert len(report.outcomes) == 15
    assert all(outcome.new for outcome in report.outcomes)
    assert report.blobs_new == 1


def test_dry_run_after_import_says_present(empty_registry: Registry) -> None:
    import_flashinfer_bench(empty_registry, asset_dataset("legacy_shape"))
    report = import_flashinfer_bench(empty_registry, asset_dataset("legacy_shape"), dry_run=True)
    assert not any(outcome.new for outcome in report.outcomes)


def test_a_failed_write_leaves_the_registry_as_it_was(empty_registry: Registry) -> None:
    dataset = read_dataset(asset_dataset("current_schema"))
    [run] = [record for record in dataset.records.values() if record.kind == "BenchmarkRun"][-1:]
    blocked = empty_registry.record_path(run.kind, run.digest)
    blocked.parent.mkdir(parents=True)
    blocked.write_bytes(b"{}\n")
    before = tree_bytes(empty_registry.root)
    with pytest.raises(RegistryError, match="already published with other bytes"):
        import_flashinfer_bench(empty_registry, asset_dataset("current_schema"))
    assert tree_bytes(empty_registry.root) == before


def test_trace_describing_a_workload_differently_keeps_both(
    empty_registry: Registry, copy_dataset: CopyDataset
) -> None:
    dataset = copy_dataset("current_schema")
    traces = dataset / "traces/alice/gemm/gemm_n8_k4.jsonl"
    lines = traces.read_text().splitlines()
    lines[0] = lines[0].replace('"axes": {"M": 16}', '"axes": {"M": 17}')
    traces.write_text("\n".join(lines) + "\n")
    report = import_flashinfer_bench(empty_registry, dataset)
    assert f"workload {GEMM_W16} of gemm_n8_k4 is described differently by two lines; both are kept" in report.notes
    twins = [record for record in _records(empty_registry, "Workload") if record.name == GEMM_W16]
    assert sorted(_spec(record)["axes"]["M"] for record in twins) == [16, 17]
    run = next(
        r
        for r in _records(empty_registry, "BenchmarkRun")
        if _spec(r)["sourceNative"]["metrics"]["latency_ms"] == 0.0204
    )
    assert _spec(run)["workloadDigest"] == next(r.digest for r in twins if _spec(r)["axes"]["M"] == 17)


def test_a_skipped_trace_line_stores_none_of_its_records(empty_registry: Registry, copy_dataset: CopyDataset) -> None:
    dataset = copy_dataset("current_schema")
    traces = dataset / "traces/alice/gemm/gemm_n8_k4.jsonl"
    line = _source_lines(traces)[0]
    line["workload"]["uuid"] = "0badc0de-0000-4000-8000-000000000099"
    line["workload"]["axes"]["M"] = 99
    line["evaluation"]["environment"]["hardware"] = "NVIDIA_L40S"
    line["evaluation"]["status"] = "EXPLODED"
    traces.write_text(traces.read_text() + json.dumps(line) + "\n")
    report = import_flashinfer_bench(empty_registry, dataset)
    assert [(item.line, item.kind) for item in report.skipped] == [(6, "BenchmarkRun")]
    assert "0badc0de-0000-4000-8000-000000000099" not in _by_name(empty_registry, "Workload")
    products = [_spec(record)["hardware"]["product"] for record in _records(empty_registry, "ExecutionEnvironment")]
    assert products == ["H100 SXM"]


def _append_line(path: Path, **changes: Any) -> None:
    """Append a copy of ``path``'s first line with ``changes`` made to its top-level members."""
    first = json.loads(path.read_text().splitlines()[0])
    with path.open("a") as handle:
        handle.write(json.dumps({**first, **changes}) + "\n")


def test_a_name_near_one_the_dataset_has_is_suggested(copy_dataset: CopyDataset) -> None:
    dataset = copy_dataset("current_schema")
    traces = dataset / "traces/alice/gemm/gemm_n8_k4.jsonl"
    _append_line(traces, definition="gemm_n8_k5")  # a typo of gemm_n8_k4
    _append_line(traces, definition="rmsnorm_h4096")  # like nothing in the dataset
    _append_line(traces, solution="torch_linaer")  # a typo of torch_linear
    _append_line(traces, solution="cutlass_kernel")
    found = [item.message for item in read_dataset(dataset).skipped]
    assert found == [
        "definition gemm_n8_k5 is not in the dataset (or was skipped); did you mean gemm_n8_k4?",
        "definition rmsnorm_h4096 is not in the dataset (or was skipped)",
        "$.solution: solution torch_linaer is not in the dataset (or was skipped); did you mean torch_linear?",
        "$.solution: solution cutlass_kernel is not in the dataset (or was skipped)",
    ]


def test_definitions_that_arrive_without_workloads_are_named(
    empty_registry: Registry, copy_dataset: CopyDataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert read_dataset(asset_dataset("current_schema")).definitions_without_workloads == []
    assert not any("arrived with no workload" in note for note in read_dataset(asset_dataset("current_schema")).notes)
    dataset = copy_dataset("current_schema")
    (dataset / "workloads/gqa_paged/gqa_paged_decode_h2_kv1_d4_ps1.jsonl").unlink()
    report = import_flashinfer_bench(empty_registry, dataset)
    assert report.ok, report.skipped
    assert report.definitions_without_workloads == ["gqa_paged_decode_h2_kv1_d4_ps1"]
    assert report.to_json()["definitionsWithoutWorkloads"] == ["gqa_paged_decode_h2_kv1_d4_ps1"]
    assert (
        "1 of 2 definition(s) arrived with no workload, so nothing can be benched on them until workloads are "
        "added: gqa_paged_decode_h2_kv1_d4_ps1"
    ) in report.notes
    (dataset / "workloads/gemm/gemm_n8_k4.jsonl").unlink()
    shutil.rmtree(dataset / "traces")  # a trace line brings its workload along
    monkeypatch.setattr(traces_module, "BARE_DEFINITIONS_SHOWN", 1)
    bare = read_dataset(dataset)
    assert bare.definitions_without_workloads == ["gemm_n8_k4", "gqa_paged_decode_h2_kv1_d4_ps1"]
    [note] = [note for note in bare.notes if "arrived with no workload" in note]
    assert note.startswith("2 of 2 definition(s)")
    assert note.endswith(": gemm_n8_k4 and 1 more (--json lists them all under definitionsWithoutWorkloads)")
