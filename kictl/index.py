"""The query index: a SQLite digest of the registry's records under ``.kictl/`` (DESIGN §4).

Leaderboards, floors, diffs and histories ask questions across many records
("every passed run of this definition, with its GPU and protocol family").
Reading and validating every record file for each question is slow once a
registry holds 100,000 runs, so the facts ranking needs are kept in
``.kictl/index.sqlite`` (the standard library's ``sqlite3``).  The index is
derived data: never committed (``.gitignore`` has ``.kictl/``), rebuilt from
the records whenever it cannot be trusted.

What the index mirrors.  Every file under ``registry/records/`` has one row
(a valid record in the table of its kind, anything else in ``problems``),
with two flags: ``committed`` (the file is in the tree of the commit the
index was last brought to, ``meta.commit``) and ``present`` (the file is in
the working tree).  Queries read present rows, so they see the working tree
(records added but not yet committed included); a snapshot at another
revision starts from the committed rows.

How it stays current without rebuilding.
* When HEAD differs from ``meta.commit``, the files that changed between the
  two commits (``git diff --name-status``, ``GitHistory.changed_files``) are
  applied: added files are parsed (from the working tree when there, else from
  git), deleted ones lose their ``committed`` flag; then ``meta.commit`` moves.
* Files that are not committed are found through the shard folders
  (``records/<kind>/<xx>/``): the index keeps each folder's modification time
  as of the moment its listing last matched the index, and lists again only
  the folders whose time changed.  A time within two seconds of the scan is
  not trusted (a file added in the same clock tick would not change it), the
  same "racy" rule git applies to its own index.
* An index of another schema, one whose commit git no longer knows, or a
  file SQLite cannot read is ignored and rebuilt; where ``.kictl/`` cannot be
  written the index is built in memory for the one command.

The index trusts a record file's name as its digest and does not check the
normal form: ``kictl validate`` and ``kictl review`` do (validate.py).  It
does validate each record against its schema, and a file that fails is kept
as a problem, never as a fact.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kictl import canon, layout
from kictl.errors import NotFoundError, RegistryError
from kictl.families.gpus import normalize_product
from kictl.layout import RECORDS_DIR
from kictl.lookup import Match, resolve
from kictl.records import (
    KINDS,
    RECORD_ADAPTER,
    BenchmarkProtocol,
    BenchmarkRun,
    Definition,
    ExecutionEnvironment,
    Implementation,
    StoredRecord,
    Workload,
    format_timestamp,
    record_from_bytes,
)
from kictl.store import Registry, current_commit

INDEX_FILE = "index.sqlite"
#: Bump when the tables or what is extracted into them change: older indexes are then rebuilt.
SCHEMA_VERSION = "1"
#: A shard folder modified less than this many seconds before a scan is listed again next time.
RACY_SECONDS = 2.0

_TABLES = {
    "Definition": "definitions",
    "Workload": "workloads",
    "Implementation": "implementations",
    "BenchmarkProtocol": "protocols",
    "ExecutionEnvironment": "environments",
    "BenchmarkRun": "runs",
}
_COMMON = (
    "digest TEXT PRIMARY KEY, path TEXT UNIQUE NOT NULL, shard TEXT NOT NULL, "
    "committed INTEGER NOT NULL, present INTEGER NOT NULL, name TEXT NOT NULL"
)
_COLUMNS: dict[str, tuple[str, ...]] = {
    "definitions": ("title", "family", "reference_sha256"),
    "workloads": ("definition", "axes"),
    "implementations": ("definition", "project", "runtime", "availability", "revision", "entry_sha256"),
    "protocols": ("comparability", "statistic", "harness", "timer"),
    "environments": ("product", "hardware_product"),
    "runs": (
        "definition",
        "workload",
        "implementation",
        "protocol",
        "environment",
        "status",
        "statistic",
        "latency_ns",
        "observed_at",
        "noise_ns",
        "noise_source",
        "native_reference_ns",
        "samples",
    ),
}
_SCHEMA = [
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)",
    *(f"CREATE TABLE {table} ({_COMMON}, {', '.join(columns)})" for table, columns in _COLUMNS.items()),
    "CREATE TABLE problems (path TEXT PRIMARY KEY, shard TEXT NOT NULL, committed INTEGER NOT NULL, "
    "present INTEGER NOT NULL, message TEXT NOT NULL)",
    "CREATE TABLE shards (shard TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL)",
    "CREATE TABLE work (workload TEXT PRIMARY KEY, bytes INTEGER NOT NULL, flops INTEGER, "
    "compute_dtype TEXT NOT NULL, synthesized TEXT NOT NULL, notes TEXT NOT NULL)",
]
#: Secondary indexes, created after a full build has inserted its rows (sorting once is faster).
_INDEXES = [
    *(f"CREATE INDEX {table}_shard ON {table} (shard)" for table in _COLUMNS),
    "CREATE INDEX problems_shard ON problems (shard)",
    "CREATE INDEX definitions_name ON definitions (name)",
    "CREATE INDEX workloads_definition ON workloads (definition)",
    "CREATE INDEX implementations_name ON implementations (name)",
    "CREATE INDEX runs_workload ON runs (workload)",
    "CREATE INDEX runs_definition ON runs (definition)",
    "CREATE INDEX runs_implementation ON runs (implementation)",
]


# --------------------------------------------------------------------------- facts


@dataclass(frozen=True, slots=True)
class DefinitionFacts:
    digest: str
    name: str
    title: str | None
    family: str
    reference_sha256: str


@dataclass(frozen=True, slots=True)
class WorkloadFacts:
    digest: str
    name: str
    definition: str
    axes: dict[str, int]


@dataclass(frozen=True, slots=True)
class ImplementationFacts:
    digest: str
    name: str
    definition: str | None
    project: str | None
    runtime: str
    availability: str | None
    revision: str | None
    entry_sha256: str | None


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What ranking needs to know about one run, with the facts of the records it names.

    ``gpu``, ``comparability`` and the names are ``None`` where the record they
    come from is not in the registry (a dangling reference): such a run belongs
    to no comparison group.  ``noise_ns`` is half the width of the run's 10-90 %
    band (``noise_source`` says from what: ``samples`` or ``p10p90``), ``None``
    when the run carries neither.
    """

    digest: str
    name: str
    definition: str | None
    workload: str
    workload_name: str | None
    implementation: str
    implementation_name: str | None
    implementation_entry_sha256: str | None
    protocol: str
    comparability: str | None
    environment: str
    gpu: str | None
    status: str
    statistic: str | None
    latency_ns: int | None
    observed_at: str
    noise_ns: float | None
    noise_source: str | None
    native_reference_ns: int | None
    samples: int
    committed: bool = True


