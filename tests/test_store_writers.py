"""Concurrent writers, interrupted writes and a broken .git (issue 13, store).

Real processes: two writers race on the same files through ``multiprocessing``;
the writer lock is a real ``fcntl`` lock.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

from kictl import canon
from kictl.records import record_from_value
from kictl.store.files import Transaction, write_immutable
from kictl.store.registry import Registry
from kictl.validate import validate_registry
from tests import factories
from tests.conftest import RunCli


def test_a_failed_transaction_removes_only_what_it_created(empty_registry: Registry) -> None:
    """Writer A stores a file; writer B writes the same bytes, then fails: A's file stays."""
    path = empty_registry.root / "registry/blobs/ab/shared"
    assert write_immutable(path, b"same bytes") is True  # writer A created it
    b = Transaction()
    assert b.write(path, b"same bytes") is False  # B did not create it
    b.rollback()
    assert path.read_bytes() == b"same bytes"


def _racer(root: str, data: bytes, barrier: multiprocessing.synchronize.Barrier, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    path = Path(root) / "registry/blobs/cd/raced"
    barrier.wait()
    transaction = Transaction()
    created = transaction.write(path, data)
    out.put(created)
    if created is False:
        transaction.rollback()  # the loser fails after the write and rolls back


def test_two_racing_writers_exactly_one_creates(empty_registry: Registry) -> None:
    for _ in range(5):
        path = empty_registry.root / "registry/blobs/cd/raced"
        path.unlink(missing_ok=True)
        ctx = multiprocessing.get_context("fork")
        barrier = ctx.Barrier(2)
        out: multiprocessing.Queue[bool] = ctx.Queue()
        procs = [
            ctx.Process(target=_racer, args=(str(empty_registry.root), b"x" * 4096, barrier, out)) for _ in range(2)
        ]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(10)
        assert sorted([out.get(timeout=5), out.get(timeout=5)]) == [False, True]
        assert path.read_bytes() == b"x" * 4096  # the loser's rollback left the winner's file


def test_the_writer_lock_serialises_writers(empty_registry: Registry) -> None:
    ctx = multiprocessing.get_context("fork")
    started = ctx.Event()

    def hold() -> None:
        with empty_registry.writing():
            started.set()
            time.sleep(0.5)

    proc = ctx.Process(target=hold)
    proc.start()
    assert started.wait(5)
    begin = time.monotonic()
    with empty_registry.writing():
        waited = time.monotonic() - begin
    proc.join(5)
    assert waited > 0.3


def test_stale_temporaries_are_ignored_by_validate_and_swept_by_add(empty_registry: Registry, cli: RunCli) -> None:
    folder = empty_registry.root / "registry/records/BenchmarkProtocol/ab"
    folder.mkdir(parents=True)
    stale = folder / ".abcdef.json.k3j4h5.tmp"
    stale.write_bytes(b'{"half": ')
    old = time.time() - 3600
    os.utime(stale, (old, old))
    fresh = folder / ".123456.json.zzzz.tmp"
    fresh.write_bytes(b"{")
    report = validate_registry(empty_registry)
    assert report.ok, report.problems
    assert report.notes == [
        "2 temporary file(s) of an interrupted write ignored (the next kictl add or import removes them)"
    ]
    result = cli("validate", "--registry", str(empty_registry.root))
    assert result.exit_code == 0, result.output
    assert "note: 2 temporary file(s)" in result.stderr
    empty_registry.add([record_from_value(factories.protocol())])
    assert not stale.exists()  # stale: swept under the lock
    assert fresh.exists()  # possibly another writer's, still in flight


def test_a_corrupt_git_folder_is_one_line_exit_4(empty_registry: Registry, cli: RunCli) -> None:
    raw = factories.protocol()
    empty_registry.add([record_from_value(raw)])
    (empty_registry.root / ".git/HEAD").write_bytes(b"garbage\n")
    result = cli("history", canon.record_digest(raw), "--registry", str(empty_registry.root))
    assert result.exit_code == 4, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    assert "git" in lines[0]
