"""--impl: a file, a folder with implementation.json, or a registry digest; what runs is what is recorded."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from kictl.bench.judge.implementation import load_implementation
from kictl.errors import NotFoundError, RecordError, UsageError
from kictl.records import ImplementationSpec, StoredRecord
from kictl.store import Registry
from tests.bench.conftest import IMPLEMENTATIONS
from tests.conftest import REPO_ROOT

RMSNORM = "rmsnorm_h4096"


def _definition(registry: Registry, name: str = RMSNORM) -> StoredRecord:
    return registry.resolve(name, ["Definition"])


def test_a_file_becomes_a_record_named_after_its_content(bundled_registry: Registry, tmp_path: Path) -> None:
    source = tmp_path / "fast_norm.py"
    source.write_text("def run(hidden_states, weight):\n    return hidden_states\n", encoding="utf-8")
    loaded = load_implementation(str(source), _definition(bundled_registry), bundled_registry)
    spec = loaded.record.model.spec
    assert isinstance(spec, ImplementationSpec)
    assert loaded.name.startswith("fast_norm_")
    assert len(loaded.name) == len("fast_norm_") + 6
    assert spec.entry_point == "fast_norm.py::run"
    assert spec.definition_digest == _definition(bundled_registry).digest
    assert [s.path for s in spec.sources] == ["fast_norm.py"]
    assert not loaded.is_reference
    # the worker gets the recorded bytes with their sha256, never a path to the original file
    message = loaded.load_message()
    assert [(f.path, f.content) for f in message.files] == [("fast_norm.py", source.read_bytes())]
    assert message.files[0].sha256 == hashlib.sha256(source.read_bytes()).hexdigest()
    assert (message.entry, message.function) == ("fast_norm.py", "run")
    source.write_text("def run(hidden_states, weight):\n    return weight\n", encoding="utf-8")
    edited = load_implementation(str(source), _definition(bundled_registry), bundled_registry)
    assert edited.name != loaded.name


@pytest.mark.parametrize(
    "definition",
    sorted(path.name for path in IMPLEMENTATIONS.iterdir() if path.is_dir()),
)
def test_bundled_implementations_load_and_the_reference_is_the_reference(
    bundled_registry: Registry, definition: str
) -> None:
    folders = sorted(path for path in (IMPLEMENTATIONS / definition).iterdir() if path.is_dir())
    names = {path.name for path in folders}
    assert "reference" in names
    assert any(name.startswith("torch") for name in names)
    if definition.startswith("gqa_"):
        assert "flashinfer_wrapper" in names
    record = _definition(bundled_registry, definition)
    for folder in folders:
        loaded = load_implementation(str(folder), record, bundled_registry)
        assert loaded.name.startswith(folder.name + "_")
        assert loaded.is_reference == (folder.name == "reference"), folder
    # the reference folder points at the definition's reference.py and holds no copy of it
    assert not list((IMPLEMENTATIONS / definition / "reference").glob("*.py"))


def test_bundled_implementation_digests_are_those_of_the_stored_records(tmp_path: Path) -> None:
    """Every bundled folder gives the digest its record in registry/records has; a pointer gives a copy's digest.

    An Implementation embeds its sources by content (path, sha256, text): a folder whose manifest says
    ``definitionReference`` yields the same record, byte for byte, as a folder holding a copy of the
    definition's reference.py, so the runs measured against the copies still name these folders' records.
    """
    registry = Registry(REPO_ROOT)
    stored = {record.name: record.digest for record in registry.iter_records(["Implementation"])}
    matched = 0
    for folder in sorted(path for path in IMPLEMENTATIONS.glob("*/*") if path.is_dir()):
        definition = registry.resolve(folder.parent.name, ["Definition"])
        loaded = load_implementation(str(folder), definition, registry)
        if loaded.name in stored:
            assert loaded.record.digest == stored[loaded.name], folder
            matched += 1
        if folder.name != "reference":
            continue
        copy = tmp_path / folder.parent.name
        shutil.copytree(folder, copy)
        manifest = json.loads((copy / "implementation.json").read_text())
        assert manifest.pop("definitionReference") is True
        (copy / "implementation.json").write_text(json.dumps(manifest), encoding="utf-8")
        family = definition.raw["spec"]["family"]
        shutil.copy(REPO_ROOT / "definitions" / family / definition.name / "reference.py", copy / "reference.py")
        assert load_implementation(str(copy), definition, registry).record.raw == loaded.record.raw, folder
    assert matched >= 9  # the implementations of the three attention definitions, run on the H200


def test_a_reference_pointer_is_only_a_pointer(tmp_path: Path) -> None:
    bundled_registry = Registry(REPO_ROOT)  # read only: the definition is all it is asked for
    definition = _definition(bundled_registry)
    folder = tmp_path / "ref"
    shutil.copytree(IMPLEMENTATIONS / RMSNORM / "reference", folder)
    manifest = json.loads((folder / "implementation.json").read_text())
    loaded = load_implementation(str(folder), definition, bundled_registry)
    assert loaded.is_reference
    assert [(f.path, f.content.decode()) for f in loaded.load_message().files] == [
        ("reference.py", definition.raw["spec"]["reference"])
    ]
    for changes, problem in (
        ({"definitionReference": "yes"}, r"\$\.definitionReference: true is the only value"),
        ({"sources": ["reference.py"]}, r"\$\.sources: a folder that is the definition's reference lists no sources"),
    ):
        (folder / "implementation.json").write_text(json.dumps({**manifest, **changes}), encoding="utf-8")
        with pytest.raises(RecordError, match=problem):
            load_implementation(str(folder), definition, bundled_registry)
    (folder / "implementation.json").write_text(json.dumps(manifest), encoding="utf-8")
    (folder / "reference.py").write_text("def run(hidden_states, weight):\n    return weight\n", encoding="utf-8")
    with pytest.raises(RecordError, match=r"holds reference\.py; remove it"):
        load_implementation(str(folder), definition, bundled_registry)


def test_a_registry_digest_is_loaded_from_the_record(bundled_registry: Registry) -> None:
    definition = _definition(bundled_registry)
    loaded = load_implementation(str(IMPLEMENTATIONS / RMSNORM / "torch_rmsnorm"), definition, bundled_registry)
    bundled_registry.add([loaded.record])
    again = load_implementation(loaded.record.digest[:20], definition, bundled_registry)
    assert again.record.digest == loaded.record.digest
    assert [f.path for f in again.load_message().files] == ["rmsnorm.py"]
    with pytest.raises(NotFoundError):
        load_implementation("0123456789abcdef", definition, bundled_registry)


def test_manifest_problems_are_reported(bundled_registry: Registry, tmp_path: Path) -> None:
    definition = _definition(bundled_registry)
    folder = tmp_path / "impl"
    folder.mkdir()
    with pytest.raises(UsageError, match=r"needs an implementation\.json"):
        load_implementation(str(folder), definition, bundled_registry)
    (folder / "kernel.py").write_text("def run(hidden_states, weight):\n    return hidden_states\n", encoding="utf-8")
    manifest = folder / "implementation.json"
    manifest.write_text(json.dumps({"name": "k", "entryPoint": "kernel.py::run", "speed": "fast"}), encoding="utf-8")
    with pytest.raises(RecordError, match=r"\$\.speed: unknown member"):
        load_implementation(str(folder), definition, bundled_registry)
    manifest.write_text(
        json.dumps({"name": "k", "entryPoint": "kernel.py::run", "sources": ["../escape.py"]}), encoding="utf-8"
    )
    with pytest.raises(RecordError, match="must be relative, inside the folder"):
        load_implementation(str(folder), definition, bundled_registry)
    manifest.write_text(json.dumps({"name": "k", "entryPoint": "other.py::run"}), encoding="utf-8")
    with pytest.raises(RecordError, match=r"entry point file 'other\.py' is not among the sources"):
        load_implementation(str(folder), definition, bundled_registry)
    with pytest.raises(UsageError, match="no such file or folder"):
        load_implementation(str(tmp_path / "missing.py"), definition, bundled_registry)
