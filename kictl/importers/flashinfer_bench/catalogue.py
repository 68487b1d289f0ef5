"""A FlashInfer Trace dataset written as editable definition folders: the bundled catalogue (DESIGN §16).

``kictl import flashinfer-bench`` stores records; the catalogue instead writes
``definitions/<family>/<name>/`` folders (``definition.json``, ``reference.py``,
``workloads.jsonl``) that ``kictl definitions compile`` turns into the same
records.  The Definition and Workload specs are the importer's, built from the
source alone, so compiling the catalogue and importing the same dataset give
the same digests: re-importing adds nothing, and a dataset that holds the
blobs adds the captured workloads beside the catalogue's.

Provenance lives in each record's ``metadata.labels`` (presentation, not
identity: the same semantics from another commit keep their digest):
``kernelindex.dev/source`` (the repository), ``kernelindex.dev/source-commit``
and ``kernelindex.dev/source-path`` (the file the definition or workload line
came from).  A workload of a generated suite carries
``kernelindex.dev/workloads: generated`` and the rule in
``kernelindex.dev/suite-rule``.

What the catalogue does not take is written down, never dropped silently:
``definitions/catalogue.json`` lists every definition of the source with its
status: ``imported``, ``hand-written`` (a folder of that name was already in
the registry: it is kept as it is and the source's version is not added) or
``unrepresented`` (with the reason the importer gave), and the source members
kictl does not keep (``optional`` on a tensor: kictl always passes the input).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kictl.definitions import (
    CATALOGUE_MANIFEST,
    DEFINITION_FILE,
    GENERATED_LABEL,
    REFERENCE_FILE,
    WORKLOADS_FILE,
    WORKLOADS_LABEL,
    check_workload,
)
from kictl.errors import RecordError, RegistryError, UsageError
from kictl.importers.flashinfer_bench.importer import read_dataset
from kictl.importers.flashinfer_bench.suites import SUITE_RULE, generated_suite
from kictl.layout import DEFINITIONS_DIR
from kictl.records import API_VERSION, BlobInput, DefinitionSpec, StoredRecord, WorkloadSpec, record_from_value

LABEL_SOURCE = "kernelindex.dev/source"
LABEL_COMMIT = "kernelindex.dev/source-commit"
LABEL_PATH = "kernelindex.dev/source-path"
LABEL_WORKLOADS = WORKLOADS_LABEL
LABEL_RULE = "kernelindex.dev/suite-rule"
GENERATED = GENERATED_LABEL


@dataclass
class CatalogueReport:
    """What ``write_catalogue`` wrote and what it left out, per definition name."""

    source: str
    commit: str
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for entry in self.entries.values() if entry["status"] == status)


def _labels(source: str, commit: str, path: str) -> dict[str, str]:
    return {LABEL_SOURCE: source, LABEL_COMMIT: commit, LABEL_PATH: path}


def _dump_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=True) + "\n"


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise RegistryError(f"cannot write: {exc.strerror}", path=str(path)) from exc


def _existing_folders(root: Path) -> dict[str, Path]:
    base = root / DEFINITIONS_DIR
    return {path.parent.name: path.parent for path in sorted(base.glob(f"*/*/{DEFINITION_FILE}"))}


def _is_catalogue_folder(folder: Path) -> bool:
    """A folder this module wrote (its definition.json names a source commit), which it may write again."""
    try:
        document = json.loads((folder / DEFINITION_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    labels = (document.get("metadata") or {}).get("labels") or {}
    return isinstance(labels, dict) and LABEL_COMMIT in labels


def workload_line(record: StoredRecord, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A compiled Workload as a ``workloads.jsonl`` line (``definitionDigest`` is the compiler's to fill)."""
    spec = {key: value for key, value in record.raw["spec"].items() if key != "definitionDigest"}
    metadata: dict[str, Any] = {"name": record.name}
    title = record.raw.get("metadata", {}).get("title")
    if title:
        metadata["title"] = title
    if labels:
        metadata["labels"] = labels
    return {"metadata": metadata, "spec": spec}


def _source_files(dataset: Path) -> dict[str, str]:
    """Definition name -> its file, relative to the dataset's parent (``flashinfer_trace/definitions/...``)."""
    out: dict[str, str] = {}
    for path in sorted((dataset / "definitions").rglob("*.json")):
        try:
            name = json.loads(path.read_text(encoding="utf-8")).get("name")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(name, str):
            out.setdefault(name, path.relative_to(dataset.parent).as_posix())
    return out


