"""Compiling ``definitions/<family>/<name>/`` into Definition and Workload records.

A definition folder holds the editable source of a definition (docs/records.md):

``definition.json``
    ``{"metadata": {...}, "spec": {...}}``: a Definition without its reference.
``reference.py``
    the Python source of ``run(...)``, embedded into ``spec.reference`` as text
    so that the digest covers it.
``workloads.jsonl``
    the curated workload suite, one ``{"metadata": {"name": label}, "spec": {...}}``
    a line; ``definitionDigest`` is filled in by the compiler.

Argument order.  Canonical JSON sorts object members, so a record cannot
carry the order of ``inputs`` and ``outputs``.  The order is the reference's:
inputs in the order of ``run``'s parameters (which must name exactly the
definition's inputs), outputs in the order of the names in its ``return``
statement (or by key when it returns a dict).  ``signature`` derives both.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kictl import canon, dtypes, families
from kictl.errors import NotFoundError, RecordError, RegistryError
from kictl.layout import DEFINITIONS_DIR
from kictl.lookup import closest
from kictl.records import (
    API_VERSION,
    BlobInput,
    Definition,
    DefinitionSpec,
    GeneratedInput,
    RandomInput,
    ScalarInput,
    StoredRecord,
    SynthesizedInput,
    WorkloadSpec,
    record_from_value,
)
from kictl.render import natural_key
from kictl.store.inputs import parse_json_file

DEFINITION_FILE = "definition.json"
REFERENCE_FILE = "reference.py"
WORKLOADS_FILE = "workloads.jsonl"


@dataclass(frozen=True, slots=True)
class Signature:
    """The positional order of a definition's inputs and outputs."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Compiled:
    """The records one definition folder compiles to."""

    folder: Path
    definition: StoredRecord
    workloads: tuple[StoredRecord, ...]


def _run_function(tree: ast.Module) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "run":
            return node
    return None


def signature(spec: DefinitionSpec, *, source: str = "reference") -> Signature:
    """Input and output order from the reference's ``run``; raises ``RecordError``."""
    try:
        tree = ast.parse(spec.reference)
    except SyntaxError as exc:
        raise RecordError(f"line {exc.lineno}: {exc.msg}", path=source) from exc
    run = _run_function(tree)
    if run is None:
        raise RecordError("the reference defines no top-level run(...)", path=source)
    params = [arg.arg for arg in (*run.args.posonlyargs, *run.args.args)]
    if set(params) != set(spec.inputs) or len(params) != len(spec.inputs):
        raise RecordError(
            f"{source}: run({', '.join(params)}) does not take exactly the inputs {', '.join(sorted(spec.inputs))}"
        )
    return Signature(inputs=tuple(params), outputs=_output_order(run, spec))


