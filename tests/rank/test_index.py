"""The query index under .kictl/: built from the records, updated from the git diff, never trusted stale."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from kictl.canon import pretty_bytes
from kictl.errors import NotFoundError
from kictl.index import INDEX_FILE
from kictl.index import _common as index_settings
from kictl.index.query import QueryIndex
from kictl.records import StoredRecord
from tests.rank.conftest import World


def _age_shards(world: World, seconds: float = 10.0) -> None:
    """Set every shard folder's time into the past so that the racy-time rule does not apply."""
    past = os.stat(world.registry.root).st_mtime - seconds
    for kind_dir in world.registry.records_dir.iterdir():
        for shard in kind_dir.iterdir():
            os.utime(shard, (past, past))


def _populate(world: World, basic: dict[str, StoredRecord], count: int = 3) -> list[StoredRecord]:
    b = basic
    return [world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000 + i) for i in range(count)]


def test_first_open_builds_then_reuses(world: World, basic: dict[str, StoredRecord]) -> None:
    _populate(world, basic)
    world.commit("records")
    _age_shards(world)
    first = QueryIndex.open(world.registry)
    assert first.report.mode == "rebuilt"
    assert first.counts()["BenchmarkRun"] == 3
    assert first.commit == world.registry.git.head()
    first.close()
    assert (world.registry.kictl_dir / INDEX_FILE).is_file()
    second = QueryIndex.open(world.registry)
    assert (second.report.mode, second.report.parsed, second.report.shards_listed) == ("fresh", 0, 0)
    second.close()


def test_an_index_in_memory_reads_and_writes_nothing_under_kictl(world: World, basic: dict[str, StoredRecord]) -> None:
    _populate(world, basic)
    world.commit("records")
    held = QueryIndex.in_memory(world.registry)
    assert held.report.mode == "memory"
    assert held.counts()["BenchmarkRun"] == 3
    assert held.commit == world.registry.git.head()
    held.close()
    assert not (world.registry.kictl_dir / INDEX_FILE).exists()
    # a stale index file there is neither read nor replaced
    world.registry.kictl_dir.mkdir(exist_ok=True)
    (world.registry.kictl_dir / INDEX_FILE).write_bytes(b"not an index")
    again = QueryIndex.in_memory(world.registry)
    assert again.counts()["BenchmarkRun"] == 3
    again.close()
    assert (world.registry.kictl_dir / INDEX_FILE).read_bytes() == b"not an index"


def test_a_commit_is_applied_from_the_git_diff(world: World, basic: dict[str, StoredRecord]) -> None:
    _populate(world, basic)
    world.commit("first")
    _age_shards(world)
    QueryIndex.open(world.registry).close()
    b = basic
    new = [world.run(b["m1"], b["slow"], b["protocol"], b["b200"], 500 + i) for i in range(4)]
    world.commit("four more runs")
    index = QueryIndex.open(world.registry)
    with index:
        assert index.report.mode == "incremental"
        assert index.report.git_changes == 4
        assert index.report.parsed == 4  # only the new files were read
        assert index.counts()["BenchmarkRun"] == 7
        assert {run.digest for run in index.runs_of_workload(b["m1"].digest)} == {r.digest for r in new}
        assert index.commit == world.registry.git.head()


def test_uncommitted_records_are_seen_and_become_committed(world: World, basic: dict[str, StoredRecord]) -> None:
    world.commit("records")
    _age_shards(world)
    QueryIndex.open(world.registry).close()
    runs = _populate(world, basic, 2)
    world.add()  # in the working tree, not committed
    index = QueryIndex.open(world.registry)
    with index:
        assert index.report.mode == "fresh"
        facts = index.runs([run.digest for run in runs])
        assert len(facts) == 2
        assert not any(run.committed for run in facts)
    world.commit("now committed")
    index = QueryIndex.open(world.registry)
    with index:
        assert index.report.mode == "incremental"
        assert index.report.parsed == 0  # the rows were there; only their flag changed
        assert all(run.committed for run in index.runs([run.digest for run in runs]))


def test_a_deleted_working_tree_file_is_hidden_but_kept_for_snapshots(
    world: World, basic: dict[str, StoredRecord]
) -> None:
    (run, *_) = _populate(world, basic, 2)
    head = world.commit("records")
    _age_shards(world)
    QueryIndex.open(world.registry).close()
    world.registry.record_path("BenchmarkRun", run.digest).unlink()
    index = QueryIndex.open(world.registry)
    with index:
        assert index.runs([run.digest]) == []
        snapshot = index.snapshot(head)
        with snapshot:
            assert len(snapshot.runs([run.digest])) == 1


def test_snapshot_of_an_older_revision(world: World, basic: dict[str, StoredRecord]) -> None:
    first_runs = _populate(world, basic, 2)
    first = world.commit("first")
    b = basic
    later = world.run(b["m1"], b["slow"], b["protocol"], b["h200"], 700)
    world.commit("second")
    index = QueryIndex.open(world.registry)
    with index:
        old = index.snapshot(first)
        with old:
            assert old.revision == first
            assert {r.digest for r in old.all_runs()} == {r.digest for r in first_runs}
            assert old.load_record(first_runs[0].digest).digest == first_runs[0].digest
        assert index.counts()["BenchmarkRun"] == 3  # the working index is untouched
        assert len(index.runs([later.digest])) == 1


