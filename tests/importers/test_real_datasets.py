"""Importing the real FlashInfer Trace datasets of ../shared/data (skipped when absent).

``flashinfer-trace-legacy`` is the 2025 shape with traces measured on a B200;
``flashinfer-trace`` is today's schema (definitions and workloads only, its
safetensors blobs not included).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from kictl.importers.flashinfer_bench import import_flashinfer_bench
from kictl.records import KINDS, StoredRecord
from kictl.store.registry import Registry
from tests.conftest import RunCli
from tests.importers.conftest import Imported, new_registry


def _counts(imported: Imported) -> dict[str, int]:
    return {kind: row["new"] for kind, row in imported.report.counts().items()}


def _spec(record: StoredRecord) -> dict[str, Any]:
    spec: dict[str, Any] = record.raw["spec"]
    return spec


def _source_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _every_reference_resolves(registry: Registry) -> int:
    checked = 0
    for record in registry.iter_records():
        for member, digest, kind in record.references():
            target = registry.load(digest)
            assert target.kind == kind, f"{record.digest} {member} names a {target.kind}"
            checked += 1
    return checked


# --------------------------------------------------------------------------- the 2025 shape


def test_legacy_record_counts(legacy_imported: Imported) -> None:
    assert legacy_imported.report.ok, [str(item) for item in legacy_imported.report.skipped]
    assert _counts(legacy_imported) == {
        "Definition": 2,
        "Workload": 43,
        "Implementation": 3,
        "BenchmarkProtocol": 1,
        "ExecutionEnvironment": 1,
        "BenchmarkRun": 129,
    }
    trace_lines = _source_lines(legacy_imported.dataset / "traces/gemm/gemm_n_4096_k_4096.jsonl")
    assert len(trace_lines) == 129
    [environment] = legacy_imported.registry.iter_records(["ExecutionEnvironment"])
    assert _spec(environment)["hardware"]["product"] == "B200"
    assert _spec(environment)["software"]["cudaToolkit"] == "12.8"


def test_legacy_runs_reference_existing_records(legacy_imported: Imported) -> None:
    registry = legacy_imported.registry
    # a definition per workload and implementation, five references per run
    assert _every_reference_resolves(registry) == 43 + 3 + 129 * 5
    workloads = {record.digest for record in registry.iter_records(["Workload"])}
    used = {_spec(run)["workloadDigest"] for run in registry.iter_records(["BenchmarkRun"])}
    assert used == workloads  # every trace line matched one of the 43 workload lines


def test_legacy_import_validates(legacy_imported: Imported, cli: RunCli) -> None:
    result = cli("validate", "--registry", legacy_imported.registry.root, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["counts"]["BenchmarkRun"] == 129


def test_legacy_gemm_runs_order_as_the_source_latencies(legacy_imported: Imported) -> None:
    """Per workload, sorting the imported runs by latencyNs.mean gives the source's latency_ms order."""
    registry = legacy_imported.registry
    workload_lines = _source_lines(legacy_imported.dataset / "traces/workloads/gemm/gemm_n_4096_k_4096.workload.jsonl")
    uuid_by_m = {line["workload"]["axes"]["M"]: line["workload"]["uuid"] for line in workload_lines}
    expected: dict[str, list[tuple[str, float]]] = {}
    for line in _source_lines(legacy_imported.dataset / "traces/gemm/gemm_n_4096_k_4096.jsonl"):
        uuid = uuid_by_m[line["workload"]["axes"]["M"]]
        expected.setdefault(uuid, []).append((line["solution"], line["evaluation"]["performance"]["latency_ms"]))
    runs: dict[str, list[StoredRecord]] = {}
    for run in registry.iter_records(["BenchmarkRun"]):
        runs.setdefault(run.model.metadata.name.split("/")[1], []).append(run)
    assert set(runs) == set(expected)
    orders_differ = 0
    for uuid, source in expected.items():
        source_order = [solution for solution, _ in sorted(source, key=lambda item: item[1])]
        imported = sorted(runs[uuid], key=lambda run: _spec(run)["timing"]["latencyNs"]["mean"])
        imported_order = [_spec(run)["sourceNative"]["externalId"].split("/")[1] for run in imported]
        assert imported_order == source_order, uuid
        orders_differ += source_order != sorted(source_order)
    assert orders_differ > 0  # the data does rank solutions differently across workloads


def test_legacy_digests_are_stable(legacy_imported: Imported, tmp_path: Path) -> None:
    again = import_flashinfer_bench(legacy_imported.registry, legacy_imported.dataset)
    assert not any(outcome.new for outcome in again.outcomes)
    fresh = import_flashinfer_bench(new_registry(tmp_path / "fresh"), legacy_imported.dataset)
    first = [outcome.record.digest for outcome in legacy_imported.report.outcomes]
    assert [outcome.record.digest for outcome in fresh.outcomes] == first
    assert all(outcome.new for outcome in fresh.outcomes)


# --------------------------------------------------------------------------- today's schema


def test_current_record_counts(current_imported: Imported) -> None:
    report = current_imported.report
    assert report.ok, [str(item) for item in report.skipped]
    assert _counts(current_imported) == {
        "Definition": 84,
        "Workload": 523,
        "Implementation": 0,
        "BenchmarkProtocol": 0,
        "ExecutionEnvironment": 0,
        "BenchmarkRun": 0,
    }
    families = Counter(_spec(record)["family"] for record in current_imported.registry.iter_records(["Definition"]))
    assert families == {"gqa-paged-attention": 37, "gemm": 32, "rmsnorm": 15}


def test_current_missing_blobs_are_kept_and_reported(current_imported: Imported) -> None:
    report = current_imported.report
    assert (report.blobs_new, len(report.missing_blobs)) == (0, 167)
    assert sum(blob.inputs for blob in report.missing_blobs) == 405
    missing_inputs = 0
    paths = set()
    for record in current_imported.registry.iter_records(["Workload"]):
        spec = _spec(record)
        assert spec["uuid"] == record.name
        for source in spec["inputs"].values():
            if source["type"] == "blob":
                assert source["missing"] is True
                paths.add(source["path"])
                missing_inputs += 1
    assert missing_inputs == 405
    assert paths == {blob.path for blob in report.missing_blobs}


def test_current_import_validates_and_references_resolve(current_imported: Imported, cli: RunCli) -> None:
    assert _every_reference_resolves(current_imported.registry) == 523
    result = cli("validate", "--registry", current_imported.registry.root)
    assert result.exit_code == 0, result.output
    assert "84 Definition, 523 Workload" in result.stderr


def test_current_digests_are_stable(current_imported: Imported, tmp_path: Path) -> None:
    fresh = import_flashinfer_bench(new_registry(tmp_path / "fresh"), current_imported.dataset)
    assert [outcome.record.digest for outcome in fresh.outcomes] == [
        outcome.record.digest for outcome in current_imported.report.outcomes
    ]
    assert dict.fromkeys(KINDS, 0) == {
        kind: row["new"]
        for kind, row in import_flashinfer_bench(current_imported.registry, current_imported.dataset).counts().items()
    }
