"""Workloads whose inputs kictl made, exported as the tensors their runs were timed on (issue 42, docs/exporting.md).

Three kinds of made input, each read back with FlashInfer-Bench 0.1.2's own loader (``TraceSet.from_path``, and
``load_safetensors``, which checks every tensor's shape and dtype against the definition) and compared with the
tensors made here independently of the exporter:

* a definition's ``inputs_entrypoint`` (``generated`` inputs): the entrypoint called in this process with the
  workload's seed and axes;
* a catalogue sampling workload (a generated suite): the probability rows and ``top_p`` thresholds the family's
  generators draw from the seed the run's disclosed ``inputSecret`` gave its session, and the synthesised ``top_k``;
* a catalogue paged-attention workload whose captured blobs are not here (``not the captured tensors``): the index
  tensors ``kictl.families`` synthesises from its axes.

The export then imports back into kictl: with its records, the same records; without, blob inputs holding the
same tensors.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kictl import blobs, canon, families
from kictl.bench.judge.inputs import secret_seed
from kictl.bench.judge.sandbox import ENV_BWRAP, Isolation
from kictl.bench.wire import generators
from kictl.definitions import NOT_CAPTURED, workload_origin
from kictl.errors import EnvError
from kictl.exporters.flashinfer_trace import NothingToExport, export_flashinfer_trace
from kictl.exporters.timed_inputs import EntrypointWorker
from kictl.importers.flashinfer_bench import import_flashinfer_bench
from kictl.importers.flashinfer_bench.sources import SOURCES_FILE
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
    record_from_value,
)
from kictl.scaffold import create_registry
from kictl.store.registry import Registry
from tests.bench.conftest import SANDBOX
from tests.conftest import REPO_ROOT

#: Rows of a distribution drawn from the seed alone: the same tensors for the same seed, in any process.
SEEDED = """import torch


def run(x, scale):
    return x.amax(-1) * scale


def make_inputs(seed, rows, cols):
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand((rows, cols), generator=generator, dtype=torch.float64) + 0.01
    return {"x": (x / x.sum(-1, keepdim=True)).to(torch.bfloat16)}
"""
#: The same, salted by the operating system: what kictl timed cannot be made again.
UNSEEDED = SEEDED.replace("manual_seed(seed)", "manual_seed(seed ^ int.from_bytes(__import__('os').urandom(4)))")
SECRET = "c0ffee" * 5 + "ab"
#: Catalogue records of the bundled registry (registry/records), read where they are.
SAMPLING = "top_p_sampling_from_probs_v128256"
PAGED = "gqa_paged_prefill_causal_h32_kv8_d128_ps1"
RANDOM_INDICES = "random-indices"
BUNDLED = {  # name -> (definition, the workload exported)
    SAMPLING: (
        "sha256:672ca12f3d42d55daa55026fec4d57794e23b35e3b74e4d6404a6e2b3d30e787",
        "sha256:ff2ed3c4141a097f02a942d8fe9cfea5af47f98dc585899efd1b1ce69c17d3d1",  # batch_size 1, a generated suite
    ),
    PAGED: (
        "sha256:8b24476bc98fa8998084d610220797dd1f3b2eb616c97c9e638d267fd7967121",
        "sha256:bb818a9bb8c0a5fec13e0bff0068db00c31f524f1be883c392ee1c4100e28438",  # 3 KV indices, blobs missing
    ),
}


@dataclass(frozen=True)
class World:
    registry: Registry
    definitions: dict[str, StoredRecord]
    workloads: dict[str, StoredRecord]  # definition name -> its exported workload
    runs: dict[str, StoredRecord]  # definition name -> its run


def _entrypoint_definition(name: str, reference: str) -> StoredRecord:
    spec = DefinitionSpec.model_validate_json(
        json.dumps(
            {
                "name": name,
                "family": "row-max",
                "axes": {"rows": {"type": "var"}, "cols": {"type": "const", "value": 16}},
                "inputs": {
                    "x": {"shape": ["rows", "cols"], "dtype": "bfloat16"},
                    "scale": {"shape": None, "dtype": "float32"},
                },
                "outputs": {"y": {"shape": ["rows"], "dtype": "bfloat16"}},
                "reference": reference,
                "inputs_entrypoint": "make_inputs",
            }
        )
    )
    return new_record(spec, name=name)


def _bundled(kind: str, digest: str) -> StoredRecord:
    """A record of the repository's registry, read from its file (opening that registry costs a second)."""
    hexdigest = canon.digest_hex(digest)
    record = record_from_value(
        json.loads((REPO_ROOT / "registry/records" / kind / hexdigest[:2] / f"{hexdigest}.json").read_bytes())
    )
    assert record.digest == digest
    return record


