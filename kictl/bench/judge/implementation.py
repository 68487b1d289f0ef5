"""What ``--impl`` names, made into an Implementation record and a folder a worker can import.

``--impl`` is one of:

* a Python file with ``run(...)``: the record holds that one file;
* a folder with ``implementation.json``: its members are those of an
  Implementation spec (``name``, ``entryPoint``, ``project``, ``runtime``,
  ``dependencies``, ``license``, ``availability``, ``revision``,
  ``description``, ``author``, ``targetHardware``, ``buildCommands``) plus an
  optional ``sources`` list of relative paths (default: every ``*.py`` below
  the folder), or ``"definitionReference": true`` for a folder that is the
  definition's reference: it holds no copy, and its one source is
  ``reference.py`` with the Definition record's ``reference`` text (the record
  is built from ``definitions/<family>/<name>/reference.py``).  The record
  embeds sources by content (path, sha256, text), so a pointer that resolves to
  the same bytes gives the same Implementation digest as the copy it replaces;
* the digest (or a unique prefix, or the name) of an Implementation record in
  the registry.

In every case the worker gets the record's sources as bytes with their
sha256 (``load_message``), checks them and imports them from its own
private folder, so that what runs is exactly what the record (and its
digest) holds, and no folder is shared between workers.

The record's name is the given name (or the file's stem) and the first six
hex digits of the sources' hash, e.g. ``flashinfer_wrapper_be0f02``, so that
edited sources never share a name.  A module may also define ``setup(...)``
with the same parameters as ``run``: stateful preparation (a FlashInfer
``plan()``) that kictl calls outside the timed region unless told to time it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from kictl import canon
from kictl.bench import wire
from kictl.errors import RecordError, UsageError
from kictl.records import (
    API_VERSION,
    DefinitionSpec,
    Implementation,
    ImplementationSpec,
    StoredRecord,
    record_from_value,
)
from kictl.store.inputs import parse_json_file
from kictl.store.registry import Registry

MANIFEST = "implementation.json"
_MANIFEST_MEMBERS = {
    "name",
    "project",
    "runtime",
    "entryPoint",
    "dependencies",
    "revision",
    "license",
    "availability",
    "author",
    "description",
    "targetHardware",
    "buildCommands",
    "sources",
    "definitionReference",
}
#: The file name a folder with ``definitionReference`` gives the definition's reference text.
REFERENCE_FILE = "reference.py"


@dataclass(frozen=True, slots=True)
class LoadedImplementation:
    """An Implementation record, its entry point, and whether its source is the definition's reference text."""

    record: StoredRecord
    entry_file: str
    function: str
    is_reference: bool

    @property
    def name(self) -> str:
        return self.record.name

    def load_message(self, constants: tuple[wire.Constant, ...] = ()) -> wire.Load:
        """What a worker needs to import it: the record's sources as bytes, with the record's sha256 of each, and
        the definition's ``constants`` (its constant axes), which ``run()`` may take as keyword-only parameters."""
        spec = self.record.model.spec
        assert isinstance(spec, ImplementationSpec)
        files = tuple(
            wire.SourceFile(
                path=_safe_relative(source.path, self.record.name),
                sha256=source.sha256,
                content=source.content.encode("utf-8"),
            )
            for source in spec.sources
        )
        return wire.Load(files=files, entry=self.entry_file, function=self.function, constants=constants)


def _source(path: Path, relative: str) -> dict[str, str]:
    try:
        content = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise UsageError(f"{path}: no such file") from exc
    except UnicodeDecodeError as exc:
        raise RecordError(f"{path}: sources must be UTF-8 text") from exc
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from exc
    return {"path": relative, "sha256": canon.sha256_hex(content.encode("utf-8")), "content": content}


def _safe_relative(text: str, where: str) -> str:
    path = PurePosixPath(text)
    if path.is_absolute() or ".." in path.parts or not path.parts or text != path.as_posix():
        raise RecordError(f"{where}: source path {text!r} must be relative, inside the folder, with '/' separators")
    return text


