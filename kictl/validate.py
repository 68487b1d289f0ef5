"""Checking a registry: names, normal form, schema, references, definitions.

``check_record_file`` judges one record file from its path and bytes alone,
so that ``kictl validate`` (the working tree) and ``kictl review`` (files at a
git revision) apply the same rules.  ``validate_registry`` runs every check
over a registry checkout and returns every problem found, as
``path: message`` lines; it raises nothing for bad content.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kictl import canon, definitions, layout
from kictl.errors import KictlError, RecordError
from kictl.records import KINDS, StoredRecord, load_record_file
from kictl.store.files import is_temporary_name
from kictl.store.registry import Registry


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong, at one path (relative to the registry root)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.message else self.path


@dataclass
class Report:
    """What ``validate_registry`` found."""

    problems: list[Problem] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # printed on stderr by `kictl validate`

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document of ``kictl validate``."""
        return {
            "ok": self.ok,
            "counts": self.counts,
            "problems": [{"path": p.path, "message": p.message} for p in self.problems],
        }


#: Size caps per file (docs/review.md "Limits"): a record, an envelope (DSSE with one statement), a blob.
MAX_RECORD_BYTES = 8 * 1024 * 1024
MAX_ENVELOPE_BYTES = 1024 * 1024
MAX_BLOB_BYTES = 64 * 1024 * 1024


def _too_big(path: str, size: int, cap: int, what: str) -> Problem | None:
    if size <= cap:
        return None
    return Problem(path, f"is {size} bytes; {what} is at most {cap} bytes ({cap // (1024 * 1024)} MiB)")


def check_record_file(path: str, data: bytes) -> tuple[StoredRecord | None, list[Problem]]:
    """Judge one file under ``registry/records/`` by its path and bytes.

    The path must be ``registry/records/<kind>/<hex[0:2]>/<hex>.json`` with the
    record's own kind and digest, and the bytes the normal form (docs/records.md).
    """
    problems: list[Problem] = []
    named = layout.parse_record_path(path)
    if named is None:
        problems.append(Problem(path, f"not a record path ({layout.RECORD_PATTERN})"))
    big = _too_big(path, len(data), MAX_RECORD_BYTES, "a record")
    if big is not None:
        return None, [*problems, big]
    try:
        record, is_normal = load_record_file(data, source=path)
    except RecordError as exc:
        problems.append(Problem(path, exc.at(path)))
        problems.extend(Problem(path, line) for line in exc.details_at(path))
        return None, problems
    if not is_normal:
        problems.append(
            Problem(path, "bytes are not in normal form (JCS order, two-space indent, one trailing newline)")
        )
    if named is not None:
        kind, digest = named
        if digest != record.digest:
            problems.append(Problem(path, f"file name is not the record's digest {record.digest}"))
        if kind != record.kind:
            problems.append(Problem(path, f"a {record.kind} filed under {kind}/"))
    return record, problems


def check_blob_file(path: str, data: bytes) -> list[Problem]:
    """A blob's name is the sha256 of its bytes, under its two-digit shard."""
    digest = layout.parse_blob_path(path)
    if digest is None:
        return [Problem(path, f"not a blob path ({layout.BLOB_PATTERN})")]
    big = _too_big(path, len(data), MAX_BLOB_BYTES, "a blob")
    if big is not None:
        return [big]
    actual = hashlib.sha256(data).hexdigest()
    if canon.DIGEST_PREFIX + actual != digest:
        return [Problem(path, f"bytes hash to {actual}, not to the file's name")]
    return []


def check_envelope_file(path: str, data: bytes) -> list[Problem]:
    """An attestation file: normal form, named by the digest of its canonical bytes."""
    named = layout.parse_attestation_path(path)
    if named is None:
        return [Problem(path, f"not an attestation path ({layout.ATTESTATION_PATTERN})")]
    big = _too_big(path, len(data), MAX_ENVELOPE_BYTES, "an envelope")
    if big is not None:
        return [big]
    try:
        value = canon.parse_json(data, source=path, max_bytes=MAX_ENVELOPE_BYTES)
        normal = canon.pretty_bytes(value)
        name = canon.sha256_hex(canon.canonical_bytes(value))
    except RecordError as exc:
        return [Problem(path, exc.at(path))]
    problems = []
    if normal != data:
        problems.append(Problem(path, "bytes are not in normal form"))
    if named[1] != layout.envelope_file_name(name):
        problems.append(Problem(path, f"file name is not the envelope's digest sha256:{name}"))
    return problems


class _Referring(Protocol):
    @property
    def digest(self) -> str: ...

    def references(self) -> Iterator[tuple[str, str, str]]: ...


def check_references(records: Iterable[_Referring], known: dict[str, str], source_of: dict[str, str]) -> list[Problem]:
    """Every reference names a known record of the expected kind."""
    problems = []
    for record in records:
        for member, digest, kind in record.references():
            actual = known.get(digest)
            where = source_of.get(record.digest, record.digest)
            if actual is None:
                problems.append(Problem(where, f"$.spec.{member}: no record {digest} in the registry"))
            elif actual != kind:
                problems.append(Problem(where, f"$.spec.{member}: {digest} is a {actual}, not a {kind}"))
    return problems