@dataclass(frozen=True, slots=True)
class WorkFacts:
    """The cached output of ``families.work`` for one workload."""

    bytes: int
    flops: int | None
    compute_dtype: str
    synthesized: tuple[str, ...]
    notes: dict[str, int]


@dataclass
class SyncReport:
    """What opening the index did: ``fresh``, ``incremental``, ``rebuilt`` or ``memory``."""

    mode: str = "fresh"
    parsed: int = 0
    git_changes: int = 0
    shards_listed: int = 0
    seconds: float = 0.0
    reasons: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- parsing


def quantile(sorted_values: Sequence[int], q: float) -> float:
    """The ``q`` quantile by linear interpolation between order statistics (numpy's default)."""
    if not sorted_values:
        raise ValueError("no values")
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def run_noise(run: BenchmarkRun) -> tuple[float | None, str | None]:
    """Half the width of a run's 10-90 % band and where it came from (DESIGN §6, ties).

    From the samples when the run has at least two, else from ``latencyNs.p10``
    and ``p90``; ``(None, None)`` when it has neither (ranking then falls back
    on the policy's ``tieTolerance``).
    """
    timing = run.spec.timing
    if timing is None:
        return None, None
    if timing.samples is not None and len(timing.samples) >= 2:
        ordered = sorted(timing.samples)
        return (quantile(ordered, 0.9) - quantile(ordered, 0.1)) / 2, "samples"
    latency = timing.latency_ns
    if latency.p10 is not None and latency.p90 is not None and latency.p90 >= latency.p10:
        return (latency.p90 - latency.p10) / 2, "p10p90"
    return None, None


