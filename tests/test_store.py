"""The registry on disk: locating it, atomic and immutable writes, lookups, git history."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kictl import canon
from kictl.errors import NotFoundError, RegistryError
from kictl.records import record_from_value
from kictl.store.files import Transaction, find_root, write_atomic, write_immutable
from kictl.store.registry import Registry
from tests import factories


def _stored(raw: dict[str, object]):  # type: ignore[no-untyped-def]
    return record_from_value(raw)


def test_find_root_precedence(tmp_path: Path, empty_registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    nested = empty_registry.root / "registry" / "records"
    nested.mkdir(parents=True)
    assert find_root(cwd=nested) == empty_registry.root.resolve()
    other = tmp_path / "other"
    (other / "registry").mkdir(parents=True)
    monkeypatch.setenv("KICTL_REGISTRY", str(other))
    assert find_root(cwd=nested) == other.resolve()
    assert find_root(empty_registry.root, cwd=nested) == empty_registry.root.resolve()
    with pytest.raises(RegistryError, match="is not a registry"):
        find_root(tmp_path / "nowhere")
    monkeypatch.delenv("KICTL_REGISTRY")
    with pytest.raises(RegistryError, match="no registry found"):
        find_root(cwd=tmp_path)


def test_write_atomic_and_immutable(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b.json"
    assert write_atomic(path, b"one") is True
    assert write_atomic(path, b"one") is False
    assert write_immutable(path, b"one") is False
    with pytest.raises(RegistryError, match="never modified"):
        write_immutable(path, b"two")
    assert path.read_bytes() == b"one"
    assert [p.name for p in path.parent.iterdir()] == ["b.json"]  # no temporary file left


def test_transaction_rolls_back_what_it_created(tmp_path: Path) -> None:
    existing = tmp_path / "existing"
    existing.write_bytes(b"x")
    transaction = Transaction()
    transaction.write(tmp_path / "new1", b"1")
    transaction.write(existing, b"x")  # same bytes: not created, so not removed
    with pytest.raises(RegistryError, match="never modified"):
        transaction.write(existing, b"changed")
    transaction.rollback()
    assert not (tmp_path / "new1").exists()
    assert existing.read_bytes() == b"x"


def test_add_is_idempotent_and_reports_dangling(empty_registry: Registry) -> None:
    chain = factories.chain()
    run = _stored(chain["run"])
    first = empty_registry.add([run])
    assert first[0].created is True
    assert len(first[0].dangling) == 5
    path = empty_registry.record_path("BenchmarkRun", run.digest)
    assert path.read_bytes() == canon.pretty_bytes(chain["run"])
    assert empty_registry.add([run])[0].created is False
    others = [_stored(raw) for name, raw in chain.items() if name != "run"]
    assert all(result.dangling == () for result in empty_registry.add(others))


def test_add_refuses_other_bytes_for_a_published_digest(empty_registry: Registry) -> None:
    chain = factories.chain()
    definition = _stored(chain["definition"])
    empty_registry.add([definition])
    retitled = dict(chain["definition"], metadata={"name": "gemm_tiny", "title": "New title"})
    workload = _stored(chain["workload"])
    with pytest.raises(RegistryError, match="never modified"):
        empty_registry.add([workload, _stored(retitled)])
    assert not empty_registry.has_record(workload.digest)  # the batch left nothing behind


def test_resolve_by_digest_prefix_and_name(empty_registry: Registry) -> None:
    stored = [_stored(raw) for raw in factories.chain().values()]
    empty_registry.add(stored)
    run = next(record for record in stored if record.kind == "BenchmarkRun")
    assert empty_registry.resolve(run.digest).digest == run.digest
    assert empty_registry.resolve(run.digest[7:19]).digest == run.digest
    assert empty_registry.resolve("sha256:" + run.digest[7:19]).digest == run.digest
    assert empty_registry.resolve("gemm_tiny").kind == "Definition"
    with pytest.raises(NotFoundError, match="at least 8 hex digits"):
        empty_registry.resolve("sha256:abc")
    with pytest.raises(NotFoundError, match="closest known: gemm_tiny"):
        empty_registry.resolve("gemm_tiyn")
    with pytest.raises(NotFoundError, match="no record with digest"):
        empty_registry.resolve("sha256:" + "f" * 64)


def test_git_history(empty_registry: Registry) -> None:
    history = empty_registry.git
    start = history.head()
    assert start is not None
    stored = [_stored(raw) for raw in factories.chain().values()]
    results = empty_registry.add(stored)
    paths = [empty_registry.relative(result.path) for result in results]
    sha = history.commit(paths, "Add a chain")
    changes = history.changed_files(start, sha)
    assert sorted(change.path for change in changes) == sorted(paths)
    assert {change.status for change in changes} == {"A"}
    added = history.first_added("registry/records")
    assert {added[path].sha for path in paths} == {sha}
    assert history.read_file(start, paths[0]) is None
    assert history.read_file(sha, paths[0]) == results[0].path.read_bytes()
    assert dict(history.read_files(sha, "registry/records")).keys() == set(paths)
    assert history.merge_base(start, sha) == start
    with pytest.raises(NotFoundError, match="unknown revision"):
        history.rev_parse("no-such-branch")


def test_git_history_outside_a_repository(tmp_path: Path) -> None:
    (tmp_path / "registry").mkdir()
    with pytest.raises(RegistryError, match="not a git repository"):
        Registry(tmp_path).git.head()


def test_read_blob_checks_its_name(empty_registry: Registry) -> None:
    digest = empty_registry.add_blob(b"\x00\x01")
    assert empty_registry.read_blob(digest) == b"\x00\x01"
    path = empty_registry.blob_path(digest)
    os.chmod(path, 0o644)
    path.write_bytes(b"tampered")
    with pytest.raises(Exception, match="do not match"):
        empty_registry.read_blob(digest)
