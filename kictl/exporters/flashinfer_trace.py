"""``kictl export flashinfer-trace``: the verified winners of one GPU product as a FlashInfer Trace set (DESIGN §15).

FlashInfer-Bench's ``apply`` substitutes kernels at run time from a trace
set: per definition and exact set of axis values it takes the passed trace
with the highest ``speedup_factor`` whose errors are within its tolerances.
It does not look at the GPU, the environment or who measured the trace.  This
module writes a trace set that holds only what the index vouches for:

* runs on one GPU product (``--gpu``), ranked by the leaderboard
  (``kictl.rank.definition_leaderboard``: passed, in a comparison group, each
  implementation's best run) at or above an evidence level (default
  ``verified``);
* of each comparison group, only the #1 that is not named by an open harness
  advisory (``advised``), not below its physical floor, and, with
  ``require_generalizes``, whose verifier rerun found it correct on held-out
  shapes (``generalizes``): ``kictl.exporters.selection``, which every format shares;
* one trace per definition and set of axis values, because that is ``apply``'s
  key: when two groups of one set of axes have different winners, neither is
  exported (the report says so), so ``apply`` never picks between them.

The layout is the one ``kictl import flashinfer-bench`` and FlashInfer-Bench
0.1.2's ``TraceSet.from_path`` read::

    definitions/<op_type>/<definition>.json
    solutions/<op_type>/<definition>/<solution>.json
    workloads/<op_type>/<definition>.jsonl      one workload trace a line
    traces/<op_type>/<definition>.jsonl         one evaluated trace a line
    blob/workloads/<op_type>/<definition>/<sha256>.safetensors
    kernelindex.json                            what was exported, what was left out and why
    kernelindex.records.json                    the records every document was made from (an import takes
                                                them back verbatim: the same digests)

Each trace's ``evaluation.log`` cites its run: ``KernelIndex BenchmarkRun
sha256:…; evidence verified; <permalink>``.  Solutions of implementations
kictl measured return their outputs (``destination_passing_style: false``);
those imported from FlashInfer-Bench keep the harness's default.  Inputs kictl
made (synthesised structure, a family's generated values, a definition's
``inputs_entrypoint`` tensors) are written as safetensors holding the tensors
the run was timed on (``timed_inputs``).  What the formats cannot carry
across (seeds of random inputs, a project or licence) is listed in
docs/exporting.md; the records
themselves travel in ``kernelindex.records.json``, so that ``kictl import
flashinfer-bench`` of an export gives back the same records
(``importers.flashinfer_bench.sources``).  A definition's ``determinism``,
which FlashInfer Trace has no member for, is written as a member of its own,
which FlashInfer-Bench's loader ignores and kictl's importer reads.

The export is a pure function of the registry's files: no clock, no host
name, sorted everywhere, so the same registry gives the same bytes.  It is
written into a temporary folder beside ``OUT`` and renamed into place;
nothing is written when nothing qualifies (``NothingToExport``, exit 1).

Its size (over 600 lines) is one mapping, field by field, from kictl's records to FlashInfer Trace's, with
every refusal beside the field it concerns.
"""

from __future__ import annotations

import array
import ast
import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kictl import blobs, canon, families
from kictl.definitions import signature
from kictl.errors import CheckFailed, EnvError, KictlError, RecordError, RegistryError, UsageError
from kictl.exporters import timed_inputs
from kictl.exporters.selection import (
    Advised,
    Candidate,
    Exported,
    ExportReport,
    Generalizes,
    LeftOut,
    label,
    no_advisories,
    select_winners,
)
from kictl.exporters.timed_inputs import EntrypointWorker
from kictl.importers.flashinfer_bench import OP_TYPE_FAMILIES
from kictl.importers.flashinfer_bench.sources import SOURCES_FILE
from kictl.index.query import QueryIndex
from kictl.rank import EVIDENCE_LEVELS, check_evidence_level, resolve_gpu
from kictl.rank.ranking import RankedRow
from kictl.records import (
    BenchmarkProtocolSpec,
    BenchmarkRunSpec,
    BlobInput,
    DefinitionSpec,
    ExecutionEnvironmentSpec,
    GeneratedInput,
    ImplementationSpec,
    RandomInput,
    ScalarInput,
    StoredRecord,
    SynthesizedInput,
    WorkloadSpec,
)
from kictl.standing import generalizing
from kictl.store.registry import Registry
from kictl.trust.readers import reader_policy