def _optional_members(dataset: Path, relative: str) -> list[str]:
    try:
        value = json.loads((dataset.parent / relative).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return sorted(
        name
        for group in ("inputs", "outputs")
        for name, tensor in (value.get(group) or {}).items()
        if isinstance(tensor, dict) and tensor.get("optional")
    )


def write_catalogue(dataset: Path, root: Path, *, source: str, commit: str) -> CatalogueReport:
    """Write every definition of ``dataset`` as a folder under ``root/definitions/``, and the manifest.

    A folder of the same name that this module did not write (a hand-written
    definition) is kept as it is.  Definitions with no workload in the dataset
    get the generated suite of ``kictl.importers.flashinfer_bench.suites``.
    Raises ``UsageError`` for a folder that is no dataset, ``RegistryError``
    when a file cannot be written.
    """

    if not commit or any(c not in "0123456789abcdef" for c in commit) or len(commit) != 40:
        raise UsageError(f"--commit must be the source's full 40-digit commit, not {commit!r}")
    data = read_dataset(dataset)
    report = CatalogueReport(source=source, commit=commit)
    files = _source_files(dataset)
    existing = _existing_folders(root)
    workloads: dict[str, list[StoredRecord]] = {}
    definitions = data.by_kind("Definition")
    by_digest = {record.digest: record for record in definitions}
    for record in data.by_kind("Workload"):
        assert isinstance(record.model.spec, WorkloadSpec)
        owner = by_digest.get(record.model.spec.definition_digest)
        if owner is not None:
            workloads.setdefault(owner.name, []).append(record)
    for item in data.skipped:
        if item.kind == "Definition":
            name = Path(item.file).stem
            report.entries[name] = {
                "status": "unrepresented",
                "reason": item.message,
                "sourcePath": f"{dataset.name}/{item.file}",
            }
    for record in definitions:
        spec = record.model.spec
        assert isinstance(spec, DefinitionSpec)
        relative = files.get(spec.name, "")
        entry: dict[str, Any] = {"family": spec.family, "sourcePath": relative}
        optional = _optional_members(dataset, relative)
        if optional:
            entry["notKept"] = [
                f"optional on {name}: kictl always passes this input, so the case without it is not benched"
                for name in optional
            ]
        report.entries[spec.name] = entry
        folder = existing.get(spec.name)
        if folder is not None and not _is_catalogue_folder(folder):
            entry["status"] = "hand-written"
            entry["folder"] = folder.relative_to(root).as_posix()
            entry["sourceWorkloadsNotAdded"] = len(workloads.get(spec.name, []))
            entry["relation"] = (
                "the registry's hand-written definition of this name is kept as it is: the same semantics "
                "(tests/test_definitions.py::test_semantics_match_flashinfer_trace runs both references), its own "
                "description, reference text and workload suite; the source's version and its workloads are not "
                "added, so the name stays unambiguous"
            )
            continue
        folder = root / DEFINITIONS_DIR / spec.family / spec.name
        entry["status"] = "imported"
        document = {
            "metadata": {
                "name": spec.name,
                **({"title": record.raw["metadata"]["title"]} if record.raw["metadata"].get("title") else {}),
                "labels": _labels(source, commit, relative),
            },
            "spec": {key: value for key, value in record.raw["spec"].items() if key != "reference"},
        }
        _write_atomic(folder / DEFINITION_FILE, _dump_json(document))
        _write_atomic(folder / REFERENCE_FILE, spec.reference)
        lines: list[dict[str, Any]] = []
        shipped = sorted(workloads.get(spec.name, []), key=lambda r: r.name)
        left_out: list[dict[str, str]] = []
        kept: list[StoredRecord] = []
        for workload in shipped:
            assert isinstance(workload.model.spec, WorkloadSpec)
            try:
                check_workload(spec, workload.model.spec, source=workload.name)
            except RecordError as exc:
                left_out.append({"workload": workload.name, "reason": exc.message})
                continue
            kept.append(workload)
            lines.append(workload_line(workload, _labels(source, commit, _workload_file(dataset, spec))))
        if shipped:
            entry["workloads"] = {"shipped": len(kept), "missingBlobs": sum(map(_has_missing_blob, kept))}
            if left_out:
                entry["workloadsLeftOut"] = left_out
        else:
            try:
                suite = generated_suite(spec)
            except RecordError as exc:  # no rule covers these axes: the definition comes without workloads, said so
                suite = []
                entry["noSuite"] = exc.message
            rule = {LABEL_WORKLOADS: GENERATED, LABEL_RULE: SUITE_RULE, LABEL_SOURCE: source, LABEL_COMMIT: commit}
            for label, suite_spec in suite:
                made = record_from_value(
                    {"apiVersion": API_VERSION, "kind": "Workload", "metadata": {"name": label},
                     "spec": {**suite_spec, "definitionDigest": record.digest}},
                    source=f"{spec.name} suite {label}",
                )  # fmt: skip
                assert isinstance(made.model.spec, WorkloadSpec)
                check_workload(spec, made.model.spec, source=f"{spec.name} suite {label}")
                lines.append({"metadata": {"name": label, "labels": rule}, "spec": suite_spec})
            entry["workloads"] = {"generated": len(suite)}
        _write_atomic(folder / WORKLOADS_FILE, "".join(json.dumps(line) + "\n" for line in lines))
        report.written.append(folder)
    manifest = {
        "source": source,
        "commit": commit,
        "rule": "docs/importing.md#the-bundled-catalogue",
        "definitions": {name: report.entries[name] for name in sorted(report.entries)},
    }
    _write_atomic(root / DEFINITIONS_DIR / CATALOGUE_MANIFEST, _dump_json(manifest))
    return report


def _workload_file(dataset: Path, spec: DefinitionSpec) -> str:
    for path in sorted((dataset / "workloads").rglob(f"{spec.name}.jsonl")):
        return path.relative_to(dataset.parent).as_posix()
    return ""


def _has_missing_blob(record: StoredRecord) -> bool:
    spec = record.model.spec
    assert isinstance(spec, WorkloadSpec)
    return any(isinstance(given, BlobInput) and given.missing for given in spec.inputs.values())
