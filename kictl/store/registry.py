"""``Registry``: a registry checkout; its paths (from ``kictl.layout``), reading and storing records
and blobs.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from kictl import canon, layout
from kictl.errors import NotFoundError, RecordError, RegistryError
from kictl.layout import (
    ATTESTATIONS_DIR,
    BLOBS_DIR,
    DEFINITIONS_DIR,
    KICTL_DIR,
    POLICY_FILE,
    RECORDS_DIR,
    REGISTRY_DIR,
    TRUST_DIR,
)
from kictl.lookup import Match, resolve
from kictl.policy import Policy, load_policy
from kictl.records import KINDS, StoredRecord, record_from_bytes

if TYPE_CHECKING:
    pass
from kictl.store.files import (
    Transaction,
    find_root,
    is_temporary_name,
    read_file,
    sweep_temporaries,
    write_immutable,
    writer_lock,
)
from kictl.store.git import GitHistory

# --------------------------------------------------------------------------- the registry


@dataclass(frozen=True, slots=True)
class AddResult:
    """What ``Registry.add`` did with one record."""

    record: StoredRecord
    path: Path
    created: bool
    dangling: tuple[str, ...]


class Registry:
    """A registry checkout: paths, reads and atomic writes of records and blobs."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def locate(cls, explicit: Path | None = None) -> Registry:
        """The registry named by ``--registry``, ``$KICTL_REGISTRY`` or the folders above."""
        return cls(find_root(explicit))

    # ----------------------------------------------------------------- paths

    @property
    def records_dir(self) -> Path:
        return self.root / RECORDS_DIR

    @property
    def attestations_dir(self) -> Path:
        return self.root / ATTESTATIONS_DIR

    @property
    def blobs_dir(self) -> Path:
        return self.root / BLOBS_DIR

    @property
    def trust_dir(self) -> Path:
        return self.root / TRUST_DIR

    @property
    def definitions_dir(self) -> Path:
        return self.root / DEFINITIONS_DIR

    @property
    def policy_path(self) -> Path:
        return self.root / POLICY_FILE

    @property
    def kictl_dir(self) -> Path:
        """Derived data (query index, caches): never committed."""
        return self.root / KICTL_DIR

    def relative(self, path: Path) -> str:
        """``path`` relative to the root, with forward slashes."""
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def record_path(self, kind: str, digest: str) -> Path:
        return self.root / layout.record_path(kind, canon.digest_hex(digest))

    def blob_path(self, digest: str) -> Path:
        return self.root / layout.blob_path(canon.digest_hex(digest))

    def attestation_folder(self, digest: str) -> Path:
        return self.root / layout.attestation_folder(canon.digest_hex(digest))

    def policy(self) -> Policy:
        return load_policy(self.policy_path)

    # ----------------------------------------------------------------- reading

    def record_files(self, kinds: Iterable[str] = KINDS) -> Iterator[tuple[str, Path]]:
        """``(kind folder, path)`` of every ``*.json`` under ``registry/records/``, sorted."""
        for kind in kinds:
            kind_dir = self.records_dir / kind
            if not kind_dir.is_dir():
                continue
            for shard in sorted(os.scandir(kind_dir), key=lambda entry: entry.name):
                if not shard.is_dir():
                    continue
                for entry in sorted(os.scandir(shard.path), key=lambda entry: entry.name):
                    if entry.name.endswith(".json") and entry.is_file():
                        yield kind, Path(entry.path)

    def record_file_entries(self, kinds: Iterable[str] = KINDS) -> Iterator[tuple[str, str, str]]:
        """``(kind folder, path relative to the root, absolute path)`` of every record file, sorted.

        The same files as ``record_files``, as strings, for passes over many records.
        """
        for kind in kinds:
            kind_dir = os.path.join(self.records_dir, kind)
            if not os.path.isdir(kind_dir):
                continue
            for shard in sorted(os.listdir(kind_dir)):
                shard_dir = os.path.join(kind_dir, shard)
                if not os.path.isdir(shard_dir):
                    continue
                for name in sorted(os.listdir(shard_dir)):
                    if name.endswith(".json"):
                        yield kind, f"{RECORDS_DIR}/{kind}/{shard}/{name}", os.path.join(shard_dir, name)

    def stray_record_paths(self) -> list[Path]:
        """Files under ``registry/records/`` outside the ``<kind>/<xx>/<hex>.json`` layout."""
        base = str(self.records_dir)
        stray = []
        for dirpath, _, filenames in os.walk(base):
            parts = os.path.relpath(dirpath, base).split(os.sep)
            depth = 0 if parts == ["."] else len(parts)
            for name in filenames:
                if is_temporary_name(name):
                    continue  # see temporary_files
                if depth != 2 or parts[0] not in KINDS or not name.endswith(".json"):
                    stray.append(Path(dirpath) / name)
        return sorted(stray)

    def read_record(self, path: Path) -> StoredRecord:
        """Parse and validate one record file (not its name; see ``validate``)."""
        return record_from_bytes(read_file(path, self.relative(path)), source=self.relative(path))

    def iter_records(self, kinds: Iterable[str] = KINDS) -> Iterator[StoredRecord]:
        """Every record of the given kinds; raises ``RecordError`` on the first bad file."""
        for _, path in self.record_files(kinds):
            yield self.read_record(path)

    def has_record(self, digest: str) -> bool:
        return any(self.record_path(kind, digest).is_file() for kind in KINDS)

    def digest_kind(self, digest: str) -> str | None:
        """The kind of the record with this full digest, or ``None``."""
        for kind in KINDS:
            if self.record_path(kind, digest).is_file():
                return kind
        return None

    def load(self, digest: str) -> StoredRecord:
        """The record with this full digest; raises ``NotFoundError``."""
        kind = self.digest_kind(digest)
        if kind is None:
            raise NotFoundError(f"no record {digest} in {self.root}")
        return self.read_record(self.record_path(kind, digest))

    def resolve_prefix(self, text: str, kinds: Iterable[str] = KINDS) -> list[str]:
        """Full digests of records whose hex starts with ``text`` (with or without ``sha256:``)."""
        prefix = text.removeprefix(canon.DIGEST_PREFIX).lower()
        if len(prefix) < 2 or any(char not in "0123456789abcdef" for char in prefix):
            return []
        found = []
        for kind in kinds:
            shard = self.root / layout.record_shard(kind, prefix)
            if not shard.is_dir():
                continue
            for entry in os.scandir(shard):
                if entry.name.endswith(".json") and entry.name.startswith(prefix):
                    found.append(canon.DIGEST_PREFIX + entry.name[:-5])
        return sorted(found)

    def resolve(self, ref: str, kinds: Sequence[str] = KINDS) -> StoredRecord:
        """A record by full digest, by a unique prefix of 8+ hex digits, or by name (``kictl.lookup``).

        Names are looked up among records of ``kinds``.  Raises
        ``NotFoundError`` (exit 3) for unknown or ambiguous references, with the
        candidates or the closest known names.
        """
        what = "/".join(kinds) if len(kinds) < len(KINDS) else "record"
        catalogue = _FileCatalogue(self, kinds)
        match = resolve(ref, catalogue, what=what)
        return catalogue.read.get(match.digest) or self.load(match.digest)

    # ----------------------------------------------------------------- writing

    def temporary_files(self) -> list[Path]:
        """Temporary files of an interrupted write under records/, blobs/ and attestations/."""
        found: list[Path] = []
        for top in (self.records_dir, self.blobs_dir, self.attestations_dir):
            for dirpath, _, filenames in os.walk(top):
                found.extend(Path(dirpath) / name for name in filenames if is_temporary_name(name))
        return sorted(found)

    def writing(self) -> contextlib.AbstractContextManager[None]:
        """The registry's writer lock (on the ``registry/`` folder): ``with registry.writing(): ...``."""
        folder = self.root / REGISTRY_DIR
        try:  # a new registry's first write makes the folder it locks
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RegistryError(f"{folder}: cannot create: {exc.strerror or exc}") from exc
        return writer_lock(folder)

    def add(self, records: Sequence[StoredRecord], *, transaction: Transaction | None = None) -> list[AddResult]:
        """Store records (already validated); all or nothing.

        A record whose references are not in the registry (nor in this batch)
        is stored all the same and its result names the dangling digests.
        Raises ``RegistryError`` when a path already holds other bytes, ``RecordError`` when a new
        Implementation takes a name another Implementation holds (``refuse_name_collisions``).
        """
        with self.writing():
            sweep_temporaries(self.temporary_files())  # left by a killed writer (older than a minute)
            return self._add(records, transaction)

    def implementation_names(self) -> dict[str, str]:
        """Every name an Implementation record of the registry shows (metadata and spec), to its digest."""
        held: dict[str, str] = {}
        for _, path in self.record_files(["Implementation"]):
            try:
                raw = json.loads(read_file(path, self.relative(path)))
                names = {raw["metadata"]["name"], raw["spec"]["name"]}
            except (ValueError, KeyError, TypeError):
                raise RecordError(f"{self.relative(path)}: not a readable Implementation record") from None
            for name in names:
                if isinstance(name, str):
                    held.setdefault(name, canon.DIGEST_PREFIX + path.stem)
        return held

    def refuse_name_collisions(self, records: Sequence[StoredRecord]) -> None:
        """Raise ``RecordError`` when a new Implementation takes a name another Implementation holds.

        Two different implementations never share a name (issue 40): a name is how a table, a leaderboard or
        ``--impl NAME`` tells them apart, and one that names two records lets a copy pass for the other.
        """
        new = [r for r in records if r.kind == "Implementation" and not self.has_record(r.digest)]
        if not new:
            return
        held = self.implementation_names()
        for record in records:
            if record.kind != "Implementation":
                continue
            spec_name = getattr(record.model.spec, "name", None)
            for name in sorted({record.name, *([spec_name] if isinstance(spec_name, str) else [])}):
                owner = held.setdefault(name, record.digest)
                if owner != record.digest:
                    raise RecordError(
                        f"Implementation name {name!r} is held by {owner[:19]}, a different implementation "
                        f"({record.digest[:19]} would take it); a different implementation needs a name of its own"
                    )

    def _add(self, records: Sequence[StoredRecord], transaction: Transaction | None) -> list[AddResult]:
        self.refuse_name_collisions(records)
        batch = {record.digest for record in records}
        own = transaction or Transaction()
        results = []
        try:
            for record in records:
                path = self.record_path(record.kind, record.digest)
                created = own.write(path, canon.pretty_bytes(record.raw))
                dangling = tuple(
                    digest
                    for _, digest, _ in record.references()
                    if digest not in batch and not self.has_record(digest)
                )
                results.append(AddResult(record=record, path=path, created=created, dangling=dangling))
        except BaseException:
            if transaction is None:
                own.rollback()
            raise
        return results

    def add_blob(self, data: bytes, *, transaction: Transaction | None = None) -> str:
        """Store raw bytes under their digest and return it."""
        digest = canon.bytes_digest(data)
        path = self.blob_path(digest)
        if transaction is None:
            write_immutable(path, data)
        else:
            transaction.write(path, data)
        return digest

    def read_blob(self, digest: str) -> bytes:
        path = self.blob_path(digest)
        data = read_file(
            path, self.relative(path), missing=NotFoundError, missing_text=f"no blob {digest} in {self.root}"
        )
        if canon.bytes_digest(data) != digest:
            raise RecordError(f"{self.relative(path)}: bytes do not match the blob's name")
        return data

    # ----------------------------------------------------------------- git

    @cached_property
    def git(self) -> GitHistory:
        """The git history of the registry; raises ``RegistryError`` if it is no repository."""
        return GitHistory(self.root)

    def is_git_repository(self) -> bool:
        return (self.root / ".git").exists()


class _FileCatalogue:
    """The records under ``registry/records/``, for ``kictl.lookup.resolve``."""

    def __init__(self, registry: Registry, kinds: Sequence[str]) -> None:
        self.registry = registry
        self.kinds = kinds
        self._named: list[Match] | None = None
        self.read: dict[str, StoredRecord] = {}  # what the name search read, by the digest of its bytes

    def _all(self) -> list[Match]:
        if self._named is None:
            self.read = {r.digest: r for r in self.registry.iter_records(self.kinds)}
            self._named = [Match(r.digest, r.name, r.kind) for r in self.read.values()]
        return self._named

    def by_digest_prefix(self, hex_prefix: str) -> list[Match]:
        found = []
        for digest in self.registry.resolve_prefix(hex_prefix, self.kinds):
            kind = self.registry.digest_kind(digest) or ""
            found.append(Match(digest, "", kind))
        return found

    def by_name(self, name: str) -> list[Match]:
        return [m for m in self._all() if m.name == name]

    def by_name_prefix(self, prefix: str) -> list[Match]:
        return [m for m in self._all() if m.name.startswith(prefix)]

    def names(self) -> list[str]:
        return [m.name for m in self._all()]