#: The run's digest is a FlashInfer-Bench protocol's when its harness is this one (see ``importers``).
FLASHINFER_HARNESS = "flashinfer-bench"
MANIFEST = "kernelindex.json"
MANIFEST_KIND = "FlashInferTraceExport"
#: FlashInfer-Bench 0.1.2's ``DType`` and ``SupportedLanguages``.
FI_DTYPES = frozenset(
    {"float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int64", "int32", "int16", "int8", "bool"}
)
FI_LANGUAGES = frozenset({"python", "triton", "cpp", "cuda", "tilelang"})
#: The index's family -> FlashInfer ``op_type``: the inverse of the importer's map, so the two cannot drift apart.
FAMILY_OP_TYPES = {family: op_type for op_type, family in OP_TYPE_FAMILIES.items()}
#: A name used as a file name as it is; any other name is written under its record's digest.
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_INT_ARRAYS = {"int32": "i", "int64": "q", "int16": "h", "int8": "b"}


class NothingToExport(CheckFailed):
    """No run qualifies for the export (exit 1); nothing is written."""


# --------------------------------------------------------------------------- FlashInfer documents


def op_type_for_family(family: str) -> str:
    """The FlashInfer ``op_type`` of an index family (``gqa-paged-attention`` -> ``gqa_paged``)."""
    return FAMILY_OP_TYPES.get(family, family.replace("-", "_"))


def _file_name(name: str, digest: str) -> str:
    """``name`` where it is a plain file name, else the record's digest (a hostile name never becomes a path)."""
    return name if _FILE_NAME.match(name) and name not in (".", "..") else canon.digest_hex(digest)


def definition_document(record: StoredRecord) -> dict[str, Any]:
    """A Definition record as a FlashInfer Trace definition (members in the schema's order).

    Its ``inputs`` and ``outputs`` are in the order of the reference's ``run`` (``kictl.definitions.signature``),
    not the record's sorted one: FlashInfer-Bench makes the inputs in the definition's order and calls
    ``run(*inputs)`` with them, the reference and every solution alike (``gen_inputs``, ``build_baseline``), and
    reads returned tuples in the outputs' order.  Raises ``RecordError`` when FlashInfer-Bench cannot hold it (a
    dtype it lacks, a reference whose ``run`` does not take exactly the inputs).
    """
    spec = record.model.spec
    assert isinstance(spec, DefinitionSpec)
    raw = record.raw["spec"]
    for group in ("inputs", "outputs"):
        for tensor, item in raw[group].items():
            if item["dtype"] not in FI_DTYPES:
                raise RecordError(f"{group}.{tensor} is {item['dtype']}, which FlashInfer-Bench has no dtype for")
    document: dict[str, Any] = {"name": spec.name, "op_type": op_type_for_family(spec.family)}
    if "description" in raw:
        document["description"] = raw["description"]
    document["axes"] = raw["axes"]
    order = signature(spec, source=f"{spec.name} reference")
    document["inputs"] = {name: raw["inputs"][name] for name in order.inputs}
    document["outputs"] = {name: raw["outputs"][name] for name in order.outputs}
    for member in ("constraints", "tags"):
        if member in raw:
            document[member] = raw[member]
    document["reference"] = raw["reference"]
    if "determinism" in raw:
        document["determinism"] = raw["determinism"]  # no FlashInfer member; its loader ignores it, ours reads it
    return document


