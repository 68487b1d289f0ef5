"""``select_workloads`` parses only the files that can name the definition (issue 44: the catalogue's 1,608
workload files took 0.5 CPU-s of every bench session on the repository's registry)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kictl.bench.judge.session import select_workloads
from kictl.errors import NotFoundError, RecordError
from kictl.records import StoredRecord, WorkloadSpec, new_record
from kictl.store.registry import Registry
from tests.conftest import copy_bundled


def _added(registry: Registry, definition: StoredRecord, name: str, batch: int) -> Path:
    spec = WorkloadSpec.model_validate(
        {"definitionDigest": definition.digest, "axes": {"batch_size": batch}, "inputs": {}}
    )
    record = new_record(spec, name=name)
    registry.add([record])
    return registry.record_path("Workload", record.digest)


def test_a_workload_naming_its_definition_through_escapes_is_found_and_a_bad_one_still_refused(
    tmp_path: Path,
) -> None:
    """A hostile file may spell the digest with ``\\u`` escapes (the same JSON string, no byte of it the digest):
    it is still the definition's workload.  A broken file that may be the definition's is parsed and refused;
    one that cannot name it is another definition's concern, not the session's."""
    registry = copy_bundled(tmp_path / "registry")
    definition = registry.resolve("rmsnorm_h4096", ["Definition"])
    other = registry.resolve("gemm_n4096_k4096", ["Definition"])
    before = [w.name for w in select_workloads(registry, definition, [])]
    path = _added(registry, definition, "escaped", 3)
    raw = path.read_bytes()
    hex_digest = definition.digest.removeprefix("sha256:")
    escaped = "".join(f"\\u{ord(char):04x}" for char in "sha256:" + hex_digest)
    path.write_bytes(raw.replace(definition.digest.encode(), escaped.encode()))
    assert definition.digest.encode() not in path.read_bytes()
    assert json.loads(path.read_bytes())["spec"]["definitionDigest"] == definition.digest
    assert [w.name for w in select_workloads(registry, definition, [])] == sorted([*before, "escaped"])
    found = select_workloads(registry, definition, ["escaped"])[0].model.spec
    assert isinstance(found, WorkloadSpec)
    assert found.axes == {"batch_size": 3}
    with pytest.raises(NotFoundError, match="no-such-label"):
        select_workloads(registry, definition, ["no-such-label"])
    # another definition's broken workload file: not this session's to parse
    broken = _added(registry, other, "broken", 5)
    broken.write_bytes(broken.read_bytes().replace(b'"axes"', b'"axes": 1, "axes"'))
    assert [w.name for w in select_workloads(registry, definition, [])] == sorted([*before, "escaped"])
    # one that names this definition is parsed, and refused as before
    mine = _added(registry, definition, "mine_broken", 6)
    mine.write_bytes(mine.read_bytes().replace(b'"axes"', b'"axes": 1, "axes"'))
    with pytest.raises(RecordError):
        select_workloads(registry, definition, [])
