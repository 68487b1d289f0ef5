"""KictlError carries where it happened as data (path, pointer), not as text to cut out again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kictl.errors import NotFoundError, RecordError
from kictl.records import load_record_file
from kictl.validate import check_record_file
from tests import factories


def test_the_text_is_path_pointer_message() -> None:
    error = RecordError("unknown kind 'X'", path="a/b.json", pointer="$.kind", details=["a/b.json: $.spec: more"])
    assert (error.path, error.pointer, error.reason) == ("a/b.json", "$.kind", "unknown kind 'X'")
    assert error.message == "a/b.json: $.kind: unknown kind 'X'"
    assert error.diagnostics() == "a/b.json: $.kind: unknown kind 'X'\na/b.json: $.spec: more"
    assert error.at("a/b.json") == "$.kind: unknown kind 'X'"
    assert error.at("elsewhere.json") == error.message
    assert error.details_at("a/b.json") == ["$.spec: more"]
    assert RecordError("plain").message == "plain"
    assert NotFoundError("no such", path="x", candidates=["a"]).diagnostics() == "x: no such\ncandidates: a"


def test_a_schema_error_knows_its_file_and_json_path(tmp_path: Path) -> None:
    record = factories.definition()
    record["spec"]["axes"]["M"] = {"type": "var", "extra": 1}
    data = json.dumps(record).encode()
    with pytest.raises(RecordError) as caught:
        load_record_file(data, source="registry/records/Definition/ab/x.json")
    assert caught.value.path == "registry/records/Definition/ab/x.json"
    assert caught.value.pointer == "$.spec.axes.M.extra"
    _, problems = check_record_file("registry/records/Definition/ab/x.json", data)
    assert any(problem.message.startswith("$.spec.axes.M.extra: ") for problem in problems), problems