def solution_document(record: StoredRecord, definition: str, *, kictl_measured: bool, hardware: str) -> dict[str, Any]:
    """An Implementation record as a FlashInfer Trace solution.

    ``kictl_measured``: kictl called it and took its return value, so the
    solution says ``destination_passing_style: false``; a solution imported
    from FlashInfer-Bench keeps the harness's default.  Raises
    ``RecordError`` when FlashInfer-Bench cannot hold it.
    """
    spec = record.model.spec
    assert isinstance(spec, ImplementationSpec)
    raw = record.raw["spec"]
    if spec.runtime not in FI_LANGUAGES:
        raise RecordError(
            f"runtime {spec.runtime!r} is none of FlashInfer-Bench's languages ({', '.join(sorted(FI_LANGUAGES))})"
        )
    for source in spec.sources:
        if not source.content:
            raise RecordError(f"source {source.path} is empty, which FlashInfer-Bench refuses")
        parts = Path(source.path).parts
        if Path(source.path).is_absolute() or ".." in parts:
            raise RecordError(f"source path {source.path!r} leads outside the solution's folder")
    constants = _keyword_only(spec)
    if constants:
        raise RecordError(
            f"its entry point takes the definition's constant axes as keyword-only parameters "
            f"({', '.join(constants)}), which FlashInfer-Bench does not pass"
        )
    build: dict[str, Any] = {
        "language": spec.runtime,
        "target_hardware": list(spec.target_hardware) if spec.target_hardware else [hardware],
        "entry_point": spec.entry_point,
    }
    if spec.dependencies is not None:
        build["dependencies"] = [
            package if version == "*" else f"{package} {version}"
            for package, version in sorted(spec.dependencies.items())
        ]
    if spec.build_commands is not None:
        build["build_commands"] = list(spec.build_commands)
    if kictl_measured:
        build["destination_passing_style"] = False
    document: dict[str, Any] = {
        "name": spec.name,
        "definition": definition,
        "author": spec.author or spec.project or "unknown",
    }
    if "description" in raw:
        document["description"] = raw["description"]
    document["spec"] = build
    document["sources"] = [{"path": source.path, "content": source.content} for source in spec.sources]
    return document


def _keyword_only(spec: ImplementationSpec) -> list[str]:
    """The keyword-only parameters without a default of a Python entry point (kictl fills those named after the
    definition's constant axes, docs/bench.md; FlashInfer-Bench calls with the inputs alone)."""
    if spec.runtime != "python" or "::" not in spec.entry_point:
        return []
    path, function = spec.entry_point.rsplit("::", 1)
    source = next((item.content for item in spec.sources if item.path == path), None)
    try:
        tree = ast.parse(source or "")
    except SyntaxError:
        return []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function:
            arguments = node.args
            return [a.arg for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if d is None]
    return []


def _tensor_bytes(dtype: str, values: list[int]) -> tuple[str, tuple[int, ...], bytes]:
    code = _INT_ARRAYS.get(dtype)
    if code is None:
        raise RecordError(f"a synthesised index tensor of dtype {dtype} cannot be written")
    packed = array.array(code, values)
    if sys.byteorder != "little":  # pragma: no cover - safetensors is little-endian
        packed.byteswap()
    return dtype, (len(values),), packed.tobytes()


