"""Keeping the index up to date: which shards changed since it was built (git tree, folder times), and
rebuilding them.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kictl import families
from kictl.errors import RegistryError
from kictl.index import _common
from kictl.index._common import _COLUMNS, _INDEXES, _SCHEMA, _TABLES, SCHEMA_VERSION
from kictl.index.facts import SyncReport
from kictl.index.parsing import _is_record_name, _Parsed, _shard_of, parse_file
from kictl.layout import RECORDS_DIR
from kictl.records import (
    KINDS,
)
from kictl.store.registry import Registry


def _families_version() -> str:
    """A hash of the floor formulas' source, so that cached work is dropped when they change."""
    folder = Path(families.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


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
        racy = now_ns - mtime < _common.RACY_SECONDS * 1e9
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