def _returned_name(node: ast.expr) -> str | None:
    """The variable a returned element is made from: ``output`` for ``output``, ``output.to(x.dtype)`` or
    ``output[0].float()`` (a Mamba reference returns ``output.to(x.dtype), new_state``)."""
    while isinstance(node, ast.Call | ast.Attribute | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _output_order(run: ast.FunctionDef, spec: DefinitionSpec) -> tuple[str, ...]:
    declared = tuple(spec.outputs)
    if len(declared) == 1:
        return declared
    for node in ast.walk(run):
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        value = node.value
        if isinstance(value, ast.Tuple):
            names = tuple(_returned_name(elt) for elt in value.elts)
            if sorted(str(name) for name in names) == sorted(declared):
                return tuple(str(name) for name in names)
        if isinstance(value, ast.Dict) and all(
            isinstance(key, ast.Constant) and isinstance(key.value, str) for key in value.keys
        ):
            keys = tuple(str(key.value) for key in value.keys if isinstance(key, ast.Constant))
            if sorted(keys) == sorted(declared):
                return keys
    return declared


# --------------------------------------------------------------------------- folders


def definition_folders(root: Path, *, catalogue: bool = True) -> list[Path]:
    """Every ``definitions/<family>/<name>/`` that holds a definition.json.

    ``catalogue=False`` leaves out the folders the catalogue imported (``catalogue_names``): what the
    tests that run every hand-written definition iterate, so that 151 imported ones do not multiply them.
    """
    base = root / DEFINITIONS_DIR
    if not base.is_dir():
        return []
    folders = sorted(path.parent for path in base.glob(f"*/*/{DEFINITION_FILE}"))
    if not catalogue:
        imported = catalogue_names(root)
        folders = [folder for folder in folders if folder.name not in imported]
    return folders


# --------------------------------------------------------------------------- the catalogue manifest

#: ``definitions/catalogue.json``: every definition of the catalogue's source with its status (docs/importing.md).
CATALOGUE_MANIFEST = "catalogue.json"
CATALOGUE_STATUSES = ("imported", "hand-written", "unrepresented")


def read_catalogue(root: Path) -> dict[str, Any] | None:
    """The catalogue manifest of the registry at ``root``, or None when it has none.

    Raises ``RecordError`` when the file is there but is not the manifest's shape.
    """
    path = root / DEFINITIONS_DIR / CATALOGUE_MANIFEST
    if not path.is_file():
        return None
    label = f"{DEFINITIONS_DIR}/{CATALOGUE_MANIFEST}"
    value = parse_json_file(path, source=label)
    if not isinstance(value, dict):
        raise RecordError(f"{label}: $: expected an object")
    entries = value.get("definitions")
    if not isinstance(entries, dict):
        raise RecordError(f"{label}: $.definitions: expected an object of definition entries")
    for name, entry in entries.items():
        if not isinstance(entry, dict) or entry.get("status") not in CATALOGUE_STATUSES:
            raise RecordError(f"{label}: $.definitions.{name}.status: expected one of {', '.join(CATALOGUE_STATUSES)}")
    return value


def catalogue_names(root: Path) -> frozenset[str]:
    """Names of the definitions the catalogue imported (status ``imported``); empty without a manifest."""
    manifest = read_catalogue(root)
    if manifest is None:
        return frozenset()
    return frozenset(name for name, entry in manifest["definitions"].items() if entry["status"] == "imported")


def _relative(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _read_text(path: Path, label: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise RecordError("missing", path=label) from exc
    except UnicodeDecodeError as exc:
        raise RecordError("not UTF-8 text", path=label) from exc
    except OSError as exc:
        raise RegistryError(f"cannot read: {exc.strerror}", path=label) from exc


def compile_folder(folder: Path, root: Path) -> Compiled:
    """Build the records of one definition folder; raises ``RecordError`` with file and path."""
    label = _relative(root, folder)
    document = parse_json_file(folder / DEFINITION_FILE, source=f"{label}/{DEFINITION_FILE}")
    if not isinstance(document, dict) or not {"metadata", "spec"} <= document.keys():
        raise RecordError(f'{label}/{DEFINITION_FILE}: $: expected {{"metadata": ..., "spec": ...}}')
    extra = sorted(set(document) - {"apiVersion", "kind", "metadata", "spec"})
    if extra:
        raise RecordError(f"{label}/{DEFINITION_FILE}: $.{extra[0]}: unknown member")
    spec = document["spec"]
    if not isinstance(spec, dict):
        raise RecordError(f"{label}/{DEFINITION_FILE}: $.spec: expected an object")
    if "reference" in spec:
        raise RecordError(f"{label}/{DEFINITION_FILE}: $.spec.reference: the reference lives in {REFERENCE_FILE}")
    raw = {
        "apiVersion": API_VERSION,
        "kind": "Definition",
        "metadata": document["metadata"],
        "spec": {**spec, "reference": _read_text(folder / REFERENCE_FILE, f"{label}/{REFERENCE_FILE}")},
    }
    for member in ("apiVersion", "kind"):
        if member in document and document[member] != raw[member]:
            raise RecordError(f"{label}/{DEFINITION_FILE}: $.{member}: must be {raw[member]!r}")
    definition = record_from_value(raw, source=f"{label}/{DEFINITION_FILE}")
    assert isinstance(definition.model.spec, DefinitionSpec)
    def_spec = definition.model.spec
    expected = (def_spec.family, def_spec.name)
    if (folder.parent.name, folder.name) != expected:
        raise RecordError(
            f"{label}: the folder must be {DEFINITIONS_DIR}/{expected[0]}/{expected[1]} for this definition"
        )
    signature(def_spec, source=f"{label}/{REFERENCE_FILE}")
    workloads = _compile_workloads(folder, root, definition)
    return Compiled(folder=folder, definition=definition, workloads=tuple(workloads))


def _compile_workloads(folder: Path, root: Path, definition: StoredRecord) -> list[StoredRecord]:
    path = folder / WORKLOADS_FILE
    label = _relative(root, path)
    if not path.exists():
        return []
    spec = definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    out: list[StoredRecord] = []
    labels: set[str] = set()
    text = _read_text(path, label)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{label}:{number}"
        value = canon.parse_json(line, source=where)
        if not isinstance(value, dict) or set(value) != {"metadata", "spec"} or not isinstance(value["spec"], dict):
            raise RecordError(f'{where}: $: expected {{"metadata": {{"name": ...}}, "spec": {{...}}}}')
        given = value["spec"].get("definitionDigest")
        if given is not None and given != definition.digest:
            raise RecordError(f"{where}: $.spec.definitionDigest: this folder's definition is {definition.digest}")
        raw: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": "Workload",
            "metadata": value["metadata"],
            "spec": {**value["spec"], "definitionDigest": definition.digest},
        }
        workload = record_from_value(raw, source=where)
        if workload.name in labels:
            raise RecordError(f"{where}: $.metadata.name: workload label {workload.name!r} repeats")
        labels.add(workload.name)
        assert isinstance(workload.model.spec, WorkloadSpec)
        check_workload(spec, workload.model.spec, source=where)
        out.append(workload)
    return out


def check_workload(spec: DefinitionSpec, workload: WorkloadSpec, *, source: str) -> None:
    """A workload fits its definition: axes, one source per input of the right type.

    Raises ``RecordError``.
    """
    axes = families.full_axes(spec, workload.axes, source=source)
    missing = [name for name in spec.inputs if name not in workload.inputs]
    if missing:
        raise RecordError(f"no source for {', '.join(missing)}", path=source, pointer="$.spec.inputs")
    unknown = sorted(set(workload.inputs) - set(spec.inputs))
    if unknown:
        raise RecordError(f"not an input of {spec.name}", path=source, pointer=f"$.spec.inputs.{unknown[0]}")
    family = families.family_for(spec.family)
    structural = set(family.structural(spec))
    # A family kictl has no module for (the generic fallback) cannot say which inputs are structure: a
    # synthesised input is taken as the workload states it, and the bench refuses it until a module exists.
    unknown_family = family.name == "generic" and spec.family != "generic"
    for name, given in workload.inputs.items():
        tensor = spec.inputs[name]
        where = f"{source}: {canon.format_path(('spec', 'inputs', name))}"
        if isinstance(given, ScalarInput) and tensor.shape:
            raise RecordError(f"{where}: a scalar source for a tensor of shape {list(tensor.shape)}")
        if isinstance(given, SynthesizedInput) and name not in structural and not unknown_family:
            raise RecordError(
                f"{where}: only structural inputs ({', '.join(sorted(structural)) or 'none'}) are synthesised"
            )
        if isinstance(given, GeneratedInput) and spec.inputs_entrypoint is None:
            raise RecordError(f"{where}: generated, and {spec.name} names no inputs_entrypoint to make it")
        if isinstance(given, RandomInput) and name in structural:
            raise RecordError(f"{where}: a structural input cannot be random; use synthesized or a blob")
        if isinstance(given, BlobInput) and given.missing:
            continue
    try:
        family.check_axes(spec, axes)
    except RecordError as exc:
        raise RecordError(exc.message, path=source) from exc


def compile_all(root: Path, name: str | None = None, *, catalogue: bool = True) -> list[Compiled]:
    """Compile every definition folder (or the one named); raises on the first error.

    ``catalogue=False``: the catalogue's imported folders are left out (``definition_folders``).
    """
    folders = definition_folders(root, catalogue=catalogue)
    if name is not None:
        folders = [folder for folder in folders if folder.name == name]
        if not folders:
            known = [folder.name for folder in definition_folders(root)]
            raise NotFoundError(
                f"no definition folder named {name!r} under {DEFINITIONS_DIR}/",
                details=[f"closest known: {', '.join(near)}" for near in [closest(name, known)] if near],
            )
    return [compile_folder(folder, root) for folder in folders]


# --------------------------------------------------------------------------- where a definition runs

#: GPU generations a definition's source baseline needs, from least to most demanding.
PLACEMENTS = ("any", "hopper", "blackwell")
PLACEMENT_LABELS = {"any": "any GPU", "hopper": "Hopper+ (sm90)", "blackwell": "Blackwell (sm100)"}
FP8_DTYPES = dtypes.FP8


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a definition's source baseline (the kernel its ``fi_api`` tag names) runs, and why.

    The reference is plain PyTorch and runs anywhere, the CPU included; ``needs`` is about the
    kernel a measurement compares against (docs/importing.md, "Which definitions run where").
    """

    needs: str  # one of PLACEMENTS
    reason: str

    @property
    def label(self) -> str:
        return PLACEMENT_LABELS[self.needs]


def placement(spec: DefinitionSpec) -> Placement:
    """The stated rule, first match wins, from the definition alone (its tags and dtypes).

    1. Blackwell: a ``gpu:sm100`` tag; a ``fi_api`` naming a TensorRT-LLM-gen kernel (``trtllm_…``),
       which FlashInfer builds for SM100 only; a ``quantization``/``quant`` tag naming FP4.
    2. Hopper: an FP8 input or output, or a ``quant``/``quantization`` tag naming FP8 (FP8 tensor-core
       kernels); a ``fi_api`` under ``flashinfer.gdn`` (FlashInfer's GDN kernels use TMA, SM90+).
    3. Anything else: any GPU FlashInfer supports.
    """
    tags = spec.tags or ()
    apis = [tag.removeprefix("fi_api:") for tag in tags if tag.startswith("fi_api:")]
    quant = [tag.split(":", 1)[1].lower() for tag in tags if tag.startswith(("quant:", "quantization:"))]
    if "gpu:sm100" in tags:
        return Placement("blackwell", "tagged gpu:sm100")
    trtllm = [api for api in apis if api.rsplit(".", 1)[-1].startswith("trtllm_")]
    if trtllm:
        return Placement("blackwell", f"its baseline {trtllm[0]} is a TensorRT-LLM-gen kernel (SM100)")
    if any("fp4" in q or "float4" in q for q in quant):
        return Placement("blackwell", f"FP4 quantization ({quant[0]})")
    fp8 = sorted(
        name for group in (spec.inputs, spec.outputs) for name, tensor in group.items() if tensor.dtype in FP8_DTYPES
    )
    if fp8:
        return Placement("hopper", f"FP8 tensors ({', '.join(fp8)})")
    if any("fp8" in q or "float8" in q for q in quant):
        return Placement("hopper", f"FP8 quantization ({quant[0]})")
    gdn = [api for api in apis if api.startswith("flashinfer.gdn.")]
    if gdn:
        return Placement("hopper", f"its baseline {gdn[0]} uses TMA (SM90+)")
    return Placement("any", "no FP8/FP4 tensor, no architecture-specific baseline")


# --------------------------------------------------------------------------- where a workload's inputs come from

#: ``metadata.labels`` key and value that mark a workload of a generated suite (kictl.importers.flashinfer_bench).
WORKLOADS_LABEL = "kernelindex.dev/workloads"
GENERATED_LABEL = "generated"
NOT_CAPTURED = "not the captured tensors: structure generated from the axes (the source's blobs are not here)"
GENERATED_SUITE = "generated suite: axes by kictl's suite rule, inputs generated (not captured)"


def workload_origin(raw: dict[str, Any]) -> str | None:
    """What a reader must be told about a Workload record's inputs, or None for nothing to say.

    Read from the spec first, which the digest covers: a workload naming a blob its source did not ship
    (``missing: true``), or naming a captured workload (``uuid``) while synthesising structure, runs on
    structure generated from its axes, whatever its metadata says.  A workload labelled as one of a
    generated suite says so.  A workload whose blobs are all present (a
    dataset imported with them) carries no label.
    """
    spec = raw.get("spec")
    inputs = spec.get("inputs") if isinstance(spec, dict) else None
    if isinstance(inputs, dict) and any(
        isinstance(given, dict) and given.get("type") == "blob" and given.get("missing") for given in inputs.values()
    ):
        return NOT_CAPTURED
    # a workload that names a captured one (its source's uuid) but synthesises structure is not that capture
    if (
        isinstance(inputs, dict)
        and isinstance(spec, dict)
        and spec.get("uuid") is not None
        and any(isinstance(given, dict) and given.get("type") == "synthesized" for given in inputs.values())
    ):
        return NOT_CAPTURED
    metadata = raw.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    if isinstance(labels, dict) and labels.get(WORKLOADS_LABEL) == GENERATED_LABEL:
        return GENERATED_SUITE
    return None


def origin_notes(origins: dict[str, str | None], shown: int = 4) -> list[str]:
    """One line per kind of origin over ``{workload name: origin}``: how many, and the first names."""
    by_origin: dict[str, list[str]] = {}
    for name, origin in origins.items():
        if origin is not None:
            by_origin.setdefault(origin, []).append(name)
    lines = []
    for origin, names in sorted(by_origin.items()):
        listed = ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")
        lines.append(f"{len(names)} of {len(origins)} workload(s) {origin}: {listed}")
    return lines


def definition_rows(
    definitions: list[StoredRecord],
    workloads: dict[str, int],
    runs: dict[str, int],
    manifest: dict[str, Any] | None,
) -> list[dict[str, Any]]:
    """The rows of `kictl definitions list` and the site's index.json: every Definition, then the
    catalogue's definitions kictl cannot represent (``digest`` null, with the reason), by family and name.
    """
    rows: list[dict[str, Any]] = []
    for record in definitions:
        assert isinstance(record.model, Definition)
        where = placement(record.model.spec)
        rows.append(
            {
                "name": record.name,
                "family": record.model.spec.family,
                "digest": record.digest,
                "workloads": workloads.get(record.digest, 0),
                "runs": runs.get(record.digest, 0),
                "runsOn": where.needs,
                "runsOnReason": where.reason,
            }
        )
    for name, entry in ((manifest or {}).get("definitions") or {}).items():
        if entry["status"] == "unrepresented":
            rows.append(
                {
                    "name": name,
                    "family": str(entry.get("family") or "–"),
                    "digest": None,
                    "workloads": 0,
                    "runs": 0,
                    "runsOn": None,
                    "runsOnReason": None,
                    "reason": str(entry.get("reason") or "not stated"),
                }
            )
    return sorted(rows, key=lambda row: (row["family"], natural_key(row["name"])))