def workload_inputs(
    registry: Registry,
    definition: StoredRecord,
    workload: StoredRecord,
    blob_folder: str,
    *,
    run: StoredRecord | None = None,
    entrypoint: EntrypointWorker | None = None,
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The FlashInfer inputs of a workload and the blob files they name (path -> bytes).

    ``run``: the exported run when kictl measured it.  Every input kictl made rather than read is then written
    as safetensors holding the tensors that run was timed on (``timed_inputs.made_inputs``): structure
    synthesised from the axes (every structural input but a blob the registry holds), a family's
    generated values (reseeded from the run's ``inputSecret`` as its session did) and the definition's
    ``inputs_entrypoint`` tensors (``generated``, made in kictl's reference worker by ``entrypoint``).  Random
    inputs lose their seed (FlashInfer draws its own, and kictl drew them afresh per input set on the run's
    device); a blob the source did not ship keeps its path for a run FlashInfer-Bench measured (it had the
    blob).  Raises ``RecordError`` when an input cannot be made or written, ``RegistryError`` when a blob cannot
    be read.
    """
    spec = workload.model.spec
    definition_spec = definition.model.spec
    assert isinstance(spec, WorkloadSpec)
    assert isinstance(definition_spec, DefinitionSpec)
    files: dict[str, bytes] = {}
    inputs: dict[str, Any] = {}
    made: dict[str, tuple[str, tuple[int, ...], bytes]] = {}
    structural = set(families.family_for(definition_spec.family).structural(definition_spec))
    generated = families.family_for(definition_spec.family).generated(definition_spec)

    def made_by_kictl(name: str, item: Any) -> bool:
        """Whether kictl made this input for the run rather than read it, in ``plan_inputs``' order: structure
        (whatever the workload says, unless a blob it holds), a family's generated values (unless a scalar or a
        blob it holds), the definition's entrypoint's."""
        if isinstance(item, SynthesizedInput | GeneratedInput):
            return True
        if run is None:
            return False
        held = isinstance(item, BlobInput) and not item.missing and item.digest is not None
        if name in structural:
            return not held
        if name in generated:
            return not held and not isinstance(item, ScalarInput)
        return isinstance(item, BlobInput) and not held  # a blob the source did not ship: refused below

    wanted = [name for name, item in spec.inputs.items() if made_by_kictl(name, item)]
    if run is None and any(isinstance(item, GeneratedInput) for item in spec.inputs.values()):
        raise RecordError("its generated inputs are kictl's, and kictl did not measure this run")
    scalars = sorted(name for name in wanted if definition_spec.inputs[name].shape is None)
    if scalars:  # FlashInfer-Bench checks a safetensors input's shape against the definition's: none for a scalar
        raise RecordError(
            f"{', '.join(scalars)}: a scalar kictl made, which FlashInfer Trace can hold only as a literal"
        )
    if any(name not in structural for name in wanted):  # torch, and maybe kictl's reference worker, make these
        made = timed_inputs.made_inputs(definition, workload, run, registry.read_blob, entrypoint)
    elif wanted:
        structure = families.structure(definition_spec, spec, registry.read_blob, source=workload.name)
        made = {
            name: _tensor_bytes(definition_spec.inputs[name].dtype, structure.tensors[name])
            for name in wanted
            if name in structure.tensors
        }
    missing = sorted(set(wanted) - set(made))
    if missing:
        raise RecordError(f"family {definition_spec.family} does not synthesise {', '.join(missing)}")
    if made:
        data = blobs.write_safetensors({name: made[name] for name in sorted(made)})
        path = f"{blob_folder}/{canon.sha256_hex(data)}.safetensors"
        files[path] = data
    for name, item in spec.inputs.items():
        if name in made:
            inputs[name] = {"type": "safetensors", "path": path, "tensor_key": name}
        elif isinstance(item, RandomInput):
            inputs[name] = {"type": "random"}
        elif isinstance(item, ScalarInput):
            inputs[name] = {"type": "scalar", "value": item.value}
        elif isinstance(item, BlobInput):
            if item.missing or item.digest is None:
                inputs[name] = {"type": "safetensors", "path": item.path, "tensor_key": item.key}
            else:
                try:
                    data = registry.read_blob(item.digest)
                except (OSError, KictlError) as exc:
                    raise RegistryError(f"workload {workload.name}: blob {item.digest} cannot be read") from exc
                blob_path = f"{blob_folder}/{canon.digest_hex(item.digest)}.safetensors"
                files[blob_path] = data
                inputs[name] = {"type": "safetensors", "path": blob_path, "tensor_key": item.key}
    return inputs, files


def workload_uuid(workload: StoredRecord, inputs: dict[str, Any]) -> str:
    """The exported workload's ``uuid``: the source's, unless an input is written as tensors kictl made from the
    axes (structure it synthesised, in place of a blob the capture named or not: ``kictl.definitions.NOT_CAPTURED``),
    then the record's digest (hex), as for a workload without one: the source's uuid names its captured tensors.
    The definition's entrypoint's tensors are the source's own rule for its inputs: they keep it."""
    spec = workload.model.spec
    assert isinstance(spec, WorkloadSpec)
    if spec.uuid is None:
        return canon.digest_hex(workload.digest)

    def read_from_source(item: Any, document: dict[str, Any]) -> bool:
        if document.get("type") != "safetensors" or isinstance(item, GeneratedInput):
            return True
        if not isinstance(item, BlobInput):
            return False
        kept = item.path is not None and document.get("path") == item.path  # a FlashInfer-Bench run's capture
        held = item.digest is not None and str(document.get("path")).endswith(
            f"/{canon.digest_hex(item.digest)}.safetensors"
        )
        return kept or held

    captured = all(read_from_source(item, inputs[name]) for name, item in spec.inputs.items())
    return spec.uuid if captured else canon.digest_hex(workload.digest)


def trace_line(
    definition: str,
    workload_document: dict[str, Any],
    solution: str,
    run: StoredRecord,
    environment: StoredRecord,
    row: RankedRow,
    citation: str,
) -> dict[str, Any]:
    """The evaluated trace of one exported run."""
    spec = run.model.spec
    env = environment.model.spec
    assert isinstance(spec, BenchmarkRunSpec)
    assert isinstance(env, ExecutionEnvironmentSpec)
    correctness = spec.correctness
    assert correctness is not None  # checked by the caller, with both errors
    performance: dict[str, Any] = {"latency_ms": row.latency_ns / 1e6}
    if row.speedup_over_reference is not None:
        performance["reference_latency_ms"] = row.latency_ns * row.speedup_over_reference / 1e6
        performance["speedup_factor"] = row.speedup_over_reference
    libs: dict[str, str] = {}
    if env.software.framework is not None and env.software.framework.version is not None:
        libs["torch"] = env.software.framework.version
    if env.software.cuda_toolkit is not None:
        libs["cuda"] = env.software.cuda_toolkit
    libs.update(env.software.libraries or {})
    hardware = " ".join(part for part in (env.hardware.vendor, env.hardware.product) if part).replace(" ", "_")
    return {
        "definition": definition,
        "workload": workload_document,
        "solution": solution,
        "evaluation": {
            "status": "PASSED",
            "environment": {"hardware": hardware, "libs": dict(sorted(libs.items()))},
            "timestamp": spec.observed_at,
            "log": citation,
            "correctness": {
                "max_relative_error": correctness.maximum_relative_error,
                "max_absolute_error": correctness.maximum_absolute_error,
            },
            "performance": performance,
        },
    }


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=True, allow_nan=False) + "\n").encode()


