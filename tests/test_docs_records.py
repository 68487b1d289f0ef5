"""docs/records.md stays true: every example validates and has the digest it states, every field is documented."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from kictl import canon
from kictl.records import _RECORD_CLASSES, KINDS, record_from_value

DOC = Path(__file__).resolve().parents[1] / "docs" / "records.md"


def _sections() -> dict[str, str]:
    text = DOC.read_text()
    parts = re.split(r"^## ", text, flags=re.M)
    return {part.split("\n", 1)[0].strip(): part for part in parts[1:]}


def _example(section: str) -> tuple[dict[str, Any], str]:
    (block,) = re.findall(r"```json\n(.*?)```", section, flags=re.S)
    (digest,) = re.findall(r"Its digest: `(sha256:[0-9a-f]{64})`", section)
    return json.loads(block), digest


def _fields(model: type[BaseModel]) -> set[str]:
    """The wire names of a model's fields and of the fields of the models inside it."""
    names: set[str] = set()
    for name, info in model.model_fields.items():
        names.add(info.alias or name)
        for inner in _models_in(info.annotation):
            names |= _fields(inner)
    return names


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_has_a_valid_example_with_its_digest(kind: str) -> None:
    value, digest = _example(_sections()[kind])
    record = record_from_value(value, source=f"docs/records.md ({kind})")
    assert record.kind == kind
    assert canon.record_digest(value) == digest == record.digest


def test_the_examples_reference_each_other() -> None:
    sections = _sections()
    digests = {_example(sections[kind])[1]: kind for kind in KINDS}
    for kind in KINDS:
        record = record_from_value(_example(sections[kind])[0])
        for _, target, target_kind in record.references():
            assert digests.get(target) == target_kind, (kind, target)


@pytest.mark.parametrize("kind", KINDS)
def test_every_spec_field_is_documented(kind: str) -> None:
    section = _sections()[kind]
    spec = _RECORD_CLASSES[kind].model_fields["spec"].annotation
    assert isinstance(spec, type)
    missing = sorted(name for name in _fields(spec) if f"`{name}`" not in section and f"{name}`" not in section)
    # names listed inside a compound cell, e.g. `{path, sha256, content}`, count as documented
    missing = [name for name in missing if not re.search(rf"[{{ ,]{name}[,}}?]", section)]
    assert not missing, f"docs/records.md § {kind} does not document {missing}"
