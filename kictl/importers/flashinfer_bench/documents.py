"""Definitions, solutions and workloads: the documents of a dataset made into Definition, Implementation and
Workload records (safetensors inputs copied by digest, or kept as missing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kictl import blobs, canon, families
from kictl.errors import RecordError
from kictl.importers.flashinfer_bench.model import (
    _AXIS_MEMBERS,
    _DEFINITION_MEMBERS,
    _DEPENDENCY_RE,
    _SOLUTION_MEMBERS,
    _SOLUTION_SPEC_MEMBERS,
    _TENSOR_MEMBERS,
    Limits,
    family_for_op_type,
)
from kictl.importers.flashinfer_bench.values import (
    _build,
    _content_key,
    _describe_non_finite,
    _did_you_mean,
    _load_json,
    _object,
    _path,
    _sha256_text,
    _Skip,
    _string,
    _type_name,
)
from kictl.importers.flashinfer_bench.walker import _Line, _Walker
from kictl.records import (
    DefinitionSpec,
    StoredRecord,
)


@dataclass
class _Definition:
    record: StoredRecord
    spec: DefinitionSpec
    file: str


@dataclass
class _Solution:
    record: StoredRecord
    definition: str
    file: str


@dataclass
class _PendingWorkload:
    """A workload built from a line, not stored yet, with what storing it brings along."""

    definition: str
    record: StoredRecord | None = None
    uuid: str | None = None
    key: bytes = b""  # canonical bytes of the source's {axes, inputs}
    absent: set[str] = field(default_factory=set)  # definition inputs the source gives no source for
    blobs: dict[str, bytes] = field(default_factory=dict)
    missing: list[tuple[str, str]] = field(default_factory=list)  # (source path, input name)
    matched: bool = False  # an already stored workload (the 2025 match): nothing to store
    unmatched: bool = False  # a 2025 trace workload that matched no workload line


class _DocumentReader(_Walker):
    """Reads the definitions, solutions and workload lines of one dataset folder."""

    def __init__(self, root: Path, limits: Limits, taken_names: Mapping[str, list[StoredRecord]]) -> None:
        super().__init__(root, limits)
        self.taken_names = taken_names
        self.refused_definitions: dict[str, str] = {}  # name -> the file of a definition refused for its name
        self.definitions: dict[str, _Definition] = {}
        self.solutions: dict[str, _Solution] = {}
        self.workloads_by_content: dict[tuple[str, bytes], list[StoredRecord]] = {}
        self.blob_cache: dict[Path, tuple[bytes, dict[str, blobs.TensorEntry]]] = {}
        self.missing: dict[str, dict[tuple[str, str], None]] = {}  # path -> {(workload, input)}
        self.solution_without_evaluation = 0
        self.dropped: dict[str, set[str]] = {}
        self.unmatched_workloads = 0
        self.incomplete_inputs: dict[str, set[str]] = {}
        self.workload_by_uuid: dict[tuple[str, str], str] = {}  # (definition, uuid) -> digest
        self.redescribed: set[tuple[str, str]] = set()

    def _definition_file(self, path: Path) -> None:
        value = _object(_load_json(self._read_text(path)))
        name = _string(value.get("name"), "name")
        op_type = value.get("op_type", value.get("type"))
        if op_type is None:
            raise _Skip("$: no op_type (nor the 2025 shape's type) names the family")
        op_type = _string(op_type, "op_type" if "op_type" in value else "type")
        spec: dict[str, Any] = {
            "name": name,
            "family": family_for_op_type(op_type, name),
            "axes": {
                axis: self._pick(_object(item, "axes", axis), _AXIS_MEMBERS, "definition", "axes")
                for axis, item in _object(value.get("axes"), "axes").items()
            },
            "inputs": self._tensors(value, "inputs"),
            "outputs": self._tensors(value, "outputs"),
            "reference": _string(value.get("reference"), "reference"),
        }
        for member in ("description", "constraints", "tags", "determinism"):  # determinism: written by kictl
            if value.get(member) is not None:
                spec[member] = value[member]
        self._note_dropped("definition", set(value) - _DEFINITION_MEMBERS)
        record = _build("Definition", name, spec)
        assert isinstance(record.model.spec, DefinitionSpec)
        registered = self.taken_names.get(name, [])
        if registered and all(known.digest != record.digest for known in registered):
            taken = registered[0]
            self.refused_definitions[name] = self._relative(path)
            theirs, ours = taken.raw["spec"], record.raw["spec"]
            differing = sorted(member for member in {*theirs, *ours} if theirs.get(member) != ours.get(member))
            raise _Skip(
                f"the registry already has a Definition named {name} ({taken.digest[:19]}…), which differs from "
                f"this one ({record.digest[:19]}…) in {', '.join(f'spec.{m}' for m in differing)}; "
                "two Definitions of one name make the name ambiguous, so neither this one nor anything of it "
                "is imported. Import into a scratch registry (docs/importing.md), or pass --allow-redefinition "
                "to add it as another version"
            )
        known = self.definitions.get(name)
        if known is not None:
            if known.record.digest == record.digest:
                return
            raise _Skip(f"definition {name} is already defined by {known.file} with other content")
        self.definitions[name] = _Definition(record, record.model.spec, self._relative(path))
        self._add(record)

    def _tensors(self, value: dict[str, Any], group: str) -> dict[str, Any]:
        return {
            tensor: self._pick(_object(item, group, tensor), _TENSOR_MEMBERS, "definition", group)
            for tensor, item in _object(value.get(group), group).items()
        }

    def _pick(self, item: dict[str, Any], members: tuple[str, ...], what: str, group: str) -> dict[str, Any]:
        """The members of an axis or tensor that the index keeps; others are noted as dropped."""
        self._note_dropped(what, {f"{group}.*.{member}" for member in set(item) - set(members)})
        return {
            member: item[member]
            for member in members
            if member in item and (item[member] is not None or member == "shape")
        }

    def _note_dropped(self, what: str, members: set[str]) -> None:
        if members:
            self.dropped.setdefault(what, set()).update(members)

    def _solution_file(self, path: Path) -> None:
        value = _object(_load_json(self._read_text(path)))
        name = _string(value.get("name"), "name")
        definition_name = _string(value.get("definition"), "definition")
        definition = self.definitions.get(definition_name)
        if definition is None:
            raise _Skip(f"solution {name}: {self._no_definition(definition_name)}")
        build = _object(value.get("spec"), "spec")
        language = _string(build.get("language"), "spec", "language")
        sources = value.get("sources")
        if not isinstance(sources, list) or not sources:
            raise _Skip("$.sources: expected a non-empty array of {path, content}")
        files = []
        for index, item in enumerate(sources):
            item = _object(item, "sources", index)
            content = item.get("content")
            if not isinstance(content, str):
                raise _Skip(f"{_path('sources', index, 'content')}: expected a string")
            files.append(
                {"path": _string(item.get("path"), "sources", index, "path"), "sha256": _sha256_text(content),
                 "content": content}
            )  # fmt: skip
        spec: dict[str, Any] = {
            "name": name,
            "definitionDigest": definition.record.digest,
            "runtime": language.lower(),
            "entryPoint": _string(build.get("entry_point"), "spec", "entry_point"),
            "sources": files,
            "availability": "source",
        }
        dependencies = self._dependencies(build.get("dependencies"))
        if dependencies is not None:
            spec["dependencies"] = dependencies
        if value.get("author") is not None:
            spec["author"] = _string(value["author"], "author")
        if value.get("description") is not None:
            spec["description"] = value["description"]
        if build.get("target_hardware") is not None:
            spec["targetHardware"] = build["target_hardware"]
        if build.get("build_commands") is not None:
            spec["buildCommands"] = build["build_commands"]
        self._note_dropped("solution", set(value) - _SOLUTION_MEMBERS)
        self._note_dropped("solution", {f"spec.{member}" for member in set(build) - _SOLUTION_SPEC_MEMBERS})
        record = _build("Implementation", name, spec, title=f"{name} ({language.lower()}) for {definition_name}")
        known = self.solutions.get(name)
        if known is not None:
            if known.record.digest == record.digest:
                return
            raise _Skip(f"solution {name} is already defined by {known.file} with other content")
        self.solutions[name] = _Solution(record, definition_name, self._relative(path))
        self._add(record)

    @staticmethod
    def _dependencies(value: Any) -> dict[str, str] | None:
        """``["torch", "triton >= 2.4.0"]`` -> ``{"torch": "*", "triton": ">= 2.4.0"}``."""
        if value is None:
            return None
        if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            return {str(key): version for key, version in value.items()}
        if not isinstance(value, list):
            raise _Skip("$.spec.dependencies: expected an array of strings")
        out: dict[str, str] = {}
        for index, item in enumerate(value):
            match = _DEPENDENCY_RE.match(item) if isinstance(item, str) else None
            if match is None:
                raise _Skip(f"{_path('spec', 'dependencies', index)}: expected a package and an optional version")
            out[match.group(1)] = match.group(2) or "*"
        return out

    def _definition_of(self, line: _Line) -> _Definition:
        definition = self.definitions.get(line.definition)
        if definition is None:
            raise _Skip(self._no_definition(line.definition))
        return definition

    def _no_definition(self, name: str) -> str:
        refused = self.refused_definitions.get(name)
        if refused is not None:
            return f"definition {name} was not imported: the registry has another Definition of that name ({refused})"
        return f"definition {name} is not in the dataset (or was skipped){_did_you_mean(name, self.definitions)}"

    def _workload_line(self, line: _Line) -> None:
        definition = self._definition_of(line)
        pending = self._build_workload(definition, line.value["workload"])
        self._commit_workload(pending)
        if line.value.get("solution") not in (None, ""):
            self.solution_without_evaluation += 1

    def _build_workload(self, definition: _Definition, source: dict[str, Any]) -> _PendingWorkload:
        """The Workload record of a source workload, and what storing it brings along."""
        uuid = source.get("uuid")
        if uuid is not None:
            uuid = _string(uuid, "workload", "uuid")
        axes = _object(source.get("axes"), "workload", "axes")
        inputs = _object(source.get("inputs"), "workload", "inputs")
        for axis, amount in axes.items():
            if isinstance(amount, bool) or not isinstance(amount, int):
                raise _Skip(f"{_path('workload', 'axes', axis)}: expected an integer, found {_type_name(amount)}")
        try:
            families.full_axes(definition.spec, axes, source="$.workload.axes")
        except RecordError as exc:
            raise _Skip(exc.message) from exc
        unknown = sorted(set(inputs) - set(definition.spec.inputs))
        if unknown:
            raise _Skip(f"{_path('workload', 'inputs', unknown[0])}: not an input of {definition.spec.name}")
        label = uuid if uuid is not None else "_".join(f"{axis}{amount}" for axis, amount in axes.items()) or "all"
        pending = _PendingWorkload(
            definition=definition.spec.name,
            uuid=uuid,
            key=_content_key(axes, inputs),
            absent=set(definition.spec.inputs) - set(inputs),
        )
        converted = {name: self._input(name, item, pending) for name, item in inputs.items()}
        spec: dict[str, Any] = {"definitionDigest": definition.record.digest, "axes": axes, "inputs": converted}
        if uuid is not None:
            spec["uuid"] = uuid
        title = f"{definition.spec.name}: " + (", ".join(f"{a}={v}" for a, v in axes.items()) or "no variable axes")
        pending.record = _build("Workload", label, spec, title=title)
        return pending

    def _commit_workload(self, pending: _PendingWorkload) -> StoredRecord:
        """Store a built workload with its blobs; index it for the 2025 match by axes and inputs."""
        record = pending.record
        assert record is not None
        if pending.matched:
            return record
        self._add(record)
        for digest, data in pending.blobs.items():
            self.dataset.blobs.setdefault(digest, data)
        for path_text, input_name in pending.missing:
            self.missing.setdefault(path_text, {})[(record.name, input_name)] = None
        if pending.absent:
            self.incomplete_inputs.setdefault(pending.definition, set()).update(pending.absent)
        if pending.uuid is not None:
            known = self.workload_by_uuid.setdefault((pending.definition, pending.uuid), record.digest)
            if known != record.digest:
                self.redescribed.add((pending.definition, pending.uuid))
        same = self.workloads_by_content.setdefault((pending.definition, pending.key), [])
        if all(known.digest != record.digest for known in same):
            same.append(record)
        if pending.unmatched:
            self.unmatched_workloads += 1
        return record

    def _input(self, name: str, item: Any, pending: _PendingWorkload) -> dict[str, Any]:
        item = _object(item, "workload", "inputs", name)
        kind = item.get("type")
        if kind == "random":
            return {"type": "random"}
        if kind == "scalar":
            value = item.get("value")
            if isinstance(value, float) and not math.isfinite(value):
                raise _Skip(f"{_path('workload', 'inputs', name, 'value')}: {_describe_non_finite(value)}")
            if not isinstance(value, bool | int | float):
                raise _Skip(f"{_path('workload', 'inputs', name, 'value')}: expected a number or a boolean")
            return {"type": "scalar", "value": value}
        if kind == "safetensors":
            path_text = _string(item.get("path"), "workload", "inputs", name, "path")
            key = _string(item.get("tensor_key"), "workload", "inputs", name, "tensor_key")
            return self._blob(path_text, key, name, pending)
        raise _Skip(f"{_path('workload', 'inputs', name, 'type')}: unknown input type {kind!r}")

    def _blob(self, path_text: str, key: str, name: str, pending: _PendingWorkload) -> dict[str, Any]:
        """A safetensors input: copied by digest when the dataset has the file, else kept as missing.

        The path is relative to the dataset's root (the flashinfer-bench
        ``SafetensorsInput``); a path that leads outside the dataset is never
        read and counts as missing.
        """
        root = self.root.resolve()
        resolved = (root / path_text).resolve()
        if not resolved.is_relative_to(root) or not resolved.is_file():
            pending.missing.append((path_text, name))
            return {"type": "blob", "key": key, "path": path_text, "missing": True}
        if resolved not in self.blob_cache:
            limit = self.limits.blob_bytes
            try:
                with resolved.open("rb") as handle:
                    data = handle.read(limit + 1)
            except OSError as exc:
                raise _Skip(f"{path_text}: cannot read: {exc.strerror}") from exc
            if len(data) > limit:
                raise _Skip(f"{path_text}: the file is over the limit of {limit} bytes; not read")
            try:
                header = blobs.read_header(data, source=path_text)
            except RecordError as exc:
                raise _Skip(exc.message) from exc
            self.blob_cache[resolved] = (data, header)
        data, header = self.blob_cache[resolved]
        if key not in header:
            raise _Skip(
                f"{_path('workload', 'inputs', name, 'tensor_key')}: {path_text} has no tensor {key!r} "
                f"(it has {', '.join(sorted(header)) or 'none'})"
            )
        digest = canon.bytes_digest(data)
        pending.blobs[digest] = data
        return {"type": "blob", "digest": digest, "key": key}

    def _trace_workload(self, definition: _Definition, line: _Line) -> _PendingWorkload:
        """The workload a trace line measured: its own uuid, else the 2025 match by axes and inputs."""
        source = line.value["workload"]
        if source.get("uuid") is not None:
            return self._build_workload(definition, source)
        key = _content_key(source.get("axes"), source.get("inputs"))
        matches = self.workloads_by_content.get((definition.spec.name, key), [])
        if len(matches) == 1:
            return _PendingWorkload(definition=definition.spec.name, record=matches[0], matched=True)
        if len(matches) > 1:
            uuids = ", ".join(record.name for record in matches)
            raise _Skip(f"$.workload: has no uuid and matches {len(matches)} workloads of {line.definition} ({uuids})")
        pending = self._build_workload(definition, source)
        pending.unmatched = True
        return pending