def _jsonl(values: Iterable[Any]) -> bytes:
    return b"".join((json.dumps(value, ensure_ascii=True, allow_nan=False) + "\n").encode() for value in values)


# --------------------------------------------------------------------------- the export


@dataclass
class _DefinitionFiles:
    record: StoredRecord
    op_type: str
    file: str
    solutions: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)  # digest -> (file, document)
    workloads: dict[str, dict[str, Any]] = field(default_factory=dict)  # digest -> workload document
    traces: list[dict[str, Any]] = field(default_factory=list)
    blobs: dict[str, bytes] = field(default_factory=dict)
    sources: dict[str, StoredRecord] = field(default_factory=dict)  # digest -> each record the documents came from


def plan_export(
    registry: Registry,
    report: ExportReport,
    *,
    advised: Advised = no_advisories,
    generalizes: Generalizes | None = None,
    entrypoint: EntrypointWorker | None = None,
) -> dict[str, bytes]:
    """Select the runs and render every file of the export (relative path -> bytes); writes nothing.

    Fills ``report.exported`` and ``report.left_out``.  ``entrypoint`` runs definitions' inputs entrypoints
    (default: kictl's sandboxed reference worker on the CPU, started only when a workload needs it).  Raises
    ``NotFoundError`` for an unknown ``--definition``, ``UsageError`` for an
    unknown GPU or evidence level, ``EnvError`` when an entrypoint must run and no worker can start.
    """
    policy = reader_policy(registry)  # the signed policy, as every reader applies (an unsigned edit is not it)
    owned = entrypoint is None
    entrypoint = EntrypointWorker() if entrypoint is None else entrypoint
    with QueryIndex.open(registry) as index, _closing(entrypoint, owned):
        report.gpu = resolve_gpu(report.gpu, index.gpu_products())
        candidates = select_winners(index, registry, report, advised=advised, generalizes=generalizes)
        outputs: dict[str, _DefinitionFiles] = {}
        solution_names: dict[str, str] = {}  # solution name -> implementation digest
        definition_names: dict[str, str] = {}
        for candidate in sorted(candidates, key=lambda c: (c.row.run.definition or "", c.axes, c.row.run.digest)):
            row = candidate.row
            reason = _render(
                index,
                registry,
                policy.permalink_base,
                candidate,
                outputs,
                solution_names,
                definition_names,
                report,
                entrypoint,
            )
            if reason is not None:
                workload, implementation = label(row.run)
                definition = outputs.get(row.run.definition or "")
                name = definition.record.name if definition else index.name_of(row.run.definition or "") or "?"
                report.left_out.append(LeftOut(row.run.digest, name, workload, implementation, reason))
    report.left_out.sort(key=lambda item: (item.definition, item.workload, item.implementation, item.run))
    report.exported.sort(key=lambda item: (item.definition, item.workload, item.implementation, item.run))
    files: dict[str, bytes] = {}
    for files_of in outputs.values():
        if not files_of.traces:
            continue
        op_type, name = files_of.op_type, files_of.file
        files[f"definitions/{op_type}/{name}.json"] = _json(definition_document(files_of.record))
        for solution_file, document in files_of.solutions.values():
            files[f"solutions/{op_type}/{name}/{solution_file}.json"] = _json(document)
        workloads = sorted(files_of.workloads.values(), key=lambda doc: (sorted(doc["axes"].items()), doc["uuid"]))
        files[f"workloads/{op_type}/{name}.jsonl"] = _jsonl(
            {"definition": files_of.record.name, "workload": doc, "solution": None, "evaluation": None}
            for doc in workloads
        )
        traces = sorted(files_of.traces, key=lambda t: (sorted(t["workload"]["axes"].items()), t["workload"]["uuid"]))
        files[f"traces/{op_type}/{name}.jsonl"] = _jsonl(traces)
        files.update(files_of.blobs)
    manifest = {
        "apiVersion": "kernelindex.dev/v1alpha1",
        "kind": MANIFEST_KIND,
        "selection": report.selection(),
        "exported": [item.to_json() for item in report.exported],
        "leftOut": [item.to_json() for item in report.left_out],
    }
    files[MANIFEST] = _json(manifest)
    sources = {
        f"{record.kind}/{canon.digest_hex(digest)}": record.raw
        for files_of in outputs.values()
        if files_of.traces
        for digest, record in files_of.sources.items()
    }
    if sources:
        files[SOURCES_FILE] = canon.pretty_bytes(dict(sorted(sources.items())))
    return dict(sorted(files.items()))


