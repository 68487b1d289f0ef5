"""`kictl validate` and `kictl add` on each defect: one clear line, exit 3, registry unchanged."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from kictl import canon
from kictl.records import record_from_value
from kictl.store.registry import Registry
from tests import factories
from tests.conftest import ASSETS, RunCli

DEFECTS = ASSETS / "defects"
# defect file -> what the one line must say (file name and JSON path)
MESSAGES = {
    "malformed.json": r"\$\.spec: unterminated string \(line 13, column 5\)",
    "duplicate_key.json": r'\$\.spec: duplicate key "status" \(line 9',
    "nan.json": r"\$\.spec\.correctness\.maximumAbsoluteError: NaN and Infinity are not allowed",
    "integer_out_of_range.json": r"\$\.spec\.timing\.latencyNs\.median: integer 9007199254740993 is beyond",
    "unknown_kind.json": r"\$\.kind: unknown kind 'BenchmarkResult'",
    "unknown_member.json": r"\$\.spec\.timing\.latencyNs\.avg: unknown member",
}


def _registry_with_chain(registry: Registry) -> dict[str, str]:
    chain = factories.chain()
    registry.add([record_from_value(raw) for raw in chain.values()])
    return {name: canon.record_digest(raw) for name, raw in chain.items()}


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".git" not in path.parts
    }


@pytest.mark.parametrize("defect", sorted(MESSAGES))
def test_add_rejects_each_defect_and_writes_nothing(cli: RunCli, empty_registry: Registry, defect: str) -> None:
    before = _snapshot(empty_registry.root)
    good = empty_registry.root.parent / "good.json"
    good.write_text(json.dumps(factories.chain()["definition"]))
    result = cli("add", "--registry", empty_registry.root, good, DEFECTS / defect)
    assert result.exit_code == 3, result.output
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"error: {DEFECTS / defect}: "), result.stderr
    assert any(__import__("re").search(MESSAGES[defect], line) for line in result.stderr.splitlines()), result.stderr
    assert _snapshot(empty_registry.root) == before
    assert "Traceback" not in result.output


@pytest.mark.parametrize("defect", sorted(MESSAGES))
def test_validate_reports_each_defect(cli: RunCli, empty_registry: Registry, defect: str) -> None:
    _registry_with_chain(empty_registry)
    target = empty_registry.records_dir / "BenchmarkRun" / "ab" / ("ab" + "0" * 62 + ".json")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(DEFECTS / defect, target)
    result = cli("validate", "--registry", empty_registry.root)
    assert result.exit_code == 3, result.output
    relative = target.relative_to(empty_registry.root).as_posix()
    lines = [line for line in result.stdout.splitlines() if line.startswith(relative + ": ")]
    assert lines, result.stdout
    assert any(__import__("re").search(MESSAGES[defect], line) for line in lines), lines


def test_validate_wrong_file_name(cli: RunCli, empty_registry: Registry) -> None:
    digests = _registry_with_chain(empty_registry)
    path = empty_registry.record_path("BenchmarkRun", digests["run"])
    wrong = path.with_name(path.name[:2] + "0" * 62 + ".json")
    path.rename(wrong)
    result = cli("validate", "--registry", empty_registry.root, "--json")
    assert result.exit_code == 3
    problems = json.loads(result.stdout)["problems"]
    assert [p["message"] for p in problems] == [f"file name is not the record's digest {digests['run']}"]


def test_validate_normal_form(cli: RunCli, empty_registry: Registry) -> None:
    digests = _registry_with_chain(empty_registry)
    path = empty_registry.record_path("Workload", digests["workload"])
    path.write_text(json.dumps(json.loads(path.read_text()), indent=4))
    result = cli("validate", "--registry", empty_registry.root, "--json")
    assert result.exit_code == 3
    assert "not in normal form" in json.loads(result.stdout)["problems"][0]["message"]


def test_validate_dangling_reference_and_wrong_kind_folder(cli: RunCli, empty_registry: Registry) -> None:
    digests = _registry_with_chain(empty_registry)
    empty_registry.record_path("Workload", digests["workload"]).unlink()
    env = empty_registry.record_path("ExecutionEnvironment", digests["environment"])
    moved = empty_registry.records_dir / "BenchmarkProtocol" / env.parent.name / env.name
    moved.parent.mkdir(parents=True, exist_ok=True)
    env.rename(moved)
    result = cli("validate", "--registry", empty_registry.root, "--json")
    assert result.exit_code == 3
    messages = sorted(p["message"] for p in json.loads(result.stdout)["problems"])
    assert any(f"$.spec.workloadDigest: no record {digests['workload']}" in m for m in messages), messages
    assert any("a ExecutionEnvironment filed under BenchmarkProtocol/" in m for m in messages), messages
    assert any(
        f"$.spec.environmentDigest: {digests['environment']} is a ExecutionEnvironment" not in m for m in messages
    )


def test_validate_stray_files_blobs_and_envelopes(cli: RunCli, empty_registry: Registry) -> None:
    _registry_with_chain(empty_registry)
    (empty_registry.records_dir / "notes.txt").write_text("hello")
    digest = empty_registry.add_blob(b"blob")
    blob = empty_registry.blob_path(digest)
    blob.chmod(0o644)
    blob.write_bytes(b"changed")
    result = cli("validate", "--registry", empty_registry.root, "--json")
    messages = [f"{p['path']}: {p['message']}" for p in json.loads(result.stdout)["problems"]]
    assert result.exit_code == 3
    assert any(m.startswith("registry/records/notes.txt: not a record path") for m in messages), messages
    assert any("bytes hash to" in m for m in messages), messages


def test_validate_uncompiled_definition_folder(cli: RunCli, bundled_registry: Registry) -> None:
    reference = next(bundled_registry.definitions_dir.glob("gemm/*/reference.py"))
    reference.write_text(reference.read_text() + "\n# edited\n")
    result = cli("validate", "--registry", bundled_registry.root, "--json")
    assert result.exit_code == 3
    problem = json.loads(result.stdout)["problems"][0]
    assert problem["path"] == "definitions/gemm/gemm_n4096_k4096"
    assert "not in the registry (run `kictl definitions compile`)" in problem["message"]
    assert cli("definitions", "compile", "gemm_n4096_k4096", "--registry", bundled_registry.root).exit_code == 0
    assert cli("validate", "--registry", bundled_registry.root).exit_code == 0


def test_validate_broken_definition_folder(cli: RunCli, bundled_registry: Registry) -> None:
    reference = next(bundled_registry.definitions_dir.glob("rmsnorm/*/reference.py"))
    reference.write_text(reference.read_text().replace("def run(hidden_states, weight)", "def run(x, weight)"))
    result = cli("validate", "--registry", bundled_registry.root, "--json")
    assert result.exit_code == 3
    message = json.loads(result.stdout)["problems"][0]["message"]
    assert "run(x, weight) does not take exactly the inputs hidden_states, weight" in message


def test_parallel_and_serial_validation_agree(monkeypatch: pytest.MonkeyPatch, bundled_registry: Registry) -> None:
    """A large registry is checked on every core; the report is the same as one process's."""
    from kictl import validate

    digests = _registry_with_chain(bundled_registry)
    bundled_registry.record_path("Workload", digests["workload"]).unlink()  # one dangling reference
    serial = validate.validate_registry(bundled_registry)
    monkeypatch.setattr(validate, "PARALLEL_THRESHOLD", 1)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    parallel = validate.validate_registry(bundled_registry)
    assert parallel.problems == serial.problems
    assert parallel.counts == serial.counts
    assert len(serial.problems) == 1