def _row_values(record: Any) -> tuple[Any, ...]:
    """The kind-specific columns of a validated record (``_COLUMNS`` order)."""
    spec = record.spec
    if isinstance(record, Definition):
        reference_sha = hashlib.sha256(spec.reference.encode("utf-8")).hexdigest()
        return (record.metadata.title, spec.family, reference_sha)
    if isinstance(record, Workload):
        return (spec.definition_digest, json.dumps(spec.axes, sort_keys=True))
    if isinstance(record, Implementation):
        entry_file = spec.entry_point.split("::", 1)[0]
        entry_sha = next((source.sha256 for source in spec.sources if source.path == entry_file), None)
        return (spec.definition_digest, spec.project, spec.runtime, spec.availability, spec.revision, entry_sha)
    if isinstance(record, BenchmarkProtocol):
        return (
            spec.comparability.family,
            spec.measurement.primary_statistic,
            spec.harness.name,
            spec.measurement.timer,
        )
    if isinstance(record, ExecutionEnvironment):
        return (normalize_product(spec.hardware.product), spec.hardware.product)
    assert isinstance(record, BenchmarkRun)
    timing = spec.timing
    statistic = timing.primary_statistic if timing is not None else None
    latency = timing.primary_ns() if timing is not None else None
    noise, source = run_noise(record)
    native_reference: int | None = None
    if spec.source_native is not None and spec.source_native.metrics:
        reference_ms = spec.source_native.metrics.get("reference_latency_ms")
        if reference_ms is not None and math.isfinite(reference_ms) and reference_ms > 0:
            native_reference = round(reference_ms * 1e6)
    samples = len(timing.samples) if timing is not None and timing.samples is not None else 0
    return (
        spec.definition_digest,
        spec.workload_digest,
        spec.implementation_digest,
        spec.protocol_digest,
        spec.environment_digest,
        spec.status,
        statistic,
        latency,
        spec.observed_at,
        noise,
        source,
        native_reference,
        samples,
    )


def _is_record_name(name: str) -> bool:
    """``<64 hex>.json``."""
    return name.endswith(".json") and layout.is_hex64(name[:-5])


def _shard_of(path: str) -> str | None:
    """``Kind/xx`` for ``registry/records/Kind/xx/<hex>.json``, ``None`` for anything else."""
    named = layout.parse_record_path(path)
    if named is None:
        return None
    kind, digest = named
    return f"{kind}/{layout.record_shard(kind, digest[len(layout.DIGEST_PREFIX) :])[-2:]}"


class _SqlCatalogue:
    """Present records of some kinds in the query index, for ``kictl.lookup.resolve``.

    ``where`` (with its ``args``) narrows every table, e.g. to the workloads of
    one definition.  Names of runs are left out of "closest known" hints when
    other kinds are sought too: they are many and nobody types them.
    """

    def __init__(
        self, conn: sqlite3.Connection, kinds: Sequence[str], where: str = "", args: tuple[Any, ...] = ()
    ) -> None:
        self.conn = conn
        self.kinds = kinds
        self.scope = f" AND {where}" if where else ""
        self.args = args

    def _select(self, condition: str, values: tuple[Any, ...], kinds: Sequence[str] | None = None) -> list[Match]:
        found: list[Match] = []
        for kind in kinds or self.kinds:
            rows = self.conn.execute(
                f"SELECT digest, name FROM {_TABLES[kind]} WHERE present = 1 AND {condition}{self.scope} "
                "ORDER BY digest",
                (*values, *self.args),
            )
            found.extend(Match(str(digest), str(name), kind) for digest, name in rows)
        return found

    def by_digest_prefix(self, hex_prefix: str) -> list[Match]:
        low = canon.DIGEST_PREFIX + hex_prefix
        return self._select("digest >= ? AND digest < ?", (low, low + "g"))

    def by_name(self, name: str) -> list[Match]:
        return self._select("name = ?", (name,))

    def by_name_prefix(self, prefix: str) -> list[Match]:
        return self._select("name >= ? AND name < ?", (prefix, prefix + "\U0010ffff"))

    def names(self) -> list[str]:
        kinds = [k for k in self.kinds if k != "BenchmarkRun"] if len(self.kinds) > 1 else self.kinds
        return [match.name for match in self._select("1 = 1", (), kinds)]