def _render(
    index: QueryIndex,
    registry: Registry,
    permalink_base: str,
    candidate: Candidate,
    outputs: dict[str, _DefinitionFiles],
    solution_names: dict[str, str],
    definition_names: dict[str, str],
    report: ExportReport,
    entrypoint: EntrypointWorker | None = None,
) -> str | None:
    """Add one winner's documents to ``outputs``; the reason it cannot be exported, else ``None``."""
    row = candidate.row
    facts = row.run
    try:
        run = index.load_record(facts.digest)
        run_spec = run.model.spec
        assert isinstance(run_spec, BenchmarkRunSpec)
        errors = run_spec.correctness
        if errors is None or errors.maximum_absolute_error is None or errors.maximum_relative_error is None:
            return "records no maximum absolute and relative error, which apply filters on (it would never pick it)"
        definition = index.load_record(facts.definition or run_spec.definition_digest or "")
        workload = index.load_record(facts.workload)
        implementation = index.load_record(facts.implementation)
        protocol = index.load_record(facts.protocol)
        environment = index.load_record(facts.environment)
        definition_spec = definition.model.spec
        assert isinstance(definition_spec, DefinitionSpec)
        taken = definition_names.setdefault(definition_spec.name, definition.digest)
        if taken != definition.digest:
            return f"another Definition named {definition_spec.name} ({taken[:19]}…) is exported already"
        files = outputs.get(definition.digest)
        if files is None:
            definition_document(definition)  # refuses what FlashInfer-Bench cannot hold
            op_type = op_type_for_family(definition_spec.family)
            files = _DefinitionFiles(definition, op_type, _file_name(definition_spec.name, definition.digest))
        if implementation.digest not in files.solutions:
            impl_spec = implementation.model.spec
            assert isinstance(impl_spec, ImplementationSpec)
            owner = solution_names.get(impl_spec.name)
            if owner is not None and owner != implementation.digest:
                return f"another Implementation named {impl_spec.name} ({owner[:19]}…) is exported already"
            protocol_spec = protocol.model.spec
            assert isinstance(protocol_spec, BenchmarkProtocolSpec)
            document = solution_document(
                implementation,
                definition_spec.name,
                kictl_measured=protocol_spec.harness.name != FLASHINFER_HARNESS,
                hardware=report.gpu,
            )
            solution_file = _file_name(impl_spec.name, implementation.digest)
        else:
            solution_file, document = files.solutions[implementation.digest]
        workload_spec = workload.model.spec
        assert isinstance(workload_spec, WorkloadSpec)
        workload_document = files.workloads.get(workload.digest)
        blob_files: dict[str, bytes] = {}
        if workload_document is None:
            blob_folder = f"blob/workloads/{files.op_type}/{files.file}"
            protocol_spec = protocol.model.spec
            assert isinstance(protocol_spec, BenchmarkProtocolSpec)
            measured_by_kictl = protocol_spec.harness.name != FLASHINFER_HARNESS
            # one run a workload is exported (one trace per set of axes), so its document may hold that run's inputs
            inputs, blob_files = workload_inputs(
                registry,
                definition,
                workload,
                blob_folder,
                run=run if measured_by_kictl else None,
                entrypoint=entrypoint,
            )
            workload_document = {
                "uuid": workload_uuid(workload, inputs),
                "axes": dict(workload_spec.axes),
                "inputs": inputs,
            }
    except EnvError:
        raise  # no worker for an entrypoint: the machine's fault, not the run's (exit 5)
    except KictlError as exc:
        return f"cannot be written as FlashInfer Trace: {exc.message}"
    permalink = permalink_base + run.digest
    citation = f"KernelIndex BenchmarkRun {run.digest}; evidence {row.evidence}; {permalink}"
    # nothing below can fail: a winner's documents are added together or not at all
    outputs[definition.digest] = files
    solution_names[implementation.model.spec.name] = implementation.digest  # type: ignore[union-attr]
    files.solutions[implementation.digest] = (solution_file, document)
    files.workloads[workload.digest] = workload_document
    files.blobs.update(blob_files)
    for record in (definition, implementation, workload, run, protocol, environment):
        files.sources[record.digest] = record
    files.traces.append(
        trace_line(definition_spec.name, workload_document, document["name"], run, environment, row, citation)
    )
    report.exported.append(
        Exported(
            definition=definition_spec.name,
            workload=workload.name,
            workload_digest=workload.digest,
            implementation=document["name"],
            implementation_digest=implementation.digest,
            run=run.digest,
            evidence=row.evidence,
            latency_ns=row.latency_ns,
            comparison_key=candidate.group.comparison_key,
            permalink=permalink,
        )
    )
    return None