def test_an_index_of_another_schema_is_rebuilt(world: World, basic: dict[str, StoredRecord]) -> None:
    _populate(world, basic)
    world.commit("records")
    QueryIndex.open(world.registry).close()
    conn = sqlite3.connect(world.registry.kictl_dir / INDEX_FILE)
    conn.execute("UPDATE meta SET value = 'old' WHERE key = 'schema'")
    conn.commit()
    conn.close()
    index = QueryIndex.open(world.registry)
    with index:
        assert index.report.mode == "rebuilt"
        assert any("schema" in reason for reason in index.report.reasons)
        assert index.counts()["BenchmarkRun"] == 3


def test_an_index_whose_commit_git_forgot_is_rebuilt(world: World, basic: dict[str, StoredRecord]) -> None:
    _populate(world, basic)
    world.commit("records")
    QueryIndex.open(world.registry).close()
    conn = sqlite3.connect(world.registry.kictl_dir / INDEX_FILE)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'commit'", ("0" * 40,))
    conn.commit()
    conn.close()
    index = QueryIndex.open(world.registry)
    with index:
        assert index.report.mode == "rebuilt"
        assert index.counts()["BenchmarkRun"] == 3


def test_a_corrupt_index_file_is_rebuilt(world: World, basic: dict[str, StoredRecord]) -> None:
    _populate(world, basic)
    world.commit("records")
    QueryIndex.open(world.registry).close()
    (world.registry.kictl_dir / INDEX_FILE).write_bytes(b"this is not sqlite" * 100)
    index = QueryIndex.open(world.registry)
    with index:
        assert index.report.mode == "rebuilt"
        assert index.counts()["BenchmarkRun"] == 3


def test_an_unwritable_kictl_folder_gives_an_index_in_memory(world: World, basic: dict[str, StoredRecord]) -> None:
    _populate(world, basic)
    world.commit("records")
    world.registry.kictl_dir.write_bytes(b"a file where the folder should be")
    index = QueryIndex.open(world.registry)
    with index:
        assert index.report.mode == "memory"
        assert not index.persistent
        assert index.counts()["BenchmarkRun"] == 3
    assert world.registry.kictl_dir.read_bytes() == b"a file where the folder should be"


def test_a_stale_index_is_never_used_after_a_checkout(world: World, basic: dict[str, StoredRecord]) -> None:
    _populate(world, basic, 2)
    first = world.commit("first")
    b = basic
    world.run(b["m1"], b["slow"], b["protocol"], b["h200"], 700)
    world.commit("second")
    QueryIndex.open(world.registry).close()
    world.registry.git.reset_hard(first)  # the working tree goes back: one run file disappears
    index = QueryIndex.open(world.registry)
    with index:
        assert index.report.mode == "incremental"
        assert index.counts()["BenchmarkRun"] == 2


def test_a_file_that_is_not_a_valid_record_is_a_problem_not_a_fact(
    world: World, basic: dict[str, StoredRecord]
) -> None:
    (run,) = _populate(world, basic, 1)
    world.add()
    path = world.registry.record_path("BenchmarkRun", run.digest)
    broken = dict(run.raw)
    broken["spec"] = {**run.raw["spec"], "status": "fabulous"}
    os.chmod(path, 0o644)
    path.write_bytes(pretty_bytes(broken))
    index = QueryIndex.open(world.registry)
    with index:
        assert index.runs([run.digest]) == []
        ((where, message),) = index.problems()
        assert where.endswith(Path(path).name)
        assert "status" in message


def test_racy_shard_times_are_listed_again(
    world: World, basic: dict[str, StoredRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    world.commit("records")
    monkeypatch.setattr(index_settings, "RACY_SECONDS", 10_000.0)  # every folder time counts as "just now"
    QueryIndex.open(world.registry).close()
    index = QueryIndex.open(world.registry)
    with index:
        assert index.report.shards_listed == len(list(world.registry.records_dir.glob("*/*")))
    monkeypatch.setattr(index_settings, "RACY_SECONDS", 0.0)
    QueryIndex.open(world.registry).close()  # records the times now
    index = QueryIndex.open(world.registry)
    with index:
        assert index.report.shards_listed == 0


def test_index_survives_another_process_having_updated_it(world: World, basic: dict[str, StoredRecord]) -> None:
    _populate(world, basic)
    world.commit("one")
    QueryIndex.open(world.registry).close()
    b = basic
    world.run(b["m1"], b["slow"], b["protocol"], b["h200"], 700)
    world.commit("two")
    first = QueryIndex.open(world.registry)
    second = QueryIndex.open(world.registry)  # finds the index already moved
    with first, second:
        assert first.report.mode == "incremental"
        assert second.report.mode == "fresh"
        assert first.counts() == second.counts()


def test_records_read_in_one_pass_are_those_of_the_snapshot(world: World, basic: dict[str, StoredRecord]) -> None:
    runs = _populate(world, basic, 3)
    first = world.commit("first")
    index = QueryIndex.open(world.registry)
    with index:
        old = index.snapshot(first)
        with old:
            old.load_records([run.digest for run in runs] + ["sha256:" + "0" * 64])
            assert set(old._loaded) == {run.digest for run in runs}
            assert [old.load_record(run.digest).raw for run in runs] == [run.raw for run in runs]
            with pytest.raises(NotFoundError, match="no record"):
                old.load_record("sha256:" + "0" * 64)