def _records(definition: StoredRecord, workload: StoredRecord, harness: str, gpu: str, secret: str | None) -> list[Any]:
    """An implementation (the definition's reference), a protocol of ``harness``, an environment and a passed run."""
    spec = definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    text = spec.reference
    implementation = new_record(
        ImplementationSpec(
            name=f"ref_{spec.name}", definition_digest=definition.digest, runtime="python",
            entry_point="main.py::run", author="test",
            sources=(SourceFile(path="main.py", sha256=canon.sha256_hex(text.encode()), content=text),),
        ),
        name=f"ref_{spec.name}",
    )  # fmt: skip
    protocol = new_record(
        BenchmarkProtocolSpec(
            harness=Harness(name=harness, version="test"),
            correctness=CorrectnessProtocol(reference="definition reference", comparator="allclose"),
            measurement=Measurement(timer="cuda_event", primary_statistic="median"),
            comparability=Comparability(family=f"{harness}-events"),
        ),
        name=f"{harness}-protocol",
    )
    environment = new_record(
        ExecutionEnvironmentSpec(hardware=Hardware(vendor="NVIDIA", product=gpu), software=Software()), name=gpu
    )
    run = new_record(
        BenchmarkRunSpec(
            status="passed",
            timing=Timing(latency_ns=LatencyNs(median=40_000), primary_statistic="median"),
            observed_at="2026-12-01T00:00:00.000Z",
            correctness=RunCorrectness(comparator="allclose", maximum_absolute_error=0.0, maximum_relative_error=0.0),
            definition_digest=definition.digest,
            workload_digest=workload.digest,
            implementation_digest=implementation.digest,
            protocol_digest=protocol.digest,
            environment_digest=environment.digest,
            input_secret=secret,
        ),
        name=f"run-{spec.name}-{workload.name}-{gpu}",
    )
    return [implementation, protocol, environment, run]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("generated-inputs") / "registry"
    create_registry(root)
    registry = Registry(root)
    definitions = {name: _entrypoint_definition(name, text) for name, text in (("rows_seeded", SEEDED),)}
    definitions["rows_unseeded"] = _entrypoint_definition("rows_unseeded", UNSEEDED)
    definitions["rows_scalar"] = _entrypoint_definition(
        "rows_scalar", SEEDED.replace('"x": (x', '"scale": x[0, 0], "x": (x')
    )
    workloads: dict[str, StoredRecord] = {}
    for name, definition in definitions.items():
        scale = {"type": "generated", "seed": 5} if name == "rows_scalar" else {"type": "scalar", "value": 2.0}
        spec = WorkloadSpec.model_validate_json(
            json.dumps(
                {
                    "definition_digest": definition.digest,
                    "axes": {"rows": 3},
                    "inputs": {"x": {"type": "generated", "seed": 5}, "scale": scale},
                }
            )
        )
        workloads[name] = new_record(spec, name="rows3")
    for name, (definition_digest, workload_digest) in BUNDLED.items():
        definitions[name] = _bundled("Definition", definition_digest)
        workloads[name] = _bundled("Workload", workload_digest)
        assert definitions[name].name == name
        assert workloads[name].raw["spec"]["definitionDigest"] == definition_digest
    # the paged definition, a workload whose index tensors say random: kictl synthesises structure all the same
    raw = json.loads(json.dumps(workloads[PAGED].raw["spec"]))
    indices = {name: {"type": "random", "seed": 3} for name in ("qo_indptr", "kv_indptr", "kv_indices")}
    raw.update(axes={**raw["axes"], "total_q": 100}, inputs={**raw["inputs"], **indices})
    raw["uuid"] = "a-capture-whose-indices-are-not-here"
    workloads[RANDOM_INDICES] = new_record(WorkloadSpec.model_validate_json(json.dumps(raw)), name="q100_random")
    records: list[Any] = [*definitions.values(), *workloads.values()]
    runs: dict[str, StoredRecord] = {}
    for name, definition in definitions.items():
        made = _records(definition, workloads[name], "kictl", "H200", SECRET if name == SAMPLING else None)
        runs[name] = made[-1]
        records += made
    runs[RANDOM_INDICES] = _records(definitions[PAGED], workloads[RANDOM_INDICES], "kictl", "H200", None)[-1]
    records.append(runs[RANDOM_INDICES])
    # FlashInfer-Bench measured the paged workload on another GPU: it had the captured blobs
    records += _records(definitions[PAGED], workloads[PAGED], "flashinfer-bench", "B200", None)
    registry.add(records)
    return World(registry, definitions, workloads, runs)