@contextlib.contextmanager
def _closing(entrypoint: EntrypointWorker, owned: bool) -> Iterator[None]:
    try:
        yield
    finally:
        if owned:
            entrypoint.close()


def write_tree(out: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` into a new folder ``out``: a temporary folder beside it, then one rename.

    Raises ``UsageError`` when ``out`` exists, ``RegistryError`` when it cannot be written.
    """
    if out.exists() or out.is_symlink():
        raise UsageError(f"{out} exists; the export writes a new folder (remove it or choose another)")
    parent = out.parent
    if not parent.is_dir():
        raise UsageError(f"{parent}: no such folder")
    try:
        scratch = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=parent))
    except OSError as exc:
        raise RegistryError(f"cannot write into {parent}: {exc.strerror}") from exc
    try:
        for relative, data in files.items():
            path = scratch / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        for folder, _, names in os.walk(scratch):
            os.chmod(folder, 0o755)
            for name in names:
                os.chmod(Path(folder) / name, 0o644)
        os.rename(scratch, out)
    except OSError as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        raise RegistryError(f"cannot write {out}: {exc.strerror}") from exc
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


def export_flashinfer_trace(
    registry: Registry,
    out: Path,
    *,
    gpu: str,
    min_evidence: str = "verified",
    definitions: Sequence[str] = (),
    require_generalizes: bool = False,
    advised: Advised = no_advisories,
    generalizes: Generalizes | None = None,
    entrypoint: EntrypointWorker | None = None,
) -> ExportReport:
    """Write the FlashInfer Trace set of ``gpu``'s winners at or above ``min_evidence`` into ``out``.

    ``advised`` names the runs an open harness advisory marks (none by
    default); with ``require_generalizes`` a winner must also satisfy
    ``generalizes`` (by default: a verifier's held-out rerun said so).
    ``entrypoint`` runs definitions' inputs entrypoints (``plan_export``).
    Raises ``NothingToExport`` (exit 1, nothing written) when no run
    qualifies, ``UsageError`` for a bad option or an existing ``out``,
    ``NotFoundError`` for an unknown definition, ``RegistryError`` on I/O errors,
    ``EnvError`` (exit 5, nothing written) when an entrypoint must run and no worker can start.
    """
    check_evidence_level(min_evidence)
    if require_generalizes and generalizes is None:
        generalizes = generalizing(registry)
    report = ExportReport(
        out=out,
        gpu=gpu,
        min_evidence=min_evidence,
        require_generalizes=require_generalizes,
        definitions=tuple(definitions),
    )
    if out.exists() or out.is_symlink():
        raise UsageError(f"{out} exists; the export writes a new folder (remove it or choose another)")
    files = plan_export(
        registry,
        report,
        advised=advised,
        generalizes=generalizes if require_generalizes else None,
        entrypoint=entrypoint,
    )
    if not report.exported:
        counts: dict[str, int] = {}
        for item in report.left_out:
            key = item.reason.split(";")[0]
            counts[key] = counts.get(key, 0) + 1
        why = "; ".join(f"{count} {reason}" for reason, count in sorted(counts.items(), key=lambda kv: -kv[1]))
        raise NothingToExport(
            f"nothing to export: no run on {report.gpu} qualifies at evidence {min_evidence}"
            + (" with held-out shapes" if require_generalizes else "")
            + (f" ({len(report.left_out)} run(s) left out: {why})" if why else " (no runs on it)")
            + "; nothing written"
        )
    write_tree(out, files)
    report.files = [path for path in files if not path.startswith("blob/")] + sorted(
        path for path in files if path.startswith("blob/")
    )
    return report


__all__ = [
    "EVIDENCE_LEVELS",
    "Advised",
    "ExportReport",
    "Exported",
    "Generalizes",
    "LeftOut",
    "NothingToExport",
    "definition_document",
    "export_flashinfer_trace",
    "no_advisories",
    "op_type_for_family",
    "plan_export",
    "solution_document",
    "trace_line",
    "workload_inputs",
    "write_tree",
]
