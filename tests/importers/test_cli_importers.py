"""``kictl import flashinfer-bench`` through the CLI: output, --json, --dry-run and every exit code."""

from __future__ import annotations

import json

from kictl.importers.flashinfer_bench import read_dataset
from kictl.store.registry import Registry
from tests.conftest import RunCli
from tests.importers.conftest import asset_dataset, tree_bytes


def test_import_prints_records_and_a_summary(cli: RunCli, empty_registry: Registry) -> None:
    result = cli("import", "flashinfer-bench", asset_dataset("current_schema"), "--registry", empty_registry.root)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 15
    assert all(line.startswith("new      ") for line in lines)
    assert all(len(line) <= 100 for line in lines)
    assert "new      Definition            sha256:" in lines[0]
    assert lines[0].endswith("  gemm_n8_k4")
    stderr = result.stderr.splitlines()
    assert "kind                      new  present  skipped" in stderr
    assert "BenchmarkRun                5        0        0" in stderr
    assert "blobs                       1        0  1 missing" in stderr
    assert any(line.startswith("missing blob: ./blob/workloads/gqa_paged/") for line in stderr)
    assert "error:" not in result.stderr


def test_second_import_says_present(cli: RunCli, empty_registry: Registry) -> None:
    args = ("import", "flashinfer-bench", asset_dataset("legacy_shape"), "--registry", empty_registry.root)
    assert cli(*args).exit_code == 0
    result = cli(*args)
    assert result.exit_code == 0, result.output
    assert all(line.startswith("present  ") for line in result.stdout.splitlines())
    assert "BenchmarkRun                0        5        0" in result.stderr


def test_json_document(cli: RunCli, empty_registry: Registry) -> None:
    dataset = asset_dataset("current_schema")
    result = cli("import", "flashinfer-bench", dataset, "--registry", empty_registry.root, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["dryRun"] is False
    assert document["counts"]["Workload"] == {"new": 4, "present": 0, "skipped": 0}
    assert document["blobs"] == {"new": 1, "present": 0, "missing": 1}
    assert document["skipped"] == []
    assert document["missingBlobs"][0]["workloads"] == ["9e3f1a52-77c4-4d0b-8f1e-6a5b2c4d8e22"]
    digests = [row["digest"] for row in document["records"]]
    assert sorted(digests) == sorted(read_dataset(dataset).records)
    for row in document["records"]:
        assert empty_registry.record_path(row["kind"], row["digest"]).is_file()


def test_dry_run_writes_nothing(cli: RunCli, empty_registry: Registry) -> None:
    before = tree_bytes(empty_registry.root)
    result = cli(
        "import", "flashinfer-bench", asset_dataset("current_schema"), "--registry", empty_registry.root,
        "--dry-run", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert tree_bytes(empty_registry.root) == before
    document = json.loads(result.stdout)
    assert document["dryRun"] is True
    assert all(row["new"] for row in document["records"])
    assert result.stderr.startswith("dry run, nothing written: ")


def test_exit_1_when_something_was_skipped(cli: RunCli, empty_registry: Registry) -> None:
    result = cli("import", "flashinfer-bench", asset_dataset("malformed_lines"), "--registry", empty_registry.root)
    assert result.exit_code == 1, result.output
    assert "skipped: workloads/gemm/gemm_n8_k4.jsonl:2: not JSON: Expecting ',' delimiter (column 125)" in (
        result.stderr
    )
    assert "skipped: traces/carol/gemm/gemm_n8_k4.jsonl:8: not JSON: Expecting value (column 1)" in result.stderr
    assert result.stderr.rstrip().endswith("error: 17 item(s) skipped; the rest was imported")
    assert len(result.stdout.splitlines()) == 7  # what could be imported was


def test_exit_1_with_json_still_prints_the_document(cli: RunCli, empty_registry: Registry) -> None:
    result = cli(
        "import", "flashinfer-bench", asset_dataset("malformed_lines"), "--registry", empty_registry.root, "--json"
    )
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert len(document["skipped"]) == 17
    assert document["skipped"][0] == {
        "file": "definitions/gemm/gemm_float128.json",
        "line": None,
        "kind": "Definition",
        "message": document["skipped"][0]["message"],
    }
    assert document["counts"]["Workload"] == {"new": 2, "present": 0, "skipped": 6}


def test_exit_2_when_the_path_is_no_dataset(cli: RunCli, empty_registry: Registry) -> None:
    result = cli("import", "flashinfer-bench", empty_registry.root / "registry", "--registry", empty_registry.root)
    assert result.exit_code == 2, result.output
    assert "is not a FlashInfer Trace dataset" in result.stderr
    result = cli("import", "flashinfer-bench", "no/such/folder", "--registry", empty_registry.root)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: no/such/folder: no such folder")


def test_exit_4_when_the_registry_cannot_take_the_records(cli: RunCli, empty_registry: Registry) -> None:
    dataset = read_dataset(asset_dataset("legacy_shape"))
    protocol = next(record for record in dataset.records.values() if record.kind == "BenchmarkProtocol")
    blocked = empty_registry.record_path(protocol.kind, protocol.digest)
    blocked.parent.mkdir(parents=True)
    blocked.write_bytes(b"not this record\n")
    before = tree_bytes(empty_registry.root)
    result = cli("import", "flashinfer-bench", asset_dataset("legacy_shape"), "--registry", empty_registry.root)
    assert result.exit_code == 4, result.output
    assert "already published with other bytes" in result.stderr
    assert tree_bytes(empty_registry.root) == before


def test_exit_4_without_a_registry(cli: RunCli) -> None:
    result = cli("import", "flashinfer-bench", asset_dataset("legacy_shape"))
    assert result.exit_code == 4, result.output
    assert "no registry found" in result.stderr
