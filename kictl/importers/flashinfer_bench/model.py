"""The source format's names and the importer's results: what a FlashInfer Trace dataset maps onto, what an
import reports.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kictl import canon
from kictl.records import (
    KINDS,
    StoredRecord,
)

SOURCE = "flashinfer-bench"
HARNESS_REPOSITORY = "https://github.com/flashinfer-ai/flashinfer-bench"
TIMER = "harness_reported"
PRIMARY_STATISTIC = "mean"
CORRECTNESS_REFERENCE = "definition reference implementation"
COMPARATOR = "flashinfer_bench_eval"
COMPARABILITY_FAMILY = "flashinfer_bench_trace"
PROTOCOL_NAME = "flashinfer-bench-trace"
METRICS = ("latency_ms", "reference_latency_ms", "speedup_factor")

#: FlashInfer ``op_type`` -> the index's family (DESIGN §3); others keep their name with "_" -> "-".
OP_TYPE_FAMILIES: dict[str, str] = {
    "gqa_paged": "gqa-paged-attention",
    "gqa_ragged": "gqa-ragged-attention",
    "mla_paged": "mla-paged-attention",
    "mla_ragged": "mla-ragged-attention",
    "gemm": "gemm",
    "rmsnorm": "rmsnorm",
}

#: The source's evaluation status -> the index's run status.
STATUSES: dict[str, str] = {
    "PASSED": "passed",
    "INCORRECT_SHAPE": "incorrect_shape",
    "INCORRECT_NUMERICAL": "incorrect_numerical",
    "INCORRECT_DTYPE": "incorrect_dtype",
    "RUNTIME_ERROR": "runtime_error",
    "COMPILE_ERROR": "compile_error",
    "TIMEOUT": "timeout",
    "REWARD_HACK": "reward_hack",
}

_DEFINITION_MEMBERS = {
    *("name", "op_type", "type", "description", "tags", "determinism"),
    *("axes", "inputs", "outputs", "constraints", "reference"),
}
_AXIS_MEMBERS = ("type", "value", "description")
_TENSOR_MEMBERS = ("shape", "dtype", "description")
_SOLUTION_MEMBERS = {"name", "definition", "description", "author", "spec", "sources"}
_SOLUTION_SPEC_MEMBERS = {"language", "target_hardware", "dependencies", "entry_point", "build_commands"}
_NON_FINITE_STRINGS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_DEPENDENCY_RE = re.compile(r"^\s*([A-Za-z0-9_.\-]+(?:\[[A-Za-z0-9_,.\-]+\])?)\s*(.*?)\s*$")
_FOLDER_KINDS = {
    "definitions": "Definition",
    "solutions": "Implementation",
    "workloads": "Workload",
    "traces": "BenchmarkRun",
}
#: Longest integer literal read from a source (Python refuses more than 4300 digits with a ValueError).
MAX_INTEGER_DIGITS = 30
#: A temporary file of the store (``.<name>.<random>.tmp``) older than this was left by a killed writer.
STALE_TEMPORARY_S = 60.0
#: How alike (difflib's ratio) a name must be to one the dataset has for a skip message to suggest it.
NEAR_NAME_CUTOFF = 0.8
#: Definitions without workloads named in the note (``--json`` lists them all).
BARE_DEFINITIONS_SHOWN = 5


@dataclass(frozen=True, slots=True)
class Limits:
    """What the importer reads from a dataset, at most.

    The defaults are far above anything the real FlashInfer Trace datasets
    hold (their documents and lines are a few kilobytes, their safetensors
    blobs of index tensors a few megabytes) and far below what would exhaust
    a laptop's memory.  A document, line or blob over its cap is skipped and
    reported; so is JSON nested deeper than ``depth``.
    """

    document_bytes: int = 16 * 1024 * 1024  # a definition or solution file
    line_bytes: int = 4 * 1024 * 1024  # one line of a .jsonl file
    blob_bytes: int = 512 * 1024 * 1024  # one safetensors file
    depth: int = canon.MAX_DEPTH


#: The caps ``read_dataset`` and ``import_flashinfer_bench`` apply unless given others.
DEFAULT_LIMITS = Limits()


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class Skipped:
    """A source item that was not imported: where it is, what it would have been, why."""

    file: str
    line: int | None
    kind: str
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class MissingBlob:
    """A safetensors file the dataset names but does not hold."""

    path: str
    inputs: int  # how many workload inputs name it
    workloads: tuple[str, ...]  # names of the workloads that do


@dataclass(frozen=True, slots=True)
class Outcome:
    """One record of the import and whether it is new to the registry."""

    record: StoredRecord
    new: bool


@dataclass
class Dataset:
    """Everything read from a dataset folder, before anything is stored."""

    root: Path
    records: dict[str, StoredRecord] = field(default_factory=dict)  # digest -> record, in import order
    blobs: dict[str, bytes] = field(default_factory=dict)  # digest -> bytes
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    missing_blobs: list[MissingBlob] = field(default_factory=list)
    #: names of the dataset's Definitions that no workload of the dataset names
    definitions_without_workloads: list[str] = field(default_factory=list)

    def by_kind(self, kind: str) -> list[StoredRecord]:
        return [record for record in self.records.values() if record.kind == kind]


@dataclass
class ImportReport:
    """What ``import_flashinfer_bench`` did (or, for a dry run, would do)."""

    source: Path
    registry: Path
    dry_run: bool
    outcomes: list[Outcome]
    skipped: list[Skipped]
    notes: list[str]
    missing_blobs: list[MissingBlob]
    blobs_new: int
    blobs_present: int
    #: names of the dataset's Definitions that arrived with no workload (nothing to bench them on yet)
    definitions_without_workloads: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing was skipped."""
        return not self.skipped

    def counts(self) -> dict[str, dict[str, int]]:
        """Per kind: how many records are new, already present, or were skipped."""
        table = {kind: {"new": 0, "present": 0, "skipped": 0} for kind in KINDS}
        for outcome in self.outcomes:
            table[outcome.record.kind]["new" if outcome.new else "present"] += 1
        for item in self.skipped:
            table[item.kind]["skipped"] += 1
        return table

    def to_json(self) -> dict[str, Any]:
        """The report as one JSON document (``kictl import flashinfer-bench --json``)."""
        return {
            "source": str(self.source),
            "registry": str(self.registry),
            "dryRun": self.dry_run,
            "counts": self.counts(),
            "blobs": {
                "new": self.blobs_new,
                "present": self.blobs_present,
                "missing": len(self.missing_blobs),
            },
            "records": [
                {
                    "digest": outcome.record.digest,
                    "kind": outcome.record.kind,
                    "name": outcome.record.name,
                    "new": outcome.new,
                }
                for outcome in self.outcomes
            ],
            "skipped": [
                {"file": item.file, "line": item.line, "kind": item.kind, "message": item.message}
                for item in self.skipped
            ],
            "missingBlobs": [
                {"path": blob.path, "inputs": blob.inputs, "workloads": list(blob.workloads)}
                for blob in self.missing_blobs
            ],
            "definitionsWithoutWorkloads": list(self.definitions_without_workloads),
            "notes": list(self.notes),
        }


def family_for_op_type(op_type: str, definition_name: str = "") -> str:
    """The index's family for a FlashInfer ``op_type`` (DESIGN §3).

    Known op types map onto the index's names (``gqa_paged`` ->
    ``gqa-paged-attention``).  The 2025 shape's coarser ``type`` (``gqa``) is
    refined by the definition's name when that name starts with a known op
    type (``gqa_paged_decode_…`` -> ``gqa-paged-attention``).  Anything else is
    kept, with ``_`` turned into ``-``.
    """
    if op_type in OP_TYPE_FAMILIES:
        return OP_TYPE_FAMILIES[op_type]
    for known, family in OP_TYPE_FAMILIES.items():
        if known.startswith(op_type + "_") and definition_name.startswith(known + "_"):
            return family
    return op_type.replace("_", "-").lower()
