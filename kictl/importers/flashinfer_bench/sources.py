"""An export's own records, taken back verbatim when they explain every document of it (issue 39).

``kictl export flashinfer-trace`` writes ``kernelindex.records.json`` beside the FlashInfer Trace files: the
KernelIndex records each document was made from (``{"<kind>/<hex>": record}``, the manifest ``kictl bench --out``
writes).  FlashInfer Trace has no member for much of what a record holds (a definition's ``determinism``, a
random input's seed, an implementation's project and licence, the run's own protocol and environment), so a plain
conversion back cannot give the same digests.  With this file, an import of an export gives back exactly the
records it came from: nothing new, nothing refused as a redefinition.

The file is trusted only as far as the documents beside it agree with it.  Every definition, solution, workload
and trace of the set must be *explained* by a record in it: the same name and semantics, the same code and entry
point, the workload's uuid being the record's digest with the same axes, the trace citing that run of that
implementation on that workload.  One document that is not explained (edited after the export, or added) and the
file is set aside with a note: the set is imported as FlashInfer Trace data, as any other.  Each record's digest is
recomputed from its bytes (``record_from_value``), so a record cannot claim another's digest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kictl import canon
from kictl.errors import KictlError
from kictl.records import StoredRecord, record_from_value

#: The file of source records an export writes beside ``kernelindex.json``.
SOURCES_FILE = "kernelindex.records.json"
#: An export of a whole registry is a few MB of records; beyond this it is no export of ours.
_MAX_BYTES = 256 * 2**20
_DEFINITION_MEMBERS = ("name", "axes", "inputs", "outputs", "reference", "description", "constraints", "tags")


@dataclass
class Sources:
    """The source records of an export, and whether they explain the whole set."""

    records: dict[str, StoredRecord] = field(default_factory=dict)  # digest -> record
    unexplained: list[str] = field(default_factory=list)  # 'file: why' of each document they do not explain

    @property
    def explain_all(self) -> bool:
        return bool(self.records) and not self.unexplained

    def by_kind(self, kind: str) -> list[StoredRecord]:
        return [record for record in self.records.values() if record.kind == kind]


def read_sources(root: Path) -> Sources | None:
    """The export's source records, checked against every document under ``root``; ``None`` without the file."""
    path = root / SOURCES_FILE
    if not path.is_file() or path.is_symlink():
        return None
    sources = Sources()
    try:
        manifest = canon.parse_json(path.read_bytes(), source=SOURCES_FILE, max_bytes=_MAX_BYTES)
        if not isinstance(manifest, dict):
            raise KictlError(f"{SOURCES_FILE}: not an object of records")
        for key, value in manifest.items():
            record = record_from_value(value, source=f"{SOURCES_FILE}: {key}")
            if key != f"{record.kind}/{canon.digest_hex(record.digest)}":
                raise KictlError(f"{SOURCES_FILE}: {key} holds {record.kind} {record.digest}")
            sources.records[record.digest] = record
    except (OSError, ValueError, KictlError) as exc:
        sources.records.clear()
        sources.unexplained.append(f"{SOURCES_FILE}: {getattr(exc, 'message', exc)}")
        return sources
    _explain(root, sources)
    return sources


def _documents(root: Path, folder: str, suffix: str) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    base = root / folder
    if not base.is_dir():
        return found
    for path in sorted(base.rglob(f"*{suffix}")):
        relative = str(path.relative_to(root))
        if path.is_symlink() or not path.is_file():
            found.append((relative, None))
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        lines = text.splitlines() if suffix == ".jsonl" else [text]
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                found.append((f"{relative}:{number}" if suffix == ".jsonl" else relative, json.loads(line)))
            except ValueError:
                found.append((relative, None))
    return found


def _explain(root: Path, sources: Sources) -> None:
    definitions = {record.raw["spec"]["name"]: record for record in sources.by_kind("Definition")}
    implementations = {record.raw["spec"]["name"]: record for record in sources.by_kind("Implementation")}
    workloads = {canon.digest_hex(record.digest): record for record in sources.by_kind("Workload")}
    workloads.update(
        {record.raw["spec"]["uuid"]: record for record in sources.by_kind("Workload") if "uuid" in record.raw["spec"]}
    )
    runs = sources.by_kind("BenchmarkRun")

    def miss(where: str, why: str) -> None:
        sources.unexplained.append(f"{where}: {why}")

    for where, document in _documents(root, "definitions", ".json"):
        record = definitions.get(document.get("name")) if isinstance(document, dict) else None
        if record is None:
            miss(where, "no source Definition of this name")
            continue
        spec = record.raw["spec"]
        expected = {member: spec[member] for member in _DEFINITION_MEMBERS if member in spec}
        if "determinism" in spec:
            expected["determinism"] = spec["determinism"]
        given = {key: value for key, value in document.items() if key != "op_type"}
        if given != expected:
            miss(where, f"differs from Definition {record.digest[:19]}…")
    for where, document in _documents(root, "solutions", ".json"):
        record = implementations.get(document.get("name")) if isinstance(document, dict) else None
        if record is None:
            miss(where, "no source Implementation of this name")
            continue
        spec = record.raw["spec"]
        build = document.get("spec") or {}
        same = (
            [{"path": s["path"], "content": s["content"]} for s in spec.get("sources", [])] == document.get("sources")
            and build.get("entry_point") == spec.get("entryPoint")
            and build.get("language") == spec.get("runtime")
        )
        if not same:
            miss(where, f"its code differs from Implementation {record.digest[:19]}…")
    for where, line in _documents(root, "workloads", ".jsonl"):
        workload = line.get("workload") if isinstance(line, dict) else None
        record = workloads.get(str(workload.get("uuid"))) if isinstance(workload, dict) else None
        if record is None or not isinstance(workload, dict) or workload.get("axes") != record.raw["spec"]["axes"]:
            miss(where, "no source Workload of this uuid and axes")
    for where, line in _documents(root, "traces", ".jsonl"):
        if not isinstance(line, dict):
            miss(where, "not a trace")
            continue
        log = str((line.get("evaluation") or {}).get("log") or "")
        workload = line.get("workload") or {}
        cited = [
            run
            for run in runs
            if run.digest in log
            and workloads.get(str(workload.get("uuid"))) is not None
            and workloads[str(workload.get("uuid"))].digest == run.raw["spec"].get("workloadDigest")
            and implementations.get(str(line.get("solution"))) is not None
            and implementations[str(line.get("solution"))].digest == run.raw["spec"].get("implementationDigest")
        ]
        if not cited:
            miss(where, "cites no source run of this implementation on this workload")


__all__ = ["SOURCES_FILE", "Sources", "read_sources"]
