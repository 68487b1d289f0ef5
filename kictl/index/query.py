"""``QueryIndex``: the SQLite index under ``.kictl/`` and the queries the commands ask of it."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from kictl.errors import KictlError, NotFoundError, RegistryError
from kictl.index._common import _COLUMNS, _TABLES, INDEX_FILE, SCHEMA_VERSION
from kictl.index.facts import DefinitionFacts, ImplementationFacts, RunFacts, SyncReport, WorkFacts, WorkloadFacts
from kictl.index.maintenance import _apply_changes, _build_into, _families_version, _read_disk, _scan_shards, _set_meta
from kictl.index.parsing import _SqlCatalogue
from kictl.layout import KICTL_DIR
from kictl.lookup import resolve
from kictl.records import (
    KINDS,
    StoredRecord,
    format_timestamp,
    record_from_bytes,
)
from kictl.render import natural_key
from kictl.store.derived import derived_file_trusted
from kictl.store.git import current_commit
from kictl.store.registry import Registry


def _connect(target: str | Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(target), timeout=30.0, isolation_level=None)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


class QueryIndex:
    """An open index, current with the working tree (or a snapshot of one revision).

    Obtain one with ``QueryIndex.open(registry)``; ``snapshot(rev)`` gives the
    registry as it was at a git revision.  Queries return the ``*Facts``
    dataclasses above.
    """

    def __init__(self, registry: Registry, conn: sqlite3.Connection, *, persistent: bool, report: SyncReport) -> None:
        self.registry = registry
        self.conn = conn
        self.persistent = persistent
        self.report = report
        self.revision: str | None = None  # set on snapshots
        self._loaded: dict[str, StoredRecord] = {}  # records never change: read each once
        self._work: dict[str, WorkFacts] = {}

    # ----------------------------------------------------------------- opening

    @classmethod
    def in_memory(cls, registry: Registry) -> QueryIndex:
        """The index of ``registry`` built in memory from its working tree, reading and writing nothing under its
        ``.kictl`` folder: for a reader that must leave the registry as it is (a linked or committed index, a test
        on the repository's own registry).  Raises ``RegistryError`` when the records cannot be read."""
        started = time.perf_counter()
        report = SyncReport(mode="memory")
        conn = _connect(":memory:")
        _build_into(conn, current_commit(registry.root), registry, report)
        report.seconds = time.perf_counter() - started
        return cls(registry, conn, persistent=False, report=report)

    @classmethod
    def open(cls, registry: Registry) -> QueryIndex:
        """The index of ``registry``, brought up to date (or rebuilt) first.

        Raises ``RegistryError`` when the records cannot be read.
        """
        started = time.perf_counter()
        report = SyncReport()
        head = current_commit(registry.root)
        path = registry.kictl_dir / INDEX_FILE
        conn: sqlite3.Connection | None = None
        linked = registry.kictl_dir.is_symlink() or path.is_symlink()
        if linked or (path.exists() and not derived_file_trusted(registry.root, f"{KICTL_DIR}/{INDEX_FILE}", head)):
            # docs/trust.md "What readers count": a committed index is someone's claim, never read or rewritten;
            # a link in its place is never followed, to read or to write (issue 41: it could lead out of the registry)
            index = cls.in_memory(registry)
            index.report.reasons.append(
                f"{KICTL_DIR}/{INDEX_FILE} is reached through a link: ignored; indexing in memory"
                if linked
                else f"git tracks {KICTL_DIR}/{INDEX_FILE}: a committed index is ignored; indexing in memory"
            )
            return index
        try:
            conn = cls._open_existing(path, head, registry, report)
        except (sqlite3.Error, OSError) as exc:
            report.reasons.append(f"cannot use {path.name}: {exc}")
            if conn is not None:
                conn.close()
            conn = None
        persistent = True
        if conn is None:
            try:
                conn = cls._build_file(path, head, registry, report)
            except (sqlite3.Error, OSError) as exc:
                report.reasons.append(f"cannot write {path}: {exc}; indexing in memory")
                conn = _connect(":memory:")
                _build_into(conn, head, registry, report)
                report.mode = "memory"
                persistent = False
        index = cls(registry, conn, persistent=persistent, report=report)
        report.seconds = time.perf_counter() - started
        return index

    @staticmethod
    def _open_existing(
        path: Path, head: str | None, registry: Registry, report: SyncReport
    ) -> sqlite3.Connection | None:
        if not path.is_file():
            report.reasons.append("no index yet")
            return None
        conn = _connect(path)
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("schema") != SCHEMA_VERSION:
            report.reasons.append(f"index schema {meta.get('schema')} is not {SCHEMA_VERSION}")
            conn.close()
            return None
        conn.execute("BEGIN IMMEDIATE")
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())  # another process may have moved it
            built_at = meta.get("commit") or None
            if built_at != head:
                if built_at is None or head is None:
                    report.reasons.append("the index and the working tree disagree on having a commit")
                    conn.execute("ROLLBACK")
                    conn.close()
                    return None
                try:
                    changes = registry.git.changed_files(built_at, head)
                except (RegistryError, NotFoundError) as exc:
                    report.reasons.append(f"commit {built_at[:12]} of the index is unknown to git: {exc.message}")
                    conn.execute("ROLLBACK")
                    conn.close()
                    return None
                _apply_changes(conn, registry, head, [(c.status, c.path) for c in changes], report, from_disk=True)
                _set_meta(conn, commit=head)
                report.mode = "incremental"
            if meta.get("families") != _families_version():
                conn.execute("DELETE FROM work")
                _set_meta(conn, families=_families_version())
            _scan_shards(conn, registry, report)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            conn.close()
            raise
        return conn

    @staticmethod
    def _build_file(path: Path, head: str | None, registry: Registry, report: SyncReport) -> sqlite3.Connection:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        conn = _connect(temporary)
        try:
            _build_into(conn, head, registry, report)
            conn.close()
            os.replace(temporary, path)
        except BaseException:
            conn.close()
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise
        report.mode = "rebuilt"
        return _connect(path)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> QueryIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- snapshots

    @property
    def commit(self) -> str | None:
        """The commit whose tree the committed rows hold."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'commit'").fetchone()
        return (row[0] or None) if row else None

    def snapshot(self, rev: str) -> QueryIndex:
        """The registry's records as they are in the tree of ``rev``, in memory.

        Starts from the committed rows and applies the files that changed between
        the index's commit and ``rev``, read from git.  Raises ``NotFoundError``
        for an unknown revision and ``RegistryError`` without git history.
        """
        git = self.registry.git
        target = git.rev_parse(rev)
        base = self.commit
        memory = _connect(":memory:")
        self.conn.backup(memory)
        memory.execute("BEGIN")
        for table in (*_COLUMNS, "problems"):
            memory.execute(f"DELETE FROM {table} WHERE committed = 0")
            memory.execute(f"UPDATE {table} SET present = 1")
        report = SyncReport(mode="snapshot")
        if base is None:
            memory.close()
            raise RegistryError(f"{self.registry.root} has no commit to start a snapshot from")
        if base != target:
            changes = [(c.status, c.path) for c in git.changed_files(base, target)]
            _apply_changes(memory, self.registry, target, changes, report, from_disk=False)
            for table in (*_COLUMNS, "problems"):
                memory.execute(f"DELETE FROM {table} WHERE committed = 0")
        _set_meta(memory, commit=target)
        memory.execute("COMMIT")
        snap = QueryIndex(self.registry, memory, persistent=False, report=report)
        snap.revision = target
        return snap

    # ----------------------------------------------------------------- queries

    def counts(self) -> dict[str, int]:
        """Present rows per kind, and ``problems``."""
        out = {}
        for kind, table in _TABLES.items():
            out[kind] = self.conn.execute(f"SELECT count(*) FROM {table} WHERE present = 1").fetchone()[0]
        out["problems"] = self.conn.execute("SELECT count(*) FROM problems WHERE present = 1").fetchone()[0]
        return out

    def problem_count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM problems WHERE present = 1").fetchone()[0])

    def problems(self) -> list[tuple[str, str]]:
        return list(self.conn.execute("SELECT path, message FROM problems WHERE present = 1 ORDER BY path"))

    def definitions(self) -> list[DefinitionFacts]:
        rows = self.conn.execute(
            "SELECT digest, name, title, family, reference_sha256 FROM definitions WHERE present = 1 ORDER BY name"
        )
        return sorted((DefinitionFacts(*row) for row in rows), key=lambda item: (natural_key(item.name), item.digest))

    def definition(self, digest: str) -> DefinitionFacts | None:
        row = self.conn.execute(
            "SELECT digest, name, title, family, reference_sha256 FROM definitions WHERE present = 1 AND digest = ?",
            (digest,),
        ).fetchone()
        return DefinitionFacts(*row) if row else None

    def resolve_definition(self, ref: str) -> DefinitionFacts:
        """A definition by name, full digest, unique prefix of 8+ hex digits, or unique name prefix of 8+.

        Raises ``NotFoundError`` (exit 3) with the closest names, or the candidates
        when a name or prefix names several.
        """
        found = self._resolve("definitions", ref, "definition")
        facts = self.definition(found)
        assert facts is not None
        return facts

    def _resolve(self, table: str, ref: str, label: str, where: str = "", args: tuple[Any, ...] = ()) -> str:
        kind = next(k for k, t in _TABLES.items() if t == table)
        return resolve(ref, _SqlCatalogue(self.conn, (kind,), where, args), what=label).digest

    def workloads(self, definition: str) -> list[WorkloadFacts]:
        rows = self.conn.execute(
            "SELECT digest, name, definition, axes FROM workloads WHERE present = 1 AND definition = ? ORDER BY name",
            (definition,),
        )
        facts = [WorkloadFacts(r[0], r[1], r[2], json.loads(r[3])) for r in rows]
        return sorted(facts, key=lambda workload: (natural_key(workload.name), workload.digest))

    def workload(self, digest: str) -> WorkloadFacts | None:
        row = self.conn.execute(
            "SELECT digest, name, definition, axes FROM workloads WHERE present = 1 AND digest = ?", (digest,)
        ).fetchone()
        return WorkloadFacts(row[0], row[1], row[2], json.loads(row[3])) if row else None

    def resolve_workload(self, definition: str, ref: str) -> WorkloadFacts:
        """A workload of ``definition`` by label, digest (prefix) or unique label prefix; raises ``NotFoundError``."""
        found = self._resolve("workloads", ref, "workload", "definition = ?", (definition,))
        facts = self.workload(found)
        assert facts is not None
        return facts

    def implementation(self, digest: str) -> ImplementationFacts | None:
        row = self.conn.execute(
            "SELECT digest, name, definition, project, runtime, availability, revision, entry_sha256 "
            "FROM implementations WHERE present = 1 AND digest = ?",
            (digest,),
        ).fetchone()
        return ImplementationFacts(*row) if row else None

    def implementations(self, definition: str) -> list[ImplementationFacts]:
        """Implementations that name ``definition``, or that have a run of it."""
        rows = self.conn.execute(
            "SELECT digest, name, definition, project, runtime, availability, revision, entry_sha256 "
            "FROM implementations WHERE present = 1 AND (definition = ? OR digest IN ("
            "  SELECT r.implementation FROM runs r JOIN workloads w ON w.digest = r.workload"
            "  WHERE r.present = 1 AND w.definition = ?)) ORDER BY name, digest",
            (definition, definition),
        )
        facts = [ImplementationFacts(*row) for row in rows]
        return sorted(facts, key=lambda implementation: (natural_key(implementation.name), implementation.digest))

    _RUN_SELECT = (
        "SELECT r.digest, r.name, COALESCE(r.definition, w.definition), r.workload, w.name, r.implementation, "
        "i.name, i.entry_sha256, r.protocol, p.comparability, r.environment, e.product, r.status, "
        "COALESCE(r.statistic, p.statistic), "
        "r.latency_ns, r.observed_at, r.noise_ns, r.noise_source, r.native_reference_ns, r.samples, r.committed "
        "FROM runs r "
        "LEFT JOIN workloads w ON w.digest = r.workload AND w.present = 1 "
        "LEFT JOIN implementations i ON i.digest = r.implementation AND i.present = 1 "
        "LEFT JOIN protocols p ON p.digest = r.protocol AND p.present = 1 "
        "LEFT JOIN environments e ON e.digest = r.environment AND e.present = 1 "
        "WHERE r.present = 1 "
    )

    @staticmethod
    def _run(row: tuple[Any, ...]) -> RunFacts:
        values = list(row)
        values[-1] = bool(values[-1])  # committed
        return RunFacts(*values)

    def runs_of_definition(self, definition: str) -> list[RunFacts]:
        """Every run of ``definition`` (through its workload, or its own definitionDigest)."""
        rows = self.conn.execute(
            self._RUN_SELECT + "AND r.digest IN ("
            "SELECT digest FROM runs WHERE workload IN (SELECT digest FROM workloads WHERE definition = ?) "
            "UNION SELECT digest FROM runs WHERE definition = ?)",
            (definition, definition),
        )
        return [self._run(row) for row in rows]

    def runs_of_workload(self, workload: str) -> list[RunFacts]:
        return [self._run(row) for row in self.conn.execute(self._RUN_SELECT + "AND r.workload = ?", (workload,))]

    def runs_of_implementation(self, implementation: str) -> list[RunFacts]:
        rows = self.conn.execute(self._RUN_SELECT + "AND r.implementation = ?", (implementation,))
        return [self._run(row) for row in rows]

    def runs(self, digests: Iterable[str]) -> list[RunFacts]:
        wanted = list(digests)
        out: list[RunFacts] = []
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.conn.execute(self._RUN_SELECT + f"AND r.digest IN ({marks})", chunk)
            out.extend(self._run(row) for row in rows)
        return out

    def all_runs(self) -> list[RunFacts]:
        return [self._run(row) for row in self.conn.execute(self._RUN_SELECT)]

    def gpu_products(self) -> list[str]:
        """Every GPU product some present environment names."""
        rows = self.conn.execute("SELECT DISTINCT product FROM environments WHERE present = 1 ORDER BY product")
        return [str(row[0]) for row in rows]

    def kind_of(self, digest: str) -> str | None:
        for kind, table in _TABLES.items():
            row = self.conn.execute(
                f"SELECT 1 FROM {table} WHERE present = 1 AND digest = ?",
                (digest,),
            ).fetchone()
            if row:
                return kind
        return None

    def resolve_any(self, ref: str, kinds: Sequence[str] = KINDS) -> tuple[str, str, str]:
        """``(kind, digest, name)`` of a record by digest (prefix) or name (``lookup``); raises ``NotFoundError``."""
        match = resolve(ref, _SqlCatalogue(self.conn, kinds))
        return match.kind, match.digest, match.name

    def path_of(self, digest: str) -> str | None:
        for table in _COLUMNS:
            row = self.conn.execute(f"SELECT path FROM {table} WHERE digest = ?", (digest,)).fetchone()
            if row:
                return str(row[0])
        return None

    def name_of(self, digest: str) -> str | None:
        for table in _COLUMNS:
            row = self.conn.execute(f"SELECT name FROM {table} WHERE digest = ?", (digest,)).fetchone()
            if row:
                return str(row[0])
        return None

    def all_records(self) -> dict[str, tuple[str, str]]:
        """``{digest: (kind, name)}`` of every present record."""
        out: dict[str, tuple[str, str]] = {}
        for kind, table in _TABLES.items():
            for digest, name in self.conn.execute(f"SELECT digest, name FROM {table} WHERE present = 1"):
                out[str(digest)] = (kind, str(name))
        return out

    def runs_observed_between(self, start: datetime, stop: datetime) -> list[RunFacts]:
        """Runs observed at or after ``start`` and before ``stop``."""
        low, high = format_timestamp(start), format_timestamp(stop)
        rows = self.conn.execute(self._RUN_SELECT + "AND r.observed_at >= ? AND r.observed_at < ?", (low, high))
        return [self._run(row) for row in rows]

    def load_record(self, digest: str) -> StoredRecord:
        """The full record: from the working tree, or from git at the snapshot's revision.

        Raises ``NotFoundError`` when the index has no such record and
        ``RecordError`` when its file is not a valid record.
        """
        if digest in self._loaded:
            return self._loaded[digest]
        path = self.path_of(digest)
        if path is None:
            raise NotFoundError(f"no record {digest} in {self.registry.root}")
        data = None if self.revision is not None else _read_disk(self.registry, path)
        if data is None:
            rev = self.revision or self.commit
            if rev is not None:
                data = self.registry.git.read_paths(rev, [path]).get(path)
        if data is None:
            raise NotFoundError(f"record {digest} is neither in the working tree nor at {self.revision or 'HEAD'}")
        record = record_from_bytes(data, source=path)
        self._loaded[digest] = record
        return record

    def load_records(self, digests: Sequence[str]) -> None:
        """Read the records of ``digests`` that are not loaded yet in one pass (``git cat-file --batch`` at the
        snapshot's revision), so that ``load_record`` of each then costs nothing.  Digests the index lacks, and
        files that are not valid records, are left for ``load_record`` to report."""
        wanted = {digest: self.path_of(digest) for digest in dict.fromkeys(digests) if digest not in self._loaded}
        paths = {digest: path for digest, path in wanted.items() if path is not None}
        if not paths:
            return
        found: dict[str, bytes | None] = {}
        if self.revision is None:
            for path in paths.values():
                with contextlib.suppress(KictlError):
                    found[path] = _read_disk(self.registry, path)
        rev = self.revision or self.commit
        missing = [path for path in paths.values() if found.get(path) is None]
        if missing and rev is not None:
            found.update(self.registry.git.read_paths(rev, missing))
        for digest, path in paths.items():
            data = found.get(path)
            if data is None:
                continue
            try:
                self._loaded[digest] = record_from_bytes(data, source=path)
            except KictlError:
                continue

    # ----------------------------------------------------------------- cached work

    def cached_work(self, workload: str) -> WorkFacts | None:
        if workload in self._work:
            return self._work[workload]
        row = self.conn.execute(
            "SELECT bytes, flops, compute_dtype, synthesized, notes FROM work WHERE workload = ?", (workload,)
        ).fetchone()
        if row is None:
            return None
        work = WorkFacts(row[0], row[1], row[2], tuple(json.loads(row[3])), json.loads(row[4]))
        self._work[workload] = work
        return work

    def store_work(self, workload: str, work: WorkFacts) -> None:
        """Remember a workload's work (workloads never change, so neither does it)."""
        try:
            self.conn.execute(
                "INSERT OR REPLACE INTO work VALUES (?, ?, ?, ?, ?, ?)",
                (
                    workload,
                    work.bytes,
                    work.flops,
                    work.compute_dtype,
                    json.dumps(list(work.synthesized)),
                    json.dumps(work.notes, sort_keys=True),
                ),
            )
        except sqlite3.OperationalError:
            pass  # a read-only index keeps computing; nothing is lost


def open_index(registry: Registry) -> QueryIndex:
    """``QueryIndex.open``: the registry's index, current with its working tree."""
    return QueryIndex.open(registry)