@dataclass(frozen=True, slots=True)
class _Parsed:
    path: str
    shard: str
    kind: str
    digest: str
    name: str | None  # None for a problem
    values: tuple[Any, ...]
    problem: str | None


def parse_file(path: str, data: bytes, shard: str | None = None) -> _Parsed:
    """The index row of one record file (or the problem that keeps it out of the facts)."""
    shard = shard or _shard_of(path)
    assert shard is not None
    kind = shard.split("/", 1)[0]
    digest = canon.DIGEST_PREFIX + path.rsplit("/", 1)[1][:-5]
    try:
        model = RECORD_ADAPTER.validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = canon.format_path(tuple(part for part in first["loc"] if isinstance(part, str | int)))
        return _Parsed(path, shard, kind, digest, None, (), f"{where}: {first['msg']}")
    except ValueError as exc:  # pragma: no cover - pydantic wraps JSON errors in ValidationError
        return _Parsed(path, shard, kind, digest, None, (), str(exc))
    if model.kind != kind:
        return _Parsed(path, shard, kind, digest, None, (), f"a {model.kind} filed under {kind}/")
    return _Parsed(path, shard, kind, digest, model.metadata.name, _row_values(model), None)


# --------------------------------------------------------------------------- the index


def _connect(target: str | Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(target), timeout=30.0, isolation_level=None)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _families_version() -> str:
    """A hash of the floor formulas' source, so that cached work is dropped when they change."""
    from kictl import families

    folder = Path(families.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


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
    def open(cls, registry: Registry) -> QueryIndex:
        """The index of ``registry``, brought up to date (or rebuilt) first.

        Raises ``RegistryError`` when the records cannot be read.
        """
        started = time.perf_counter()
        report = SyncReport()
        head = current_commit(registry.root)
        path = registry.kictl_dir / INDEX_FILE
        conn: sqlite3.Connection | None = None
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
        return [DefinitionFacts(*row) for row in rows]

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
        return [WorkloadFacts(r[0], r[1], r[2], json.loads(r[3])) for r in rows]

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
        return [ImplementationFacts(*row) for row in rows]

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


# --------------------------------------------------------------------------- maintenance


def _set_meta(conn: sqlite3.Connection, **values: str | None) -> None:
    for key, value in values.items():
        conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value or ""))


def _insert(conn: sqlite3.Connection, parsed: Iterable[_Parsed], *, committed: bool, present: bool) -> int:
    """Insert or replace rows; returns how many."""
    by_table: dict[str, list[tuple[Any, ...]]] = {}
    problems: list[tuple[Any, ...]] = []
    flags = (int(committed), int(present))
    for item in parsed:
        if item.problem is not None:
            problems.append((item.path, item.shard, *flags, item.problem))
            continue
        table = _TABLES[item.kind]
        by_table.setdefault(table, []).append((item.digest, item.path, item.shard, *flags, item.name, *item.values))
    count = len(problems)
    for table, rows in by_table.items():
        marks = ",".join("?" * (6 + len(_COLUMNS[table])))
        conn.executemany(f"INSERT OR REPLACE INTO {table} VALUES ({marks})", rows)
        count += len(rows)
    if problems:
        conn.executemany("INSERT OR REPLACE INTO problems VALUES (?, ?, ?, ?, ?)", problems)
    return count


def _read_disk(registry: Registry, path: str) -> bytes | None:
    try:
        with open(os.path.join(registry.root, path), "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read: {exc.strerror}") from exc


def _list_disk_records(registry: Registry) -> list[tuple[str, str]]:
    """``(relative path, shard)`` of every record-shaped file in the working tree."""
    out: list[tuple[str, str]] = []
    records = str(registry.records_dir)
    for kind in KINDS:
        kind_dir = os.path.join(records, kind)
        if not os.path.isdir(kind_dir):
            continue
        for shard in os.scandir(kind_dir):
            if len(shard.name) != 2 or not shard.is_dir():
                continue
            label = f"{kind}/{shard.name}"
            prefix = f"{RECORDS_DIR}/{label}/"
            out.extend(
                (prefix + name, label)
                for name in os.listdir(shard.path)
                if _is_record_name(name) and name.startswith(shard.name)
            )
    return out