@dataclass(frozen=True, slots=True)
class RecordFacts:
    """What the cross-file checks need of a record, small enough to send between processes."""

    digest: str
    kind: str
    refs: tuple[tuple[str, str, str], ...]
    blobs: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, record: StoredRecord) -> RecordFacts:
        return cls(record.digest, record.kind, tuple(record.references()), tuple(record.blob_references()))

    def references(self) -> Iterator[tuple[str, str, str]]:
        return iter(self.refs)

    def blob_references(self) -> Iterator[tuple[str, str]]:
        return iter(self.blobs)


def _check_files(entries: Sequence[tuple[str, str]]) -> list[tuple[str, list[Problem], RecordFacts | None]]:
    out: list[tuple[str, list[Problem], RecordFacts | None]] = []
    for relative, absolute in entries:
        try:
            with open(absolute, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            out.append((relative, [Problem(relative, f"cannot read: {exc.strerror}")], None))
            continue
        record, found = check_record_file(relative, data)
        out.append((relative, found, RecordFacts.of(record) if record is not None else None))
    return out


#: Below this many record files one process is faster than starting more.
PARALLEL_THRESHOLD = 2000


def _check_all_files(entries: list[tuple[str, str]]) -> list[tuple[str, list[Problem], RecordFacts | None]]:
    """``check_record_file`` over every file, on every core for a large registry (order kept)."""
    workers = min(os.cpu_count() or 1, 8)
    if len(entries) < PARALLEL_THRESHOLD or workers < 2:
        return _check_files(entries)
    size = -(-len(entries) // (workers * 4))
    chunks = [entries[start : start + size] for start in range(0, len(entries), size)]
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            return [item for chunk in pool.map(_check_files, chunks) for item in chunk]
    except (OSError, BrokenProcessPool):  # no processes to be had: do it here
        return _check_files(entries)


def _files_under(folder: Path) -> list[Path]:
    out: list[Path] = []
    for dirpath, _, filenames in os.walk(folder):
        out.extend(Path(dirpath) / name for name in filenames if not is_temporary_name(name))
    return sorted(out)


def validate_registry(registry: Registry) -> Report:
    """Every check over the checkout at ``registry.root``."""
    report = Report()
    problems = report.problems
    records: list[RecordFacts] = []
    source_of: dict[str, str] = {}
    for path in registry.stray_record_paths():
        problems.append(Problem(registry.relative(path), f"not a record path ({layout.RECORD_PATTERN})"))
    entries = [(relative, absolute) for _, relative, absolute in registry.record_file_entries()]
    for relative, found, facts in _check_all_files(entries):
        problems.extend(found)
        if facts is not None:
            records.append(facts)
            source_of[facts.digest] = relative
    known = {record.digest: record.kind for record in records}
    problems.extend(check_references(records, known, source_of))
    blob_names = set()
    if registry.blobs_dir.is_dir():
        for path in _files_under(registry.blobs_dir):
            relative = registry.relative(path)
            problems.extend(check_blob_file(relative, path.read_bytes()))
            blob_names.add(path.name)
    for record in records:
        for input_name, digest in record.blob_references():
            if canon.digest_hex(digest) not in blob_names:
                problems.append(
                    Problem(source_of[record.digest], f"$.spec.inputs.{input_name}.digest: no blob {digest}")
                )
    envelopes = 0
    if registry.attestations_dir.is_dir():
        for path in _files_under(registry.attestations_dir):
            relative = registry.relative(path)
            envelopes += 1
            problems.extend(check_envelope_file(relative, path.read_bytes()))
            subject = path.parent.name
            if canon.is_hex_digest(subject) and canon.DIGEST_PREFIX + subject not in known:
                problems.append(Problem(relative, f"attests sha256:{subject}, which is no record in the registry"))
    problems.extend(_check_definitions(registry, known))
    try:
        registry.policy()
    except KictlError as exc:
        problems.append(Problem(registry.relative(registry.policy_path), exc.message))
    counts: dict[str, int] = dict.fromkeys(KINDS, 0)
    for record in records:
        counts[record.kind] += 1
    counts["blobs"] = len(blob_names)
    counts["attestations"] = envelopes
    report.counts = counts
    temporaries = registry.temporary_files()
    if temporaries:
        report.notes.append(
            f"{len(temporaries)} temporary file(s) of an interrupted write ignored "
            "(the next kictl add or import removes them)"
        )
    return report


def _check_definitions(registry: Registry, known: dict[str, str]) -> list[Problem]:
    problems = []
    for folder in definitions.definition_folders(registry.root):
        label = registry.relative(folder)
        try:
            compiled = definitions.compile_folder(folder, registry.root)
        except KictlError as exc:
            problems.append(Problem(label, exc.at(label)))
            continue
        for record in (compiled.definition, *compiled.workloads):
            if record.digest not in known:
                problems.append(
                    Problem(
                        label,
                        f"{record.kind} {record.name} compiles to {record.digest}, which is not in the registry "
                        "(run `kictl definitions compile`)",
                    )
                )
    return problems
