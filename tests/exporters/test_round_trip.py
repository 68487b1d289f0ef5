"""Round trips between the registry and FlashInfer Trace, both ways (docs/exporting.md).

* registry -> export -> ``kictl import flashinfer-bench``: the same definitions,
  implementations and workloads, with exactly the differences the formats force;
* FlashInfer Trace (the real data in ../shared/data) -> import -> export ->
  import: digest for digest, and FlashInfer-Bench's loader and apply table
  read the re-export.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kictl import blobs, canon, families
from kictl.exporters.flashinfer_trace import export_flashinfer_trace
from kictl.importers.flashinfer_bench import import_flashinfer_bench
from kictl.importers.flashinfer_bench.sources import SOURCES_FILE
from kictl.index.query import QueryIndex
from kictl.rank import workload_leaderboard
from kictl.records import (
    BenchmarkProtocolSpec,
    BenchmarkRunSpec,
    Comparability,
    CorrectnessProtocol,
    DefinitionSpec,
    ExecutionEnvironmentSpec,
    Hardware,
    Harness,
    ImplementationSpec,
    LatencyNs,
    Measurement,
    RunCorrectness,
    Software,
    SourceFile,
    StoredRecord,
    Timing,
    WorkloadSpec,
    new_record,
)
from kictl.scaffold import create_registry
from kictl.store.registry import Registry
from tests.conftest import copy_bundled, shared_data


def _records(registry: Registry, kind: str) -> dict[str, StoredRecord]:
    return {record.digest: record for record in registry.iter_records([kind])}


def _fresh(path: Path) -> Registry:
    create_registry(path)
    return Registry(path)


@pytest.fixture
def unadvised(tmp_path: Path) -> Registry:
    """The bundled registry and its runs without the harness advisories, which mark every bundled run (the export
    leaves those out: this file is about the format, tests/exporters/test_flashinfer_trace.py about the selection)."""
    return copy_bundled(tmp_path / "bundled", results=True, advisories=False)


def test_an_export_of_the_bundled_registry_imports_back_unchanged(unadvised: Registry, tmp_path: Path) -> None:
    """Issue 39: the export carries its records, so importing it back adds nothing, refuses nothing, same digests."""
    out = tmp_path / "export"
    report = export_flashinfer_trace(unadvised, out, gpu="H200", min_evidence="reported")
    assert report.exported
    assert (out / SOURCES_FILE).is_file()
    back = import_flashinfer_bench(unadvised, out)
    assert back.ok, back.skipped
    assert back.skipped == []
    assert [outcome.record.digest for outcome in back.outcomes if outcome.new] == []
    assert any(note.startswith(f"{SOURCES_FILE}: ") and "taken back verbatim" in note for note in back.notes)
    fresh = _fresh(tmp_path / "fresh")
    again = import_flashinfer_bench(fresh, out)
    assert again.ok, again.skipped
    exported = {item.run for item in report.exported}
    assert exported <= {outcome.record.digest for outcome in again.outcomes}
    for outcome in again.outcomes:  # every record is the bundled registry's own, byte for byte
        assert unadvised.load(outcome.record.digest).raw == outcome.record.raw


def test_an_edited_export_is_imported_as_flashinfer_data(unadvised: Registry, tmp_path: Path) -> None:
    """The records are taken back only while every document agrees with them: an edited solution sets them aside."""
    out = tmp_path / "export"
    export_flashinfer_trace(unadvised, out, gpu="H200", min_evidence="reported")
    solution = sorted((out / "solutions").rglob("*.json"))[0]
    document = json.loads(solution.read_text())
    document["sources"][0]["content"] += "\n# changed after the export\n"
    solution.write_text(json.dumps(document))
    fresh = _fresh(tmp_path / "fresh")
    back = import_flashinfer_bench(fresh, out)
    [note] = [note for note in back.notes if note.startswith(f"{SOURCES_FILE} set aside")]
    assert "its code differs from Implementation" in note
    changed = [r for r in _records(fresh, "Implementation").values() if r.name == document["name"]]
    assert changed
    assert all(r.raw["spec"]["sources"][0]["content"].endswith("# changed after the export\n") for r in changed)


def test_without_its_records_an_export_converts_with_the_documented_differences(
    unadvised: Registry, tmp_path: Path
) -> None:
    bundled_results = unadvised
    out = tmp_path / "export"
    report = export_flashinfer_trace(bundled_results, out, gpu="H200", min_evidence="reported")
    assert report.exported
    (out / SOURCES_FILE).unlink()  # FlashInfer Trace data alone, as a copy that kept only its four folders
    again = _fresh(tmp_path / "again")
    imported = import_flashinfer_bench(again, out)
    assert imported.ok, imported.skipped
    by_name = {kind: {r.name: r for r in _records(again, kind).values()} for kind in ("Definition", "Implementation")}
    workloads_back = {r.raw["spec"]["uuid"]: r for r in _records(again, "Workload").values()}
    for item in report.exported:
        original_run = bundled_results.load(item.run)
        spec = original_run.raw["spec"]
        # Definition: the same record, `determinism` included (a member FlashInfer-Bench's loader ignores)
        definition = bundled_results.load(spec["definitionDigest"])
        back = by_name["Definition"][definition.name]
        assert back.digest == definition.digest
        # Implementation: code, entry point, runtime and dependencies are the same; FlashInfer requires an
        # author and target hardware and has no project, license, revision or availability
        implementation = bundled_results.load(item.implementation_digest).raw["spec"]
        impl_back = by_name["Implementation"][implementation["name"]].raw["spec"]
        for member in ("name", "runtime", "entryPoint", "sources", "dependencies", "description"):
            assert impl_back.get(member) == implementation.get(member), member
        assert impl_back["author"] == implementation.get("author", implementation.get("project"))
        assert impl_back["targetHardware"] == implementation.get("targetHardware", ["H200"])
        # Workload: the uuid is the original's digest; axes are the same; random inputs lose their seed;
        # synthesised index tensors come back as blobs holding exactly what kictl bench synthesises
        workload = bundled_results.load(item.workload_digest)
        workload_back = workloads_back[canon.digest_hex(workload.digest)].raw["spec"]
        assert workload_back["axes"] == workload.raw["spec"]["axes"]
        definition_spec = definition.model.spec
        workload_spec = workload.model.spec
        assert isinstance(definition_spec, DefinitionSpec)
        assert isinstance(workload_spec, WorkloadSpec)
        made = families.structure(definition_spec, workload_spec)
        for name, source in workload.raw["spec"]["inputs"].items():
            returned = workload_back["inputs"][name]
            if source["type"] == "random":
                assert returned == {"type": "random"}
            elif source["type"] == "synthesized":
                assert returned["type"] == "blob"
                assert returned["key"] == name
                data = again.read_blob(returned["digest"])
                assert blobs.read_int_tensor(data, name) == made.tensors[name]
            else:
                assert returned == source


def _with_runs(registry: Registry, product: str) -> None:
    """One passed, unsigned run of a test implementation (the definition's own reference) per imported workload."""
    protocol = new_record(
        BenchmarkProtocolSpec(
            harness=Harness(name="kictl", version="test"),
            correctness=CorrectnessProtocol(reference="definition reference", comparator="allclose"),
            measurement=Measurement(timer="cuda_event", primary_statistic="median"),
            comparability=Comparability(family="kictl-cuda-events"),
        ),
        name="test-protocol",
    )
    environment = new_record(
        ExecutionEnvironmentSpec(hardware=Hardware(vendor="NVIDIA", product=product), software=Software()),
        name=product,
    )
    records = [protocol, environment]
    definitions = {record.digest: record for record in registry.iter_records(["Definition"])}
    impls: dict[str, StoredRecord] = {}
    for digest, definition in definitions.items():
        spec = definition.model.spec
        assert isinstance(spec, DefinitionSpec)
        text = spec.reference
        source = SourceFile(path="main.py", sha256=canon.sha256_hex(text.encode()), content=text)
        impls[digest] = new_record(
            ImplementationSpec(
                name=f"ref_{spec.name}", definition_digest=digest, runtime="python", entry_point="main.py::run",
                sources=(source,), author="test",
            ),
            name=f"ref_{spec.name}",
        )  # fmt: skip
    records += impls.values()
    for number, workload in enumerate(sorted(registry.iter_records(["Workload"]), key=lambda r: r.digest)):
        spec = workload.model.spec
        assert isinstance(spec, WorkloadSpec)
        run = BenchmarkRunSpec(
            status="passed",
            timing=Timing(latency_ns=LatencyNs(median=50_000_000 + number), primary_statistic="median"),
            observed_at="2026-11-30T00:00:00.000Z",
            correctness=RunCorrectness(comparator="allclose", maximum_absolute_error=0.0, maximum_relative_error=0.0),
            definition_digest=spec.definition_digest,
            workload_digest=workload.digest,
            implementation_digest=impls[spec.definition_digest].digest,
            protocol_digest=protocol.digest,
            environment_digest=environment.digest,
        )
        records.append(new_record(run, name=f"run-{number}"))
    registry.add(records)


def _apply_choices(out: Path) -> dict[tuple[str, tuple[tuple[str, int], ...]], str]:
    """FlashInfer-Bench's own loader and apply table on an export: (definition, axes) -> solution."""
    data = pytest.importorskip("flashinfer_bench.data")
    table = pytest.importorskip("flashinfer_bench.apply.table")
    config = pytest.importorskip("flashinfer_bench.apply.config")
    trace_set = data.TraceSet.from_path(str(out))
    registry = config.ApplyConfigRegistry(default=config.ApplyConfig(max_atol=1.0, max_rtol=1e6, aot_ratio=0))
    built = table.ApplyTable.load_or_build(trace_set, registry)
    return {(name, key.axes): solution for name, bucket in built.index.items() for key, solution in bucket.items()}


@pytest.fixture
def fib_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIB_CACHE_PATH", str(tmp_path / "fib-cache"))
    monkeypatch.setenv("FIB_DATASET_PATH", str(tmp_path / "fib-dataset"))


def test_legacy_flashinfer_traces_round_trip_digest_for_digest(tmp_path: Path, fib_paths: None) -> None:
    """The 2025 traces (B200, real results): re-exported, FlashInfer-Bench 0.1.2 reads them; reimported: the same."""
    source = shared_data("flashinfer-trace-legacy")
    first = _fresh(tmp_path / "first")
    assert import_flashinfer_bench(first, source).ok
    out = tmp_path / "export"
    report = export_flashinfer_trace(first, out, gpu="B200", min_evidence="unsigned")
    assert len(report.exported) == len({item.workload_digest for item in report.exported}) > 0
    second = _fresh(tmp_path / "second")
    assert import_flashinfer_bench(second, out).ok
    for kind in ("Definition", "Implementation", "Workload"):
        exported = set(_records(second, kind))
        assert exported <= set(_records(first, kind)), kind  # digest for digest
    assert {item.workload_digest for item in report.exported} == set(_records(second, "Workload"))
    assert {item.implementation_digest for item in report.exported} == set(_records(second, "Implementation"))
    # the solutions' code is the dataset's, byte for byte
    for path in (source / "solutions").rglob("*.json"):
        original: dict[str, Any] = json.loads(path.read_text())
        written = list(out.glob(f"solutions/*/*/{original['name']}.json"))
        if written:
            assert json.loads(written[0].read_text())["sources"] == original["sources"]
    # FlashInfer-Bench's apply picks, for every exported set of axes, the leaderboard's #1
    choices = _apply_choices(out)
    assert len(choices) == len(report.exported)
    with QueryIndex.open(first) as index:
        for item in report.exported:
            board = workload_leaderboard(
                index, item.definition, item.workload_digest, policy=first.policy(), gpu="B200", min_evidence="unsigned"
            )
            (group,) = board.groups
            axes = tuple(sorted(board.workload.axes.items()))
            assert choices[(item.definition, axes)] == group.rows[0].implementation_label == item.implementation


def test_current_flashinfer_definitions_and_workloads_round_trip(tmp_path: Path, fib_paths: None) -> None:
    """Real definitions and workloads (missing safetensors blobs included) come back digest for digest."""
    source = shared_data("flashinfer-trace")
    dataset = tmp_path / "dataset"
    for relative in (
        "definitions/gqa_paged/gqa_paged_decode_h32_kv8_d128_ps1.json",
        "workloads/gqa_paged/gqa_paged_decode_h32_kv8_d128_ps1.jsonl",
        "definitions/rmsnorm/rmsnorm_h4096.json",
        "workloads/rmsnorm/rmsnorm_h4096.jsonl",
        "definitions/gemm/gemm_n4096_k4096.json",
        "workloads/gemm/gemm_n4096_k4096.jsonl",
    ):
        (dataset / relative).parent.mkdir(parents=True, exist_ok=True)
        lines = (source / relative).read_bytes().splitlines(keepends=True)
        keep = lines[:4] if relative.endswith(".jsonl") else lines  # a few workloads each keep the test fast
        (dataset / relative).write_bytes(b"".join(keep))
    first = _fresh(tmp_path / "first")
    assert import_flashinfer_bench(first, dataset).ok
    _with_runs(first, "B200")
    out = tmp_path / "export"
    report = export_flashinfer_trace(first, out, gpu="B200", min_evidence="unsigned")
    second = _fresh(tmp_path / "second")
    assert import_flashinfer_bench(second, out).ok
    assert set(_records(second, "Definition")) == set(_records(first, "Definition"))
    workloads = set(_records(first, "Workload"))
    assert {item.workload_digest for item in report.exported} == workloads == set(_records(second, "Workload"))
    missing = [
        source_input
        for record in _records(second, "Workload").values()
        for source_input in record.raw["spec"]["inputs"].values()
        if source_input.get("missing")
    ]
    assert missing  # the paged workloads' index tensors: their path and key survive, the blob stays missing
    choices = _apply_choices(out)
    assert sorted(choices.values()) == sorted(item.implementation for item in report.exported)


def test_an_unsigned_permalink_edit_never_reaches_the_export(unadvised: Registry, tmp_path: Path) -> None:
    """Issue 41, class 3: the export applies the signed policy, as every reader does, not the file as edited."""
    import git

    path = unadvised.policy_path
    policy = json.loads(path.read_text())
    signed_base = policy["permalinkBase"]
    policy["permalinkBase"] = "https://attacker.example/r/"
    path.write_text(json.dumps(policy, indent=2) + "\n")
    git.Repo(unadvised.root).index.add(["registry/policy.json"])
    git.Repo(unadvised.root).index.commit("an unsigned policy edit")
    out = tmp_path / "export"
    report = export_flashinfer_trace(unadvised, out, gpu="H200", min_evidence="reported")
    assert report.exported
    assert all(item.permalink.startswith(signed_base) for item in report.exported)
    traces = "".join(path.read_text() for path in (out / "traces").rglob("*.jsonl"))
    assert "attacker.example" not in traces
    assert signed_base in traces