def _build_into(conn: sqlite3.Connection, head: str | None, registry: Registry, report: SyncReport) -> None:
    """Create the tables and index every record file of the working tree (and of HEAD).

    The target is a new file that replaces the index only once complete, so
    the build runs without a rollback journal and indexes the rows once they
    are all in.
    """
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    for statement in _SCHEMA:
        conn.execute(statement)
    conn.execute("BEGIN")
    mtimes = _shard_mtimes(registry)  # before listing: a file added meanwhile changes a time
    on_disk = _list_disk_records(registry)
    tracked: set[str] = set()
    if head is not None:
        tracked = {path for path in registry.git.list_files(head, RECORDS_DIR) if _shard_of(path)}
    committed_rows: list[_Parsed] = []
    loose_rows: list[_Parsed] = []
    root = str(registry.root)
    for path, shard in on_disk:
        try:
            with open(os.path.join(root, path), "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise RegistryError(f"{path}: cannot read: {exc.strerror}") from exc
        (committed_rows if path in tracked else loose_rows).append(parse_file(path, data, shard))
    report.parsed += _insert(conn, committed_rows, committed=True, present=True)
    report.parsed += _insert(conn, loose_rows, committed=False, present=True)
    missing = sorted(tracked - {path for path, _ in on_disk})
    if missing and head is not None:
        blobs = registry.git.read_paths(head, missing)
        hidden = [parse_file(path, data) for path, data in blobs.items() if data is not None]
        report.parsed += _insert(conn, hidden, committed=True, present=False)
    for statement in _INDEXES:
        conn.execute(statement)
    _set_meta(conn, schema=SCHEMA_VERSION, commit=head, families=_families_version())
    _scan_shards(conn, registry, report, mtimes=mtimes, reconcile=False)
    conn.execute("COMMIT")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("PRAGMA synchronous=NORMAL")


def _apply_changes(
    conn: sqlite3.Connection,
    registry: Registry,
    rev: str,
    changes: Sequence[tuple[str, str]],
    report: SyncReport,
    *,
    from_disk: bool,
) -> None:
    """Bring the committed rows from one commit's tree to ``rev``'s.

    Added files are parsed from the working tree when ``from_disk`` and the file
    is there (a published path never changes its bytes), else from git at
    ``rev``.  Touched shard folders are listed again afterwards.
    """
    relevant = [(status, path) for status, path in changes if _shard_of(path)]
    report.git_changes += len(relevant)
    to_read: list[str] = []
    for status, path in relevant:
        shard = _shard_of(path)
        assert shard is not None
        table = _TABLES[shard.split("/", 1)[0]]
        conn.execute("UPDATE shards SET mtime_ns = -1 WHERE shard = ?", (shard,))
        if status == "D":
            for name in (table, "problems"):
                conn.execute(f"UPDATE {name} SET committed = 0 WHERE path = ?", (path,))
            continue
        known = (
            conn.execute(f"SELECT 1 FROM {table} WHERE path = ?", (path,)).fetchone()
            or conn.execute("SELECT 1 FROM problems WHERE path = ?", (path,)).fetchone()
        )
        if known and status == "A":
            for name in (table, "problems"):
                conn.execute(f"UPDATE {name} SET committed = 1 WHERE path = ?", (path,))
            continue
        to_read.append(path)
    if not to_read:
        return
    found: dict[str, bytes | None] = {}
    if from_disk:
        for path in to_read:
            found[path] = _read_disk(registry, path)
    absent = {path for path in to_read if found.get(path) is None}
    if absent:
        found.update(registry.git.read_paths(rev, sorted(absent)))
    on_disk: list[_Parsed] = []
    in_git: list[_Parsed] = []
    for path in to_read:
        data = found.get(path)
        if data is None:
            continue
        conn.execute(f"DELETE FROM {_TABLES[path.split('/')[2]]} WHERE path = ?", (path,))
        conn.execute("DELETE FROM problems WHERE path = ?", (path,))
        (on_disk if path not in absent else in_git).append(parse_file(path, data))
    # a snapshot holds the tree of ``rev``: all of it is "present" there
    report.parsed += _insert(conn, on_disk, committed=True, present=True)
    report.parsed += _insert(conn, in_git, committed=True, present=not from_disk)


def _shard_mtimes(registry: Registry) -> dict[str, int]:
    """The modification time of every shard folder ``Kind/xx``."""
    seen: dict[str, int] = {}
    for kind in KINDS:
        kind_dir = registry.records_dir / kind
        try:
            entries = list(os.scandir(kind_dir))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise RegistryError(f"{registry.relative(kind_dir)}: cannot list: {exc.strerror}") from exc
        for entry in entries:
            if len(entry.name) == 2 and entry.is_dir():
                seen[f"{kind}/{entry.name}"] = entry.stat().st_mtime_ns
    return seen


def _scan_shards(
    conn: sqlite3.Connection,
    registry: Registry,
    report: SyncReport,
    *,
    mtimes: dict[str, int] | None = None,
    reconcile: bool = True,
) -> None:
    """List again the shard folders whose modification time changed, and reconcile them.

    ``mtimes`` (taken before the folders were listed) are what is recorded; a
    time too close to now is recorded as unknown, so that the folder is listed
    again next time.
    """
    known = dict(conn.execute("SELECT shard, mtime_ns FROM shards").fetchall())
    now_ns = time.time_ns()
    seen = _shard_mtimes(registry) if mtimes is None else mtimes
    stale = [shard for shard, mtime in seen.items() if known.get(shard) != mtime]
    stale.extend(shard for shard in known if shard not in seen)
    for shard in stale:
        mtime = seen.get(shard)
        if reconcile:
            _reconcile_shard(conn, registry, shard, report)
            report.shards_listed += 1
        if mtime is None:
            conn.execute("DELETE FROM shards WHERE shard = ?", (shard,))
            continue
        racy = now_ns - mtime < RACY_SECONDS * 1e9
        conn.execute("INSERT OR REPLACE INTO shards VALUES (?, ?)", (shard, -1 if racy else mtime))


def _reconcile_shard(conn: sqlite3.Connection, registry: Registry, shard: str, report: SyncReport) -> None:
    """Make the rows of one shard folder agree with its listing (set operations, then the few changes)."""
    kind, _ = shard.split("/", 1)
    table = _TABLES[kind]
    prefix = f"{RECORDS_DIR}/{shard}/"
    try:
        on_disk = {prefix + name for name in os.listdir(registry.records_dir / shard)}
    except FileNotFoundError:
        on_disk = set()
    present: set[str] = set()
    absent: set[str] = set()  # committed rows whose file is not in the working tree
    loose: set[str] = set()  # rows not in the commit's tree
    for name in (table, "problems"):
        for path, is_committed, is_present in conn.execute(
            f"SELECT path, committed, present FROM {name} WHERE shard = ?", (shard,)
        ):
            (present if is_present else absent).add(path)
            if not is_committed:
                loose.add(path)
    changes: list[tuple[str, str]] = []
    changes.extend(("UPDATE {} SET present = 1 WHERE path = ?", path) for path in absent & on_disk)
    vanished = present - on_disk
    changes.extend(("DELETE FROM {} WHERE path = ?", path) for path in (vanished | absent) & loose - on_disk)
    changes.extend(("UPDATE {} SET present = 0 WHERE path = ?", path) for path in vanished - loose)
    for statement, path in changes:
        for name in (table, "problems"):
            conn.execute(statement.format(name), (path,))
    new = sorted(path for path in on_disk - present - absent if _is_record_name(path[len(prefix) :]))
    parsed = []
    for path in new:
        if path[len(prefix) : len(prefix) + 2] != shard[-2:]:
            continue  # a record-shaped name in the wrong shard is not a record path
        data = _read_disk(registry, path)
        if data is not None:
            parsed.append(parse_file(path, data, shard))
    report.parsed += _insert(conn, parsed, committed=False, present=True)


def open_index(registry: Registry) -> QueryIndex:
    """``QueryIndex.open``: the registry's index, current with its working tree."""
    return QueryIndex.open(registry)
