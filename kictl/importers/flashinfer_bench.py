"""Importing a FlashInfer Trace dataset (flashinfer-bench) as registry records (issue 6, DESIGN §3).

A FlashInfer Trace dataset is a folder of JSON documents linked by name:

``definitions/**/*.json``
    one Definition each: axes, inputs, outputs, the reference ``run`` and the
    family under ``op_type`` (the 2025 shape names it ``type``).
``solutions/**/*.json``
    one Solution each: an implementation of a definition with its sources.
``workloads/**/*.jsonl`` and ``traces/**/*.jsonl``
    one Trace object a line: ``{definition, workload, solution, evaluation}``.
    A line without an evaluation (``null`` or ``{}``, with ``solution`` null or
    ``""``) only declares a workload; a line with one is a benchmark result.

Every definition becomes a Definition, every workload a Workload (named by
the source's ``uuid``, kept in ``spec.uuid`` too), every solution an
Implementation, every distinct evaluation environment an
ExecutionEnvironment, and every evaluated line a BenchmarkRun measured under
one BenchmarkProtocol that describes the harness.  The 2025 shape differs:
trace lines carry no workload ``uuid`` (they are matched to the workload lines
of the same definition by axes and inputs), evaluations name the GPU under
``environment.device`` and keep a ``log_file``, timestamps carry no zone
(read as UTC, and each run says so in ``statusDetail``), and traces name a
solution ``<definition>_<label>`` where its file says ``<label>_<definition>``.

Safetensors inputs are copied into ``registry/blobs/`` by digest when the
dataset holds the file; when it does not, the input keeps the source's
``path`` and tensor key with ``missing: true``, so workloads whose blobs
differ stay distinct, and the report lists the missing files.

The dataset is untrusted input, read defensively (``Limits``): a symlink
that leads outside the dataset is never followed (its file or folder is
reported and skipped), documents, lines and blobs have size caps, JSON deeper
than ``canon.MAX_DEPTH`` levels and numbers out of range are per-item errors,
and no item can stop the rest of the import.  A Definition whose name the
registry already gives to another Definition is refused (unless
``allow_redefinition``), because two records of one name make the name
ambiguous everywhere the CLI takes it.

Reading is separate from writing: ``read_dataset`` builds every record and
reports each item it had to skip as ``file:line: message``;
``import_flashinfer_bench`` then stores the records and blobs in one
transaction (or, with ``dry_run``, only says which ones are new).  Records are
built from the source alone, so importing a dataset twice adds nothing.

Format reference: the flashinfer-bench documentation of the FlashInfer Trace
schema (Definition, Workload, Solution, Trace) and its ``flashinfer_bench.data``
models.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kictl import blobs, canon, families
from kictl.errors import KictlError, RecordError, UsageError
from kictl.families.gpus import find_gpu, normalize_product
from kictl.records import (
    API_VERSION,
    KINDS,
    DefinitionSpec,
    StoredRecord,
    format_timestamp,
    record_from_value,
)
from kictl.store import ATTESTATIONS_DIR, BLOBS_DIR, RECORDS_DIR, Registry, Transaction

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
    *("name", "op_type", "type", "description", "tags"),
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
            "notes": list(self.notes),
        }


# --------------------------------------------------------------------------- public entry points


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


def read_dataset(
    root: Path,
    *,
    limits: Limits = Limits(),
    taken_names: Mapping[str, list[StoredRecord]] | None = None,
) -> Dataset:
    """Read a FlashInfer Trace dataset folder into records, without touching any registry.

    ``taken_names`` maps Definition names to the Definitions a registry
    already gives them; a definition of one of those names whose digest is
    none of theirs is skipped (see ``import_flashinfer_bench``).  Items that cannot be imported
    are listed in ``Dataset.skipped``; nothing is raised for bad content.
    Raises ``UsageError`` when ``root`` is not a folder holding
    ``definitions/``, ``solutions/``, ``workloads/`` or ``traces/``.
    """
    if not root.is_dir():
        raise UsageError(f"{root}: no such folder (expected a FlashInfer Trace dataset)")
    folders = ("definitions", "solutions", "workloads", "traces")
    if not any((root / folder).is_dir() for folder in folders):
        raise UsageError(f"{root} is not a FlashInfer Trace dataset (it has none of {', '.join(folders)}/)")
    reader = _Reader(root, limits, taken_names or {})
    reader.read()
    return reader.dataset


def import_flashinfer_bench(
    registry: Registry,
    root: Path,
    *,
    dry_run: bool = False,
    allow_redefinition: bool = False,
    limits: Limits = Limits(),
) -> ImportReport:
    """Import the dataset at ``root`` into ``registry``; all records in one transaction.

    With ``dry_run`` nothing is written and the report says which records and
    blobs would be new.  Skipped items are reported, not raised (the CLI turns
    them into exit 1).  A dataset definition whose name the registry already
    gives to a Definition with another digest is skipped, and so is what
    depends on it, unless ``allow_redefinition`` (then it is stored as another
    Definition of that name).  Temporary files that a killed writer left in
    the registry are removed first (``sweep_stale_temporaries``).  Raises
    ``UsageError`` for a folder that is no dataset and ``RegistryError`` when
    the registry cannot be written (then nothing of this import is left behind).
    """
    taken = {} if allow_redefinition else registry_definitions(registry)
    dataset = read_dataset(root, limits=limits, taken_names=taken)
    records = sorted(dataset.records.values(), key=lambda record: KINDS.index(record.kind))
    blob_new = {digest: not registry.blob_path(digest).is_file() for digest in dataset.blobs}
    if dry_run:
        new = {record.digest: not registry.record_path(record.kind, record.digest).is_file() for record in records}
    else:
        swept, young = sweep_stale_temporaries(registry)
        if swept:
            dataset.notes.append(f"removed {len(swept)} temporary file(s) left in the registry by an interrupted write")
        if young:
            dataset.notes.append(
                f"{len(young)} temporary file(s) in the registry are younger than {STALE_TEMPORARY_S:.0f} s and "
                "were left in place (another kictl may be writing); `kictl validate` reports them until a "
                "later import removes them"
            )
        with Transaction() as transaction:
            for data in dataset.blobs.values():
                registry.add_blob(data, transaction=transaction)
            results = registry.add(records, transaction=transaction)
        new = {result.record.digest: result.created for result in results}
    return ImportReport(
        source=root,
        registry=registry.root,
        dry_run=dry_run,
        outcomes=[Outcome(record=record, new=new[record.digest]) for record in records],
        skipped=dataset.skipped,
        notes=dataset.notes,
        missing_blobs=dataset.missing_blobs,
        blobs_new=sum(blob_new.values()),
        blobs_present=len(blob_new) - sum(blob_new.values()),
    )


def registry_definitions(registry: Registry) -> dict[str, list[StoredRecord]]:
    """Definition name -> the Definitions of that name in ``registry`` (more than one after a redefinition).

    A record file that cannot be read is passed over here; ``kictl validate``
    is the command that reports it.
    """
    names: dict[str, list[StoredRecord]] = {}
    for _, path in registry.record_files(["Definition"]):
        try:
            record = registry.read_record(path)
        except KictlError:
            continue
        names.setdefault(record.name, []).append(record)
    return names


def sweep_stale_temporaries(
    registry: Registry, *, older_than: float = STALE_TEMPORARY_S
) -> tuple[list[Path], list[Path]]:
    """Remove the store's temporary files (``.<name>.<random>.tmp``) that a killed writer left behind.

    ``kictl.store.write_atomic`` writes a temporary file beside its target
    and renames it; ``kill -9`` between the two leaves the temporary file, and
    ``kictl validate`` then refuses the registry.  Only files under
    ``registry/records/``, ``registry/blobs/`` and ``registry/attestations/``
    with that name pattern are considered; those last modified more than
    ``older_than`` seconds ago are removed (a live write renames its file
    within moments), younger ones are left in place.  Returns ``(removed,
    left in place)``.
    """
    removed: list[Path] = []
    young: list[Path] = []
    now = time.time()
    for folder in (RECORDS_DIR, BLOBS_DIR, ATTESTATIONS_DIR):
        top = registry.root / folder
        for dirpath, _, filenames in os.walk(top):
            for name in filenames:
                if not (name.startswith(".") and name.endswith(".tmp")):
                    continue
                path = Path(dirpath) / name
                try:
                    info = path.lstat()
                    if now - info.st_mtime < older_than:
                        young.append(path)
                        continue
                    path.unlink()
                except OSError:
                    continue
                removed.append(path)
    return removed, young


# --------------------------------------------------------------------------- source values


class _Skip(Exception):
    """An item of the source that cannot be imported; the message says why."""


def _load_json(text: str, depth: int = canon.MAX_DEPTH) -> Any:
    """A source document: duplicate keys are errors; NaN and Infinity literals are read as floats.

    Python's ``json`` writes NaN and Infinity as bare literals, so traces
    written by it carry them; they become ``null`` in the records.  JSON
    nested deeper than ``depth`` and integer literals of more than
    ``MAX_INTEGER_DIGITS`` digits are refused before they can cost a deep
    recursion or a quadratic conversion.
    """
    if canon.nested_deeper_than(text, depth):
        raise _Skip(f"not JSON kictl reads: arrays and objects nested deeper than {depth} levels")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)
        if len(obj) != len(items):
            seen: set[str] = set()
            for key, _ in items:
                if key in seen:
                    raise _Skip(f"duplicate key {json.dumps(key)}")
                seen.add(key)
        return obj

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=float, parse_int=_source_int)
    except json.JSONDecodeError as exc:
        where = f"column {exc.colno}" if exc.lineno == 1 else f"line {exc.lineno}, column {exc.colno}"
        raise _Skip(f"not JSON: {exc.msg} ({where})") from exc
    except RecursionError as exc:
        raise _Skip("not JSON: nested too deeply") from exc


def _source_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INTEGER_DIGITS:
        raise _Skip(f"not JSON kictl reads: an integer literal of {digits} digits ({text[:12]}…) is out of range")
    return int(text)


def _path(*parts: str | int) -> str:
    return canon.format_path(tuple(parts))


def _object(value: Any, *where: str | int) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Skip(f"{_path(*where)}: expected an object, found {_type_name(value)}")
    return value


def _string(value: Any, *where: str | int) -> str:
    if not isinstance(value, str) or not value:
        raise _Skip(f"{_path(*where)}: expected a non-empty string, found {_type_name(value)}")
    return value


def _number(value: Any, *where: str | int) -> float:
    """A finite or non-finite number; ``"NaN"``/``"Infinity"`` strings are numbers here."""
    if isinstance(value, str) and value in _NON_FINITE_STRINGS:
        return _NON_FINITE_STRINGS[value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Skip(f"{_path(*where)}: expected a number, found {_type_name(value)}")
    return float(value)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _describe_non_finite(value: float) -> str:
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def _build(kind: str, name: str, spec: dict[str, Any], title: str | None = None) -> StoredRecord:
    metadata: dict[str, Any] = {"name": name}
    if title is not None:
        metadata["title"] = title
    raw = {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}
    try:
        return record_from_value(raw, source=f"{kind} record")
    except RecordError as exc:
        raise _Skip(exc.message) from exc


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Skip(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _unexpected(exc: BaseException) -> str:
    """The one-line report of an error no check anticipated (never a traceback, never an abort)."""
    if isinstance(exc, RecursionError):
        return "cannot be imported: nested too deeply"
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"cannot be imported: {type(exc).__name__}: {text[:200]}"


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- the reader


@dataclass
class _Definition:
    record: StoredRecord
    spec: DefinitionSpec
    file: str


@dataclass
class _Solution:
    record: StoredRecord
    definition: str
    file: str


@dataclass
class _Line:
    file: str
    number: int
    value: dict[str, Any]
    definition: str


@dataclass
class _PendingWorkload:
    """A workload built from a line, not stored yet, with what storing it brings along."""

    definition: str
    record: StoredRecord | None = None
    uuid: str | None = None
    key: bytes = b""  # canonical bytes of the source's {axes, inputs}
    absent: set[str] = field(default_factory=set)  # definition inputs the source gives no source for
    blobs: dict[str, bytes] = field(default_factory=dict)
    missing: list[tuple[str, str]] = field(default_factory=list)  # (source path, input name)
    matched: bool = False  # an already stored workload (the 2025 match): nothing to store
    unmatched: bool = False  # a 2025 trace workload that matched no workload line


class _Reader:
    """Reads one dataset folder; ``dataset`` holds the records and the report."""

    def __init__(self, root: Path, limits: Limits, taken_names: Mapping[str, list[StoredRecord]]) -> None:
        self.root = root
        self.real_root = root.resolve()
        self.limits = limits
        self.taken_names = taken_names
        self.refused_definitions: dict[str, str] = {}  # name -> the file of a definition refused for its name
        self.dataset = Dataset(root=root)
        self.definitions: dict[str, _Definition] = {}
        self.solutions: dict[str, _Solution] = {}
        self.workloads_by_content: dict[tuple[str, bytes], list[StoredRecord]] = {}
        self.blob_cache: dict[Path, tuple[bytes, dict[str, blobs.TensorEntry]]] = {}
        self.missing: dict[str, dict[tuple[str, str], None]] = {}  # path -> {(workload, input)}
        self.solution_without_evaluation = 0
        self.aliases: dict[str, str] = {}
        self.dropped: dict[str, set[str]] = {}
        self.naive_timestamps = 0
        self.non_finite_runs = 0
        self.unmatched_workloads = 0
        self.incomplete_inputs: dict[str, set[str]] = {}
        self.workload_by_uuid: dict[tuple[str, str], str] = {}  # (definition, uuid) -> digest
        self.redescribed: set[tuple[str, str]] = set()
        self.protocol = self._protocol()

    # ----------------------------------------------------------------- driver

    def read(self) -> None:
        for path in self._files("definitions", "*.json"):
            self._guard(path, "Definition", self._definition_file)
        for path in self._files("solutions", "*.json"):
            self._guard(path, "Implementation", self._solution_file)
        workload_lines: list[_Line] = []
        trace_lines: list[_Line] = []
        for path in (*self._files("workloads", "*.jsonl"), *self._files("traces", "*.jsonl")):
            for line in self._lines(path):
                (trace_lines if self._evaluated(line.value) else workload_lines).append(line)
        for line in workload_lines:
            self._guard_line(line, "Workload", self._workload_line)
        for line in trace_lines:
            self._guard_line(line, "BenchmarkRun", self._trace_line)
        self._finish_notes()
        rank = {folder: index for index, folder in enumerate(("definitions", "solutions", "workloads", "traces"))}
        self.dataset.skipped.sort(key=lambda item: (rank.get(item.file.split("/")[0], 4), item.file, item.line or 0))

    def _files(self, folder: str, pattern: str) -> list[Path]:
        """The documents of one top folder, sorted; symlinks are followed only inside the dataset.

        A symlinked file or folder whose target lies outside the dataset is
        reported as skipped and never read; a symlinked folder inside it is
        not descended into (what it points to is read where it lies).
        Anything that is not a regular file (a FIFO, a device) is skipped.
        """
        suffix = pattern.removeprefix("*")
        kind = _FOLDER_KINDS[folder]
        base = self.root / folder
        if base.is_symlink() and not self._inside(base):
            self._skip_path(base, kind, "a symlink that leads outside the dataset; not read")
            return []
        if not base.is_dir():
            return []
        found: list[Path] = []
        for dirpath, dirnames, filenames in os.walk(base):
            here = Path(dirpath)
            for name in sorted(dirnames):
                path = here / name
                if path.is_symlink():
                    if self._inside(path):
                        self.dataset.notes.append(f"{self._relative(path)}: a symlinked folder; not followed")
                    else:
                        self._skip_path(path, kind, "a symlinked folder that leads outside the dataset; not read")
            for name in filenames:
                if not name.endswith(suffix):
                    continue
                path = here / name
                if path.is_symlink() and not self._inside(path):
                    self._skip_path(path, kind, "a symlink that leads outside the dataset; not read")
                elif not path.is_file():
                    self._skip_path(path, kind, "not a regular file; not read")
                else:
                    found.append(path)
        return sorted(found)

    def _inside(self, path: Path) -> bool:
        """Whether ``path``, every symlink in it resolved, lies inside the dataset."""
        try:
            return path.resolve().is_relative_to(self.real_root)
        except (OSError, RuntimeError):  # a symlink loop
            return False

    def _skip_path(self, path: Path, kind: str, message: str) -> None:
        self.dataset.skipped.append(Skipped(self._relative(path), None, kind, message))

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def _guard(self, path: Path, kind: str, action: Callable[[Path], None]) -> None:
        """Read one document; a failure skips it and is reported as ``file: message``."""
        try:
            action(path)
        except _Skip as exc:
            self.dataset.skipped.append(Skipped(self._relative(path), None, kind, str(exc)))
        except RecordError as exc:  # text JCS cannot hold (lone surrogates), found while hashing
            self.dataset.skipped.append(Skipped(self._relative(path), None, kind, exc.message))
        except (RecursionError, OverflowError, ValueError) as exc:  # no item may stop the import
            self.dataset.skipped.append(Skipped(self._relative(path), None, kind, _unexpected(exc)))

    def _guard_line(self, line: _Line, kind: str, action: Callable[[_Line], None]) -> None:
        """Read one line; a failure skips it and is reported as ``file:line: message``."""
        try:
            action(line)
        except _Skip as exc:
            self.dataset.skipped.append(Skipped(line.file, line.number, kind, str(exc)))
        except RecordError as exc:  # text JCS cannot hold (lone surrogates), found while hashing
            self.dataset.skipped.append(Skipped(line.file, line.number, kind, exc.message))
        except (RecursionError, OverflowError, ValueError) as exc:  # no item may stop the import
            self.dataset.skipped.append(Skipped(line.file, line.number, kind, _unexpected(exc)))

    def _read_text(self, path: Path) -> str:
        """A whole document (a definition or a solution), at most ``limits.document_bytes``."""
        limit = self.limits.document_bytes
        try:
            with path.resolve().open("rb") as handle:  # resolved: checked to lie inside by _files
                data = handle.read(limit + 1)
        except OSError as exc:
            raise _Skip(f"cannot read: {exc.strerror}") from exc
        if len(data) > limit:
            raise _Skip(f"the file is over the limit of {limit} bytes; not read")
        return _decode(data)

    def _add(self, record: StoredRecord) -> StoredRecord:
        self.dataset.records.setdefault(record.digest, record)
        return record

    # ----------------------------------------------------------------- definitions

    def _definition_file(self, path: Path) -> None:
        value = _object(_load_json(self._read_text(path)))
        name = _string(value.get("name"), "name")
        op_type = value.get("op_type", value.get("type"))
        if op_type is None:
            raise _Skip("$: no op_type (nor the 2025 shape's type) names the family")
        op_type = _string(op_type, "op_type" if "op_type" in value else "type")
        spec: dict[str, Any] = {
            "name": name,
            "family": family_for_op_type(op_type, name),
            "axes": {
                axis: self._pick(_object(item, "axes", axis), _AXIS_MEMBERS, "definition", "axes")
                for axis, item in _object(value.get("axes"), "axes").items()
            },
            "inputs": self._tensors(value, "inputs"),
            "outputs": self._tensors(value, "outputs"),
            "reference": _string(value.get("reference"), "reference"),
        }
        for member in ("description", "constraints", "tags"):
            if value.get(member) is not None:
                spec[member] = value[member]
        self._note_dropped("definition", set(value) - _DEFINITION_MEMBERS)
        record = _build("Definition", name, spec)
        assert isinstance(record.model.spec, DefinitionSpec)
        registered = self.taken_names.get(name, [])
        if registered and all(known.digest != record.digest for known in registered):
            taken = registered[0]
            self.refused_definitions[name] = self._relative(path)
            theirs, ours = taken.raw["spec"], record.raw["spec"]
            differing = sorted(member for member in {*theirs, *ours} if theirs.get(member) != ours.get(member))
            raise _Skip(
                f"the registry already has a Definition named {name} ({taken.digest[:19]}…), which differs from "
                f"this one ({record.digest[:19]}…) in {', '.join(f'spec.{m}' for m in differing)}; "
                "two Definitions of one name make the name ambiguous, so neither this one nor anything of it "
                "is imported. Import into a scratch registry (docs/importing.md), or pass --allow-redefinition "
                "to add it as another version"
            )
        known = self.definitions.get(name)
        if known is not None:
            if known.record.digest == record.digest:
                return
            raise _Skip(f"definition {name} is already defined by {known.file} with other content")
        self.definitions[name] = _Definition(record, record.model.spec, self._relative(path))
        self._add(record)

    def _tensors(self, value: dict[str, Any], group: str) -> dict[str, Any]:
        return {
            tensor: self._pick(_object(item, group, tensor), _TENSOR_MEMBERS, "definition", group)
            for tensor, item in _object(value.get(group), group).items()
        }

    def _pick(self, item: dict[str, Any], members: tuple[str, ...], what: str, group: str) -> dict[str, Any]:
        """The members of an axis or tensor that the index keeps; others are noted as dropped."""
        self._note_dropped(what, {f"{group}.*.{member}" for member in set(item) - set(members)})
        return {
            member: item[member]
            for member in members
            if member in item and (item[member] is not None or member == "shape")
        }

    def _note_dropped(self, what: str, members: set[str]) -> None:
        if members:
            self.dropped.setdefault(what, set()).update(members)

    # ----------------------------------------------------------------- solutions

    def _solution_file(self, path: Path) -> None:
        value = _object(_load_json(self._read_text(path)))
        name = _string(value.get("name"), "name")
        definition_name = _string(value.get("definition"), "definition")
        definition = self.definitions.get(definition_name)
        if definition is None:
            raise _Skip(f"solution {name}: {self._no_definition(definition_name)}")
        build = _object(value.get("spec"), "spec")
        language = _string(build.get("language"), "spec", "language")
        sources = value.get("sources")
        if not isinstance(sources, list) or not sources:
            raise _Skip("$.sources: expected a non-empty array of {path, content}")
        files = []
        for index, item in enumerate(sources):
            item = _object(item, "sources", index)
            content = item.get("content")
            if not isinstance(content, str):
                raise _Skip(f"{_path('sources', index, 'content')}: expected a string")
            files.append(
                {"path": _string(item.get("path"), "sources", index, "path"), "sha256": _sha256_text(content),
                 "content": content}
            )  # fmt: skip
        spec: dict[str, Any] = {
            "name": name,
            "definitionDigest": definition.record.digest,
            "runtime": language.lower(),
            "entryPoint": _string(build.get("entry_point"), "spec", "entry_point"),
            "sources": files,
            "availability": "source",
        }
        dependencies = self._dependencies(build.get("dependencies"))
        if dependencies is not None:
            spec["dependencies"] = dependencies
        if value.get("author") is not None:
            spec["author"] = _string(value["author"], "author")
        if value.get("description") is not None:
            spec["description"] = value["description"]
        if build.get("target_hardware") is not None:
            spec["targetHardware"] = build["target_hardware"]
        if build.get("build_commands") is not None:
            spec["buildCommands"] = build["build_commands"]
        self._note_dropped("solution", set(value) - _SOLUTION_MEMBERS)
        self._note_dropped("solution", {f"spec.{member}" for member in set(build) - _SOLUTION_SPEC_MEMBERS})
        record = _build("Implementation", name, spec, title=f"{name} ({language.lower()}) for {definition_name}")
        known = self.solutions.get(name)
        if known is not None:
            if known.record.digest == record.digest:
                return
            raise _Skip(f"solution {name} is already defined by {known.file} with other content")
        self.solutions[name] = _Solution(record, definition_name, self._relative(path))
        self._add(record)

    @staticmethod
    def _dependencies(value: Any) -> dict[str, str] | None:
        """``["torch", "triton >= 2.4.0"]`` -> ``{"torch": "*", "triton": ">= 2.4.0"}``."""
        if value is None:
            return None
        if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            return {str(key): version for key, version in value.items()}
        if not isinstance(value, list):
            raise _Skip("$.spec.dependencies: expected an array of strings")
        out: dict[str, str] = {}
        for index, item in enumerate(value):
            match = _DEPENDENCY_RE.match(item) if isinstance(item, str) else None
            if match is None:
                raise _Skip(f"{_path('spec', 'dependencies', index)}: expected a package and an optional version")
            out[match.group(1)] = match.group(2) or "*"
        return out

    # ----------------------------------------------------------------- lines

    def _lines(self, path: Path) -> Iterator[_Line]:
        label = self._relative(path)
        for number, raw in self._raw_lines(path, label):
            if isinstance(raw, _Skip):
                self.dataset.skipped.append(Skipped(label, number, self._kind_of_line(label, ""), str(raw)))
                continue
            if not raw.strip():
                continue
            try:
                value = _object(_load_json(raw, self.limits.depth))
                definition = _string(value.get("definition"), "definition")
                _object(value.get("workload"), "workload")
            except _Skip as exc:
                self.dataset.skipped.append(Skipped(label, number, self._kind_of_line(label, raw), str(exc)))
                continue
            yield _Line(label, number, value, definition)

    def _raw_lines(self, path: Path, label: str) -> Iterator[tuple[int, str | _Skip]]:
        """``(number, text)`` of each line, read one at a time; a line over the cap or not UTF-8 is a ``_Skip``."""
        limit = self.limits.line_bytes
        try:
            handle = path.resolve().open("rb")  # resolved: checked to lie inside by _files
        except OSError as exc:
            self.dataset.skipped.append(Skipped(label, None, self._kind_of_file(label), f"cannot read: {exc.strerror}"))
            return
        with handle:
            number = 0
            while True:
                try:
                    data = handle.readline(limit + 1)
                    if not data:
                        return
                    number += 1
                    if len(data) > limit and not data.endswith(b"\n"):
                        while data and not data.endswith(b"\n"):  # pass over the rest of the line
                            data = handle.readline(1024 * 1024)
                        yield number, _Skip(f"the line is over the limit of {limit} bytes; not read")
                        continue
                except OSError as exc:
                    self.dataset.skipped.append(
                        Skipped(label, number or None, self._kind_of_file(label), f"cannot read: {exc.strerror}")
                    )
                    return
                try:
                    yield number, _decode(data.rstrip(b"\r\n"))
                except _Skip as exc:
                    yield number, exc

    @staticmethod
    def _kind_of_file(label: str) -> str:
        return "Workload" if label.startswith("workloads/") or "/workloads/" in label else "BenchmarkRun"

    def _kind_of_line(self, label: str, raw: str) -> str:
        """What a line that does not parse was meant to be, for the counts."""
        if self._kind_of_file(label) == "Workload":
            return "Workload"
        return "Workload" if re.search(r'"evaluation"\s*:\s*(?:null|\{\s*\})', raw) else "BenchmarkRun"

    @staticmethod
    def _evaluated(value: dict[str, Any]) -> bool:
        evaluation = value.get("evaluation")
        return evaluation is not None and evaluation != {}

    def _definition_of(self, line: _Line) -> _Definition:
        definition = self.definitions.get(line.definition)
        if definition is None:
            raise _Skip(self._no_definition(line.definition))
        return definition

    def _no_definition(self, name: str) -> str:
        refused = self.refused_definitions.get(name)
        if refused is not None:
            return f"definition {name} was not imported: the registry has another Definition of that name ({refused})"
        return f"definition {name} is not in the dataset (or was skipped)"

    # ----------------------------------------------------------------- workloads

    def _workload_line(self, line: _Line) -> None:
        definition = self._definition_of(line)
        pending = self._build_workload(definition, line.value["workload"])
        self._commit_workload(pending)
        if line.value.get("solution") not in (None, ""):
            self.solution_without_evaluation += 1

    def _build_workload(self, definition: _Definition, source: dict[str, Any]) -> _PendingWorkload:
        """The Workload record of a source workload, and what storing it brings along."""
        uuid = source.get("uuid")
        if uuid is not None:
            uuid = _string(uuid, "workload", "uuid")
        axes = _object(source.get("axes"), "workload", "axes")
        inputs = _object(source.get("inputs"), "workload", "inputs")
        for axis, amount in axes.items():
            if isinstance(amount, bool) or not isinstance(amount, int):
                raise _Skip(f"{_path('workload', 'axes', axis)}: expected an integer, found {_type_name(amount)}")
        try:
            families.full_axes(definition.spec, axes, source="$.workload.axes")
        except RecordError as exc:
            raise _Skip(exc.message) from exc
        unknown = sorted(set(inputs) - set(definition.spec.inputs))
        if unknown:
            raise _Skip(f"{_path('workload', 'inputs', unknown[0])}: not an input of {definition.spec.name}")
        label = uuid if uuid is not None else "_".join(f"{axis}{amount}" for axis, amount in axes.items()) or "all"
        pending = _PendingWorkload(
            definition=definition.spec.name,
            uuid=uuid,
            key=_content_key(axes, inputs),
            absent=set(definition.spec.inputs) - set(inputs),
        )
        converted = {name: self._input(name, item, pending) for name, item in inputs.items()}
        spec: dict[str, Any] = {"definitionDigest": definition.record.digest, "axes": axes, "inputs": converted}
        if uuid is not None:
            spec["uuid"] = uuid
        title = f"{definition.spec.name}: " + (", ".join(f"{a}={v}" for a, v in axes.items()) or "no variable axes")
        pending.record = _build("Workload", label, spec, title=title)
        return pending

    def _commit_workload(self, pending: _PendingWorkload) -> StoredRecord:
        """Store a built workload with its blobs; index it for the 2025 match by axes and inputs."""
        record = pending.record
        assert record is not None
        if pending.matched:
            return record
        self._add(record)
        for digest, data in pending.blobs.items():
            self.dataset.blobs.setdefault(digest, data)
        for path_text, input_name in pending.missing:
            self.missing.setdefault(path_text, {})[(record.name, input_name)] = None
        if pending.absent:
            self.incomplete_inputs.setdefault(pending.definition, set()).update(pending.absent)
        if pending.uuid is not None:
            known = self.workload_by_uuid.setdefault((pending.definition, pending.uuid), record.digest)
            if known != record.digest:
                self.redescribed.add((pending.definition, pending.uuid))
        same = self.workloads_by_content.setdefault((pending.definition, pending.key), [])
        if all(known.digest != record.digest for known in same):
            same.append(record)
        if pending.unmatched:
            self.unmatched_workloads += 1
        return record

    def _input(self, name: str, item: Any, pending: _PendingWorkload) -> dict[str, Any]:
        item = _object(item, "workload", "inputs", name)
        kind = item.get("type")
        if kind == "random":
            return {"type": "random"}
        if kind == "scalar":
            value = item.get("value")
            if isinstance(value, float) and not math.isfinite(value):
                raise _Skip(f"{_path('workload', 'inputs', name, 'value')}: {_describe_non_finite(value)}")
            if not isinstance(value, bool | int | float):
                raise _Skip(f"{_path('workload', 'inputs', name, 'value')}: expected a number or a boolean")
            return {"type": "scalar", "value": value}
        if kind == "safetensors":
            path_text = _string(item.get("path"), "workload", "inputs", name, "path")
            key = _string(item.get("tensor_key"), "workload", "inputs", name, "tensor_key")
            return self._blob(path_text, key, name, pending)
        raise _Skip(f"{_path('workload', 'inputs', name, 'type')}: unknown input type {kind!r}")

    def _blob(self, path_text: str, key: str, name: str, pending: _PendingWorkload) -> dict[str, Any]:
        """A safetensors input: copied by digest when the dataset has the file, else kept as missing.

        The path is relative to the dataset's root (the flashinfer-bench
        ``SafetensorsInput``); a path that leads outside the dataset is never
        read and counts as missing.
        """
        root = self.root.resolve()
        resolved = (root / path_text).resolve()
        if not resolved.is_relative_to(root) or not resolved.is_file():
            pending.missing.append((path_text, name))
            return {"type": "blob", "key": key, "path": path_text, "missing": True}
        if resolved not in self.blob_cache:
            limit = self.limits.blob_bytes
            try:
                with resolved.open("rb") as handle:
                    data = handle.read(limit + 1)
            except OSError as exc:
                raise _Skip(f"{path_text}: cannot read: {exc.strerror}") from exc
            if len(data) > limit:
                raise _Skip(f"{path_text}: the file is over the limit of {limit} bytes; not read")
            try:
                header = blobs.read_header(data, source=path_text)
            except RecordError as exc:
                raise _Skip(exc.message) from exc
            self.blob_cache[resolved] = (data, header)
        data, header = self.blob_cache[resolved]
        if key not in header:
            raise _Skip(
                f"{_path('workload', 'inputs', name, 'tensor_key')}: {path_text} has no tensor {key!r} "
                f"(it has {', '.join(sorted(header)) or 'none'})"
            )
        digest = canon.bytes_digest(data)
        pending.blobs[digest] = data
        return {"type": "blob", "digest": digest, "key": key}

    def _trace_workload(self, definition: _Definition, line: _Line) -> _PendingWorkload:
        """The workload a trace line measured: its own uuid, else the 2025 match by axes and inputs."""
        source = line.value["workload"]
        if source.get("uuid") is not None:
            return self._build_workload(definition, source)
        key = _content_key(source.get("axes"), source.get("inputs"))
        matches = self.workloads_by_content.get((definition.spec.name, key), [])
        if len(matches) == 1:
            return _PendingWorkload(definition=definition.spec.name, record=matches[0], matched=True)
        if len(matches) > 1:
            uuids = ", ".join(record.name for record in matches)
            raise _Skip(f"$.workload: has no uuid and matches {len(matches)} workloads of {line.definition} ({uuids})")
        pending = self._build_workload(definition, source)
        pending.unmatched = True
        return pending

    # ----------------------------------------------------------------- traces

    def _trace_line(self, line: _Line) -> None:
        """A BenchmarkRun from an evaluated line; its workload and environment are stored with it."""
        definition = self._definition_of(line)
        value = line.value
        evaluation = _object(value.get("evaluation"), "evaluation")
        solution_name = value.get("solution")
        if not isinstance(solution_name, str) or not solution_name:
            raise _Skip("$.solution: an evaluation names no solution")
        solution, alias = self._solution(solution_name, line.definition)
        status_text = _string(evaluation.get("status"), "evaluation", "status")
        if status_text not in STATUSES:
            raise _Skip(f"$.evaluation.status: unknown status {status_text!r} (not a FlashInfer-Bench status)")
        status = STATUSES[status_text]
        details: list[str] = []
        observed_at, zone_given = self._observed_at(evaluation, details)
        environment = self._environment(evaluation)
        correctness = evaluation.get("correctness")
        if correctness is not None:
            correctness = self._correctness(_object(correctness, "evaluation", "correctness"), details)
        performance = evaluation.get("performance")
        metrics = None
        if performance is not None:
            metrics = self._metrics(_object(performance, "evaluation", "performance"), details)
        latency_ms = metrics.get("latency_ms") if metrics is not None else None
        if latency_ms is not None and latency_ms < 0:
            raise _Skip(f"$.evaluation.performance.latency_ms: negative ({latency_ms})")
        if latency_ms is not None and latency_ms * 1_000_000 > canon.MAX_SAFE_INTEGER:
            raise _Skip(
                f"$.evaluation.performance.latency_ms: {latency_ms!r} is out of range "
                f"(latencyNs holds at most {canon.MAX_SAFE_INTEGER} ns, about 104 days)"
            )
        if status == "passed" and latency_ms is None:
            raise _Skip("$.evaluation: PASSED without a finite performance.latency_ms")
        workload = self._trace_workload(definition, line)
        assert workload.record is not None
        spec: dict[str, Any] = {
            "status": status,
            "observedAt": observed_at,
            "definitionDigest": definition.record.digest,
            "workloadDigest": workload.record.digest,
            "implementationDigest": solution.record.digest,
            "protocolDigest": self.protocol.digest,
            "environmentDigest": environment.digest,
        }
        if correctness is not None:
            spec["correctness"] = correctness
        if latency_ms is not None:
            spec["timing"] = {
                "latencyNs": {"mean": round(latency_ms * 1_000_000)},
                "primaryStatistic": PRIMARY_STATISTIC,
            }
        native: dict[str, Any] = {
            "source": SOURCE,
            "benchmark": line.definition,
            "externalId": f"trace/{solution_name}/{workload.record.name}",
        }
        if metrics is not None:
            native["metrics"] = metrics
        spec["sourceNative"] = native
        if details:
            spec["statusDetail"] = "; ".join(details)
        product = environment.raw["spec"]["hardware"]["product"]
        title = f"{solution.record.name} on {workload.record.title or workload.record.name} ({product})"
        run = _build("BenchmarkRun", f"{solution.record.name}/{workload.record.name}", spec, title=title)
        # nothing below can fail: the line's records are stored together or not at all
        self._commit_workload(workload)
        self._add(environment)
        self._add(self.protocol)
        self._add(run)
        if alias is not None:
            self.aliases[solution_name] = alias
        self.naive_timestamps += not zone_given
        self.non_finite_runs += any("is null" in detail for detail in details)

    def _solution(self, name: str, definition: str) -> tuple[_Solution, str | None]:
        """The solution a trace names, and the file's name when the trace used the 2025 alias.

        The 2025 shape's traces call a solution ``<definition>_<label>`` where
        its file names it ``<label>_<definition>``.
        """
        found = self.solutions.get(name)
        alias = None
        if found is None and name.startswith(definition + "_"):
            alias = f"{name[len(definition) + 1 :]}_{definition}"
            found = self.solutions.get(alias)
        if found is None:
            raise _Skip(f"$.solution: solution {name} is not in the dataset (or was skipped)")
        if found.definition != definition:
            raise _Skip(f"$.solution: solution {found.record.name} implements {found.definition}, not {definition}")
        return found, alias

    def _observed_at(self, evaluation: dict[str, Any], details: list[str]) -> tuple[str, bool]:
        """The run's observedAt and whether the source gave a time zone (else UTC is assumed and said)."""
        text = _string(evaluation.get("timestamp"), "evaluation", "timestamp")
        try:
            moment = datetime.fromisoformat(text)
        except ValueError as exc:
            raise _Skip(f"$.evaluation.timestamp: not an ISO 8601 date and time: {text!r}") from exc
        zone_given = moment.tzinfo is not None
        if not zone_given:
            details.append(f"observedAt: the source's timestamp {text} has no time zone; read as UTC")
            moment = moment.replace(tzinfo=UTC)
        return format_timestamp(moment), zone_given

    def _correctness(self, correctness: dict[str, Any], details: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {"comparator": COMPARATOR}
        for source_name, member in (
            ("max_absolute_error", "maximumAbsoluteError"),
            ("max_relative_error", "maximumRelativeError"),
        ):
            if source_name not in correctness:
                continue
            raw = correctness[source_name]
            if raw is None:
                out[member] = None
                details.append(f"{member} is null: the source gives no {source_name}")
                continue
            number = _number(raw, "evaluation", "correctness", source_name)
            if not math.isfinite(number):
                out[member] = None
                details.append(f"{member} is null: the source reports {source_name} {_describe_non_finite(number)}")
            elif number < 0:
                raise _Skip(f"$.evaluation.correctness.{source_name}: negative ({number})")
            else:
                out[member] = number
        return out

    def _metrics(self, performance: dict[str, Any], details: list[str]) -> dict[str, float | None]:
        metrics: dict[str, float | None] = {}
        for name in METRICS:
            if name not in performance:
                continue
            raw = performance[name]
            if raw is None:
                metrics[name] = None
                continue
            number = _number(raw, "evaluation", "performance", name)
            if math.isfinite(number):
                metrics[name] = number
            else:
                metrics[name] = None
                details.append(
                    f"sourceNative.metrics.{name} is null: the source reports {_describe_non_finite(number)}"
                )
        return metrics

    # ----------------------------------------------------------------- protocol and environment

    @staticmethod
    def _protocol() -> StoredRecord:
        spec = {
            "harness": {"name": SOURCE, "repository": HARNESS_REPOSITORY},
            "correctness": {"reference": CORRECTNESS_REFERENCE, "comparator": COMPARATOR},
            "measurement": {"timer": TIMER, "primaryStatistic": PRIMARY_STATISTIC},
            "comparability": {"family": COMPARABILITY_FAMILY},
        }
        return _build("BenchmarkProtocol", PROTOCOL_NAME, spec, title="FlashInfer-Bench trace evaluation")

    def _environment(self, evaluation: dict[str, Any]) -> StoredRecord:
        environment = _object(evaluation.get("environment"), "evaluation", "environment")
        member = "hardware" if "hardware" in environment else "device"
        device = _string(environment.get(member), "evaluation", "environment", member)
        libs_value = environment.get("libs", {})
        libs = _object(libs_value if libs_value is not None else {}, "evaluation", "environment", "libs")
        versions: dict[str, str] = {}
        for lib, version in libs.items():
            if isinstance(version, bool) or not isinstance(version, str | int | float):
                raise _Skip(f"{_path('evaluation', 'environment', 'libs', lib)}: expected a version string")
            versions[lib] = str(version)
        product = normalize_product(device.replace("_", " "))
        known = find_gpu(product)
        hardware: dict[str, Any] = {"product": product}
        if known is not None:
            hardware["vendor"] = known.vendor
            hardware["architecture"] = known.architecture
        elif device.upper().startswith("NVIDIA"):
            hardware["vendor"] = "NVIDIA"
        software: dict[str, Any] = {}
        if "torch" in versions:
            software["framework"] = {"name": "pytorch", "version": versions["torch"]}
        if "cuda" in versions:
            software["cudaToolkit"] = versions["cuda"]
        others = {lib: version for lib, version in versions.items() if lib not in ("torch", "cuda")}
        if others:
            software["libraries"] = others
        parts = [product.replace(" ", "-")]
        parts += [f"torch-{versions['torch']}"] if "torch" in versions else []
        parts += [f"cuda-{versions['cuda']}"] if "cuda" in versions else []
        name = "_".join(parts).replace(" ", "-")
        return _build("ExecutionEnvironment", name, {"hardware": hardware, "software": software})

    # ----------------------------------------------------------------- notes

    def _finish_notes(self) -> None:
        notes = self.dataset.notes
        for trace_name, solution_name in sorted(self.aliases.items()):
            notes.append(f"traces name solution {solution_name} as {trace_name} (2025 shape); matched")
        if self.naive_timestamps:
            notes.append(
                f"{self.naive_timestamps} trace timestamp(s) carry no time zone; read as UTC "
                "(each run says so in statusDetail)"
            )
        if self.non_finite_runs:
            notes.append(
                f"{self.non_finite_runs} run(s) hold null where the source gives NaN, Infinity or nothing "
                "(each run says which in statusDetail)"
            )
        if self.unmatched_workloads:
            notes.append(
                f"{self.unmatched_workloads} trace line(s) without a workload uuid match no workload line; "
                "their workloads are named by their axes"
            )
        for definition, uuid in sorted(self.redescribed):
            notes.append(f"workload {uuid} of {definition} is described differently by two lines; both are kept")
        for definition, absent in sorted(self.incomplete_inputs.items()):
            notes.append(f"workloads of {definition} give no source for input(s) {', '.join(sorted(absent))}")
        for what, members in sorted(self.dropped.items()):
            notes.append(f"{what} member(s) the index does not keep: {', '.join(sorted(members))}")
        if self.solution_without_evaluation:
            notes.append(
                f"{self.solution_without_evaluation} line(s) name a solution but carry no evaluation; "
                "imported as workloads only"
            )
        for path_text, uses in self.missing.items():
            workloads = tuple(dict.fromkeys(workload for workload, _ in uses))
            self.dataset.missing_blobs.append(MissingBlob(path=path_text, inputs=len(uses), workloads=workloads))
        if self.missing:
            inputs = sum(blob.inputs for blob in self.dataset.missing_blobs)
            notes.append(
                f"{len(self.missing)} safetensors file(s) named by {inputs} input(s) are not in the dataset; "
                "those inputs are kept with their path and missing: true"
            )


def _content_key(axes: Any, inputs: Any) -> bytes:
    """What identifies a workload without a uuid: its source axes and inputs, canonicalised."""
    try:
        return canon.canonical_bytes(_sanitised({"axes": axes, "inputs": inputs}))
    except RecordError as exc:
        raise _Skip(f"$.workload: {exc.message}") from exc


def _sanitised(value: Any) -> Any:
    """A source value with non-finite numbers spelled as strings, so that it can be canonicalised."""
    if isinstance(value, dict):
        return {key: _sanitised(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_sanitised(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return _describe_non_finite(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > canon.MAX_SAFE_INTEGER:
        return str(value)
    return value