#: Hex digits of the record's own digest in a name made here (``torch_rmsnorm_<16 hex>``): 64 bits, so that
#: nobody makes a second implementation whose name is another's (six digits, 24 bits, took minutes to collide:
#: issue 40's c17).  The registry refuses a name held by another Implementation all the same
#: (``Registry.refuse_name_collisions``).
TAG_HEX = 16


def _named(stem: str, members: dict[str, Any], definition: StoredRecord) -> dict[str, Any]:
    """``members`` with the name ``<stem>_<tag>``: the tag is the digest of everything else the record holds
    (its sources, entry point, description, definition...), so two different implementations never share it."""
    content = {key: value for key, value in members.items() if key != "name"}
    content["definitionDigest"] = definition.digest
    tag = canon.sha256_hex(canon.canonical_bytes(content))[:TAG_HEX]
    return {**members, "name": f"{stem}_{tag}"}


def _legacy_name(record: StoredRecord) -> str:
    """The name kictl gave this record before issue 40: six hex digits of its sources' hash."""
    digest = hashlib.sha256()
    for source in sorted(record.raw["spec"]["sources"], key=lambda item: item["path"]):
        digest.update(f"{source['path']}\0{source['sha256']}\0".encode())
    return f"{record.name[: -TAG_HEX - 1]}_{digest.hexdigest()[:6]}"


def _without_name(raw: dict[str, Any]) -> dict[str, Any]:
    return {
        **raw,
        "metadata": {key: value for key, value in raw["metadata"].items() if key != "name"},
        "spec": {key: value for key, value in raw["spec"].items() if key != "name"},
    }


def _stored_twin(record: StoredRecord, registry: Registry | None) -> StoredRecord:
    """The record the registry already holds for exactly this implementation under the name kictl gave it
    before issue 40 (six hex digits), else ``record``: the runs of an unchanged folder keep naming the record
    its earlier runs name.  Only a record equal in everything but its name is taken."""
    if registry is None:
        return record
    digest = registry.implementation_names().get(_legacy_name(record))
    if digest is None:
        return record
    stored = registry.load(digest)
    return stored if _without_name(stored.raw) == _without_name(record.raw) else record


def _build(spec_members: dict[str, Any], definition: StoredRecord, where: str) -> StoredRecord:
    members = {"definitionDigest": definition.digest, **spec_members}
    metadata: dict[str, Any] = {"name": members.get("name")}
    description = members.get("description")
    if isinstance(description, str) and description:
        metadata["title"] = description.splitlines()[0][:200]
    raw = {"apiVersion": API_VERSION, "kind": "Implementation", "metadata": metadata, "spec": members}
    record = record_from_value(raw, source=where)
    if members["definitionDigest"] != definition.digest:
        raise UsageError(f"{where}: the implementation is for {members['definitionDigest']}, not {definition.digest}")
    return record


def _from_file(path: Path, definition: StoredRecord) -> StoredRecord:
    if path.suffix != ".py":
        raise UsageError(f"{path}: --impl takes a .py file, a folder with {MANIFEST}, or an Implementation digest")
    source = _source(path, path.name)
    members = {"runtime": "python", "entryPoint": f"{path.name}::run", "sources": [source]}
    return _build(_named(path.stem, members, definition), definition, str(path))