@pytest.fixture(scope="module")
def entrypoint() -> Iterator[EntrypointWorker]:
    worker = EntrypointWorker(isolation=None if SANDBOX else Isolation(None))
    yield worker
    worker.close()


@pytest.fixture
def fib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("FIB_CACHE_PATH", str(tmp_path / "fib-cache"))
    monkeypatch.setenv("FIB_DATASET_PATH", str(tmp_path / "fib-dataset"))
    return pytest.importorskip("flashinfer_bench")


def _read_back(fib: Any, out: Path, definition: str, axes: dict[str, int] | None = None) -> tuple[Any, dict[str, Any]]:
    """FlashInfer-Bench's workload of ``definition`` (of ``axes``, where it has several) and its safetensors inputs,
    loaded and checked by its own code."""
    from flashinfer_bench.bench.utils import load_safetensors

    trace_set = fib.TraceSet.from_path(str(out))
    (trace,) = [line for line in trace_set.traces[definition] if axes is None or line.workload.axes == axes]
    (workload,) = [
        line.workload for line in trace_set.workloads[definition] if line.workload.uuid == trace.workload.uuid
    ]
    assert workload == trace.workload
    return workload, load_safetensors(trace_set.definitions[definition], workload, out)


def test_what_the_export_cannot_rebuild_is_refused_before_anything_runs(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scalar kictl made has no FlashInfer form (its safetensors shape check wants none): left out with the reason,
    without starting a worker.  An entrypoint with no sandbox to run in is the machine's fault (exit 5), not a
    reason to leave the run out, and nothing is written."""
    with pytest.raises(NothingToExport, match="scale: a scalar kictl made, which FlashInfer Trace can hold only as"):
        export_flashinfer_trace(
            world.registry, tmp_path / "scalar", gpu="H200", min_evidence="unsigned", definitions=["rows_scalar"]
        )
    monkeypatch.setenv(ENV_BWRAP, str(tmp_path / "no-bwrap-here"))
    with pytest.raises(EnvError, match="bubblewrap"):
        export_flashinfer_trace(
            world.registry, tmp_path / "seeded", gpu="H200", min_evidence="unsigned", definitions=["rows_seeded"]
        )
    assert sorted(path.name for path in tmp_path.iterdir()) == []


def _origin(record: StoredRecord) -> str | None:
    return workload_origin(record.raw)


@pytest.mark.heavy
def test_entrypoint_inputs_are_exported_as_the_tensors_the_entrypoint_makes(
    world: World, entrypoint: EntrypointWorker, tmp_path: Path, fib: Any
) -> None:
    """FlashInfer-Bench reads exactly what the definition's entrypoint makes for the workload's seed and axes (the
    entrypoint ran in kictl's reference worker); an entrypoint that is not a function of its seed is refused."""
    import torch

    out = tmp_path / "export"
    report = export_flashinfer_trace(
        world.registry, out, gpu="H200", min_evidence="unsigned",
        definitions=["rows_seeded", "rows_unseeded"], entrypoint=entrypoint,
    )  # fmt: skip
    assert [item.definition for item in report.exported] == ["rows_seeded"]
    (refused,) = [item for item in report.left_out if item.definition == "rows_unseeded"]
    assert "make_inputs() made different tensors for the same seed" in refused.reason
    workload, tensors = _read_back(fib, out, "rows_seeded")
    assert workload.inputs["scale"].type == "scalar"
    assert workload.inputs["x"].type == "safetensors"
    assert workload.inputs["x"].path.startswith("blob/workloads/")
    namespace: dict[str, Any] = {}
    exec(compile(SEEDED, "reference.py", "exec"), namespace)  # the definition's own function, here, by hand
    expected = namespace["make_inputs"](5, 3, 16)["x"]
    assert tensors["x"].dtype == torch.bfloat16
    assert torch.equal(tensors["x"], expected)
    assert workload.uuid == canon.digest_hex(world.workloads["rows_seeded"].digest)
    # back into kictl: with its records the generated workload itself; without them, a blob of the same tensor
    fresh_root = tmp_path / "fresh"
    create_registry(fresh_root)
    back = import_flashinfer_bench(Registry(fresh_root), out)
    assert back.ok, back.skipped
    assert world.workloads["rows_seeded"].digest in {outcome.record.digest for outcome in back.outcomes}
    (out / SOURCES_FILE).unlink()
    bare_root = tmp_path / "bare"
    create_registry(bare_root)
    bare = Registry(bare_root)
    assert import_flashinfer_bench(bare, out).ok
    (returned,) = [record.raw["spec"]["inputs"]["x"] for record in bare.iter_records(["Workload"])]
    assert returned["type"] == "blob"
    data = bare.read_blob(returned["digest"])
    entry = blobs.read_header(data)[returned["key"]]
    assert (entry.dtype, entry.shape) == ("BF16", (3, 16))
    assert data[entry.start : entry.end] == expected.reshape(-1).view(torch.uint8).numpy().tobytes()


def test_catalogue_workloads_carry_the_tensors_their_runs_were_timed_on(world: World, tmp_path: Path, fib: Any) -> None:
    """A generated suite's distributions (reseeded from the run's disclosed secret, as its session did) and a
    workload whose captured blobs are missing (its index tensors synthesised from the axes), read by
    FlashInfer-Bench."""
    import torch

    out = tmp_path / "export"
    report = export_flashinfer_trace(
        world.registry, out, gpu="H200", min_evidence="unsigned", definitions=[SAMPLING, PAGED]
    )
    assert sorted(item.definition for item in report.exported) == sorted([PAGED, PAGED, SAMPLING])
    # sampling: probs and top_p are the family's generated draws of the session's seeds, top_k the synthesised one
    workload, tensors = _read_back(fib, out, SAMPLING)
    record = world.workloads[SAMPLING]
    spec = record.model.spec
    assert isinstance(spec, WorkloadSpec)
    axes = families.full_axes(world.definitions[SAMPLING].model.spec, spec.axes)  # type: ignore[arg-type]
    assert {name: given.type for name, given in workload.inputs.items()} == {
        "probs": "safetensors", "top_p": "safetensors",
    }  # fmt: skip
    for name, drawn_by in (("probs", generators.probability_rows), ("top_p", generators.top_p)):
        seed = spec.inputs[name].seed  # type: ignore[union-attr]
        session_seed = secret_seed(SECRET, f"generated {seed}", name)
        shape = tuple(axes[axis] for axis in ("batch_size", "vocab_size")[: tensors[name].dim()])
        assert torch.equal(tensors[name], drawn_by(shape, torch.float32, session_seed)), name
    assert torch.allclose(tensors["probs"].double().sum(-1), torch.ones(axes["batch_size"], dtype=torch.float64))
    # the workload's own seed would have given other values: the export follows the run, not the workload alone
    assert not torch.equal(tensors["probs"], generators.probability_rows(tensors["probs"].shape, torch.float32, 11))
    # paged attention: the captured blobs are not here; the export holds what kictl synthesised and timed
    paged = world.workloads[PAGED]
    assert _origin(paged) == NOT_CAPTURED
    workload, tensors = _read_back(fib, out, PAGED, paged.raw["spec"]["axes"])
    paged_spec = paged.model.spec
    assert isinstance(paged_spec, WorkloadSpec)
    made = families.structure(world.definitions[PAGED].model.spec, paged_spec)  # type: ignore[arg-type]
    for name in ("qo_indptr", "kv_indptr", "kv_indices"):
        assert workload.inputs[name].type == "safetensors"
        assert workload.inputs[name].path != paged.raw["spec"]["inputs"][name]["path"]
        assert tensors[name].tolist() == made.tensors[name], name
    # not the captured workload: it is not named by the capture's uuid
    assert paged_spec.uuid is not None
    assert workload.uuid == canon.digest_hex(paged.digest) != paged_spec.uuid
    # index tensors the workload calls random are structure all the same: kictl synthesised them, so does the
    # export (FlashInfer-Bench's random integers would index nothing)
    variant = world.workloads[RANDOM_INDICES].model.spec
    assert isinstance(variant, WorkloadSpec)
    workload, tensors = _read_back(fib, out, PAGED, dict(variant.axes))
    made = families.structure(world.definitions[PAGED].model.spec, variant)  # type: ignore[arg-type]
    for name in ("qo_indptr", "kv_indptr", "kv_indices"):
        assert workload.inputs[name].type == "safetensors"
        assert tensors[name].tolist() == made.tensors[name], name
    assert workload.uuid == canon.digest_hex(world.workloads[RANDOM_INDICES].digest)


def test_a_run_flashinfer_bench_measured_keeps_the_captured_blobs_it_had(
    world: World, tmp_path: Path, fib: Any
) -> None:
    """FlashInfer-Bench measured on the captured tensors: its trace names their file and the capture's uuid."""
    out = tmp_path / "export"
    report = export_flashinfer_trace(world.registry, out, gpu="B200", min_evidence="unsigned", definitions=[PAGED])
    assert [item.definition for item in report.exported] == [PAGED]
    trace_set = fib.TraceSet.from_path(str(out))
    (trace,) = trace_set.traces[PAGED]
    paged = world.workloads[PAGED].raw["spec"]
    assert trace.workload.uuid == paged["uuid"]
    for name in ("qo_indptr", "kv_indptr", "kv_indices"):
        assert trace.workload.inputs[name].path == paged["inputs"][name]["path"]
    assert not (out / "blob").exists()


def test_an_export_of_made_inputs_imports_back(world: World, tmp_path: Path) -> None:
    """With its records, the import takes them back verbatim (the same digests); without them, the made inputs
    come back as blob inputs holding the same tensors."""
    out = tmp_path / "export"
    export_flashinfer_trace(world.registry, out, gpu="H200", min_evidence="unsigned", definitions=[SAMPLING, PAGED])
    back = import_flashinfer_bench(world.registry, out)
    assert back.ok, back.skipped
    assert [outcome.record.digest for outcome in back.outcomes if outcome.new] == []
    assert any("taken back verbatim" in note for note in back.notes)
    fresh_root = tmp_path / "fresh"
    create_registry(fresh_root)
    fresh = Registry(fresh_root)
    again = import_flashinfer_bench(fresh, out)
    assert again.ok, again.skipped
    digests = {outcome.record.digest for outcome in again.outcomes}
    assert {world.workloads[SAMPLING].digest, world.workloads[PAGED].digest, world.runs[PAGED].digest} <= digests
    (out / SOURCES_FILE).unlink()  # FlashInfer Trace data alone
    bare_root = tmp_path / "bare"
    create_registry(bare_root)
    bare = Registry(bare_root)
    converted = import_flashinfer_bench(bare, out)
    assert converted.ok, converted.skipped
    by_uuid = {record.raw["spec"]["uuid"]: record for record in bare.iter_records(["Workload"])}
    paged = world.workloads[PAGED]
    returned = by_uuid[canon.digest_hex(paged.digest)].raw["spec"]["inputs"]
    made = families.structure(world.definitions[PAGED].model.spec, paged.model.spec)  # type: ignore[arg-type]
    for name in ("qo_indptr", "kv_indptr", "kv_indices"):
        assert returned[name]["type"] == "blob"
        assert blobs.read_int_tensor(bare.read_blob(returned[name]["digest"]), name) == made.tensors[name]