def _from_folder(folder: Path, definition: StoredRecord) -> StoredRecord:
    manifest_path = folder / MANIFEST
    where = str(manifest_path)
    if not manifest_path.is_file():
        raise UsageError(f"{folder}: a folder given to --impl needs an {MANIFEST}")
    manifest = parse_json_file(manifest_path, source=where)
    if not isinstance(manifest, dict):
        raise RecordError(f"{where}: $: expected an object")
    unknown = sorted(set(manifest) - _MANIFEST_MEMBERS)
    if unknown:
        raise RecordError(f"{where}: $.{unknown[0]}: unknown member")
    for member in ("name", "entryPoint"):
        if not isinstance(manifest.get(member), str):
            raise RecordError(f"{where}: $.{member}: a string is required")
    listed = manifest.pop("sources", None)
    points_at_reference = manifest.pop("definitionReference", False)
    if points_at_reference is not False:
        return _reference_folder(folder, manifest, listed, points_at_reference, definition, where)
    if listed is None:
        paths = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.py") if "__pycache__" not in p.parts)
    elif isinstance(listed, list) and all(isinstance(item, str) for item in listed):
        paths = [_safe_relative(item, where) for item in listed]
    else:
        raise RecordError(f"{where}: $.sources: a list of relative paths is expected")
    sources = [_source(folder / relative, relative) for relative in paths]
    members = {"runtime": "python", **manifest, "sources": sources}
    return _build(_named(manifest["name"], members, definition), definition, where)


def _reference_folder(
    folder: Path, manifest: dict[str, Any], listed: Any, flag: Any, definition: StoredRecord, where: str
) -> StoredRecord:
    """The Implementation of a folder whose manifest says it is the definition's reference (no copy kept)."""
    if flag is not True:
        raise RecordError(f"{where}: $.definitionReference: true is the only value (or leave it out)")
    if listed is not None:
        raise RecordError(f"{where}: $.sources: a folder that is the definition's reference lists no sources")
    copies = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.py") if "__pycache__" not in p.parts)
    if copies:
        raise RecordError(
            f"{where}: the folder is the definition's reference (definitionReference) but holds {copies[0]}; "
            "remove it: the source is the Definition's reference"
        )
    spec = definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    content = spec.reference.encode("utf-8")
    source = {"path": REFERENCE_FILE, "sha256": canon.sha256_hex(content), "content": spec.reference}
    members = {"runtime": "python", **manifest, "sources": [source]}
    return _build(_named(manifest["name"], members, definition), definition, where)


def load_implementation(reference: str, definition: StoredRecord, registry: Registry | None) -> LoadedImplementation:
    """The implementation ``--impl`` names, for ``definition``.

    Raises ``UsageError`` for a path that is no implementation, ``RecordError``
    for invalid sources or manifests, ``NotFoundError`` for an unknown digest.
    """
    path = Path(reference).expanduser()
    def_spec = definition.model.spec
    assert isinstance(def_spec, DefinitionSpec)
    if path.is_dir():
        record = _stored_twin(_from_folder(path, definition), registry)
    elif path.is_file():
        record = _stored_twin(_from_file(path, definition), registry)
    elif path.suffix == ".py" or "/" in reference:
        raise UsageError(f"{reference}: no such file or folder")
    else:
        if registry is None:
            raise UsageError(f"{reference}: not a file or folder, and no registry to look an Implementation up in")
        record = registry.resolve(reference, ["Implementation"])
        assert isinstance(record.model, Implementation)
        if record.model.spec.definition_digest not in (None, definition.digest):
            raise UsageError(f"{record.name} implements {record.model.spec.definition_digest}, not {definition.name}")
    spec = record.model.spec
    assert isinstance(spec, ImplementationSpec)
    entry_file, function = spec.entry_point.split("::", 1)
    for source in spec.sources:
        _safe_relative(source.path, record.name)
    if entry_file not in {source.path for source in spec.sources}:
        raise UsageError(f"{record.name}: entry point file {entry_file} is not among its sources")
    is_reference = len(spec.sources) == 1 and spec.sources[0].content == def_spec.reference and function == "run"
    return LoadedImplementation(record, entry_file, function, is_reference)


def reference_load(spec: DefinitionSpec) -> wire.Load:
    """The definition's reference, from kictl's own copy of the record, for kictl's reference worker."""
    content = spec.reference.encode("utf-8")
    source = wire.SourceFile(path="reference.py", sha256=hashlib.sha256(content).hexdigest(), content=content)
    return wire.Load(files=(source,), entry="reference.py", function="run")
