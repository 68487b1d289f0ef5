"""Strict parsing, RFC 8785 canonical bytes, the registry's normal form and digests."""

from __future__ import annotations

import hashlib
import json
import math
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from kictl import canon
from kictl.errors import RecordError
from tests.conftest import ASSETS

CANON = ASSETS / "canon"


# --------------------------------------------------------------------------- known answers


def _number_vectors() -> list[tuple[str, str]]:
    lines = (CANON / "numbers.txt").read_text().splitlines()
    return [tuple(line.split()) for line in lines if line and not line.startswith("#")]  # type: ignore[misc]


@pytest.mark.parametrize(("bits", "expected"), _number_vectors())
def test_rfc8785_appendix_b_numbers(bits: str, expected: str) -> None:
    value = struct.unpack(">d", bytes.fromhex(bits))[0]
    assert canon.es6_number(value) == expected
    assert canon.canonical_bytes(value) == expected.encode()
    assert canon.pretty_bytes(value) == expected.encode() + b"\n"


@pytest.mark.parametrize("example", ["rfc8785-3.2.2", "rfc8785-3.2.3"])
def test_rfc8785_examples(example: str) -> None:
    value = canon.parse_json((CANON / f"{example}.input.json").read_bytes())
    assert canon.canonical_bytes(value) == (CANON / f"{example}.output.json").read_bytes()


def test_record_digest_covers_apiversion_kind_spec_only() -> None:
    record = {"apiVersion": "v", "kind": "K", "metadata": {"name": "a"}, "spec": {"b": 1, "a": [1.5, "x"]}}
    expected = hashlib.sha256(b'{"apiVersion":"v","kind":"K","spec":{"a":[1.5,"x"],"b":1}}').hexdigest()
    assert canon.record_digest(record) == f"sha256:{expected}"
    retitled = {**record, "metadata": {"name": "b", "title": "other"}}
    assert canon.record_digest(retitled) == canon.record_digest(record)
    assert canon.record_digest({**record, "spec": {"b": 2, "a": [1.5, "x"]}}) != canon.record_digest(record)


def test_record_digest_needs_the_covered_members() -> None:
    with pytest.raises(RecordError, match="lacks spec"):
        canon.record_digest({"apiVersion": "v", "kind": "K"})


# --------------------------------------------------------------------------- strict parsing


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": {"b": 1, "b": 2}}', r'\$\.a: duplicate key "b" \(line 1, column 16\)'),
        ('{"spec": {"x": NaN}}', r"\$\.spec\.x: NaN and Infinity are not allowed"),
        ('{"spec": {"x": [1, Infinity]}}', r"\$\.spec\.x\[1\]: NaN and Infinity"),
        ('{"x": -Infinity}', r"\$\.x: NaN and Infinity"),
        ('{"x": 9007199254740993}', r"\$\.x: integer 9007199254740993 is beyond"),
        ('{"x": -9007199254740993}', r"\$\.x: integer -9007199254740993 is beyond"),
        ('{"x": 1e400}', r"\$\.x: number 1e400 is too large"),
        ('{"x": [1, 2,]}', r"\$\.x\[2\]: expected a JSON value"),
        ('{"a b": {"c": tru}}', r'\$\["a b"\]\.c: expected a JSON value'),
        ('{"x": 1} {}', r"\$: extra data"),
        ("", r"\$: expected a JSON value, found end of input"),
    ],
)
def test_strict_parser_names_the_path(text: str, message: str) -> None:
    with pytest.raises(RecordError, match=r"^file\.json: " + message):
        canon.parse_json(text, source="file.json")


def test_parser_rejects_bytes_that_are_not_utf8() -> None:
    with pytest.raises(RecordError, match="not UTF-8"):
        canon.parse_json(b'{"x": "\xff"}', source="f")


def test_safe_integers_stay_integers() -> None:
    value = canon.parse_json('{"a": 9007199254740991, "b": -9007199254740991, "c": 1.0}')
    assert value == {"a": 9007199254740991, "b": -9007199254740991, "c": 1.0}
    assert isinstance(value["a"], int)


# --------------------------------------------------------------------------- the 2^53..1e21 regression


def test_float_between_2_53_and_1e21_round_trips() -> None:
    """JCS writes 1e20 as 100000000000000000000; read back naively it is an int rfc8785 refuses.

    kictl's parser reads such a literal back as the double it is the canonical
    form of, so canonical bytes always parse to the same value and digest.
    """
    record = {"apiVersion": "v", "kind": "K", "spec": {"flops": 1e20, "big": 2.0**60}}
    data = canon.canonical_bytes(record)
    assert b'"flops":100000000000000000000' in data
    assert b'"big":1152921504606847000' in data
    with pytest.raises(rfc8785.IntegerDomainError):
        rfc8785.dumps(json.loads(data))  # the hazard STYLE.md warns about
    again = canon.parse_json(data)
    assert again["spec"]["flops"] == 1e20
    assert isinstance(again["spec"]["flops"], float)
    assert canon.canonical_bytes(again) == data
    assert canon.record_digest(again) == canon.record_digest(record)
    assert canon.parse_json(canon.pretty_bytes(record)) == again


def test_non_canonical_big_integers_are_still_rejected() -> None:
    # 2**60 is exact as a double, but JCS would write it 1152921504606847000: this literal is not JCS
    with pytest.raises(RecordError, match="beyond"):
        canon.parse_json('{"x": 1152921504606846976}')


# --------------------------------------------------------------------------- normal form


def test_pretty_bytes_is_indented_jcs() -> None:
    value = {"b": [1, {"z": None, "a": True}], "a": "é", "c": {}, "d": []}
    assert (
        canon.pretty_bytes(value)
        == (
            '{\n  "a": "é",\n  "b": [\n    1,\n    {\n      "a": true,\n      "z": null\n    }\n  ],\n'
            '  "c": {},\n  "d": []\n}\n'
        ).encode()
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (math.nan, "not a JSON number"),
        ({"x": math.inf}, "not a JSON number"),
        ({"x": 2**60}, "beyond"),
        ({1: "x"}, "keys must be strings"),
        ({"x": object()}, "unsupported type"),
    ],
)
def test_unrepresentable_values_are_errors(value: object, message: str) -> None:
    with pytest.raises(RecordError, match=message):
        canon.pretty_bytes(value)
    with pytest.raises(RecordError):
        canon.canonical_bytes(value)


# --------------------------------------------------------------------------- properties

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-canon.MAX_SAFE_INTEGER, max_value=canon.MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


def _no_surrogates(value: object) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(json_values)
def test_canonical_form_is_idempotent(value: object) -> None:
    if not _no_surrogates(value):
        return
    data = canon.canonical_bytes(value)
    assert canon.canonical_bytes(canon.parse_json(data)) == data


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_pretty_form_is_jcs_with_whitespace(value: object) -> None:
    if not _no_surrogates(value):
        return
    pretty = canon.pretty_bytes(value)
    assert canon.canonical_bytes(canon.parse_json(pretty)) == canon.canonical_bytes(value)
    assert canon.pretty_bytes(canon.parse_json(pretty)) == pretty


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), json_scalars, max_size=8), st.randoms())
def test_canonical_form_ignores_member_order(mapping: dict[str, object], rng: object) -> None:
    if not _no_surrogates(mapping):
        return
    items = list(mapping.items())
    rng.shuffle(items)  # type: ignore[attr-defined]
    assert canon.canonical_bytes(dict(items)) == canon.canonical_bytes(mapping)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_es6_number_matches_rfc8785(value: float) -> None:
    assert canon.es6_number(value).encode() == rfc8785.dumps(value)
    assert float(canon.es6_number(value)) == value


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), json_scalars, max_size=3))
def test_digest_is_stable_and_hashes_canonical_bytes(spec: dict[str, object]) -> None:
    if not _no_surrogates(spec):
        return
    record = {"apiVersion": "v", "kind": "K", "metadata": {"name": "n"}, "spec": spec}
    body = canon.canonical_bytes({"apiVersion": "v", "kind": "K", "spec": spec})
    assert canon.record_digest(record) == "sha256:" + hashlib.sha256(body).hexdigest()
    assert canon.record_digest(canon.parse_json(canon.pretty_bytes(record))) == canon.record_digest(record)


def test_digest_helpers() -> None:
    digest = "sha256:" + "ab" * 32
    assert canon.is_digest(digest)
    assert canon.digest_hex(digest) == "ab" * 32
    assert not canon.is_digest("sha256:" + "AB" * 32)
    with pytest.raises(RecordError, match="not a digest"):
        canon.digest_hex("sha256:abc")


# --------------------------------------------------------------------------- limits: depth and size


def _nested(depth: int, opening: str = "[", closing: str = "]") -> str:
    return opening * depth + closing * depth


@pytest.mark.parametrize("depth", [canon.MAX_DEPTH + 1, 700, 100_000])
def test_a_deep_document_is_a_clean_error_naming_the_path(depth: int) -> None:
    for text in (_nested(depth), '{"a":' * depth + "1" + "}" * depth):
        with pytest.raises(RecordError) as caught:
            canon.parse_json(text, source="deep.json")
        message = str(caught.value)
        assert message.startswith("deep.json: $"), message[:200]
        assert f"nested deeper than {canon.MAX_DEPTH} levels" in message
        assert "\n" not in message
        assert not isinstance(caught.value.__cause__, RecursionError) or "deeper" in message
    # the path names where the limit is crossed: 64 steps down
    with pytest.raises(RecordError, match=r"^r: \$" + r"\[0\]" * canon.MAX_DEPTH + r": arrays and objects nested"):
        canon.parse_json(_nested(depth), source="r")


def test_deep_record_files_are_refused_before_any_recursion() -> None:
    body = '{"apiVersion": "v", "kind": "K", "spec": ' + _nested(700) + "}"
    with pytest.raises(RecordError, match=r"^run\.json: \$\.spec(\[0\])+: arrays and objects nested deeper than 64"):
        canon.parse_record_json(body.encode(), source="run.json")


def test_the_depth_limit_is_exact_and_brackets_in_strings_do_not_count() -> None:
    assert canon.parse_json(_nested(canon.MAX_DEPTH)) is not None
    assert canon.parse_json(canon.pretty_bytes(json.loads(_nested(canon.MAX_DEPTH)))) is not None
    text = json.dumps({"reference": "[" * 5000 + "{" * 5000 + '\\"]', "x": [[1]]})
    assert canon.parse_json(text)["x"] == [[1]]
    with pytest.raises(RecordError, match="deeper than 3 levels"):
        canon.parse_json('{"a": [{"b": []}]}', max_depth=3)
    assert canon.parse_json('{"a": [{"b": 1}]}', max_depth=3) == {"a": [{"b": 1}]}
    # unbalanced or unterminated input is left to the parser, which says what is wrong
    with pytest.raises(RecordError, match=r"deeper than 64|not closed|expected"):
        canon.parse_json("[" * 900)
    with pytest.raises(RecordError, match="unterminated string"):
        canon.parse_json('["' + "[" * 900)


def test_writing_a_deep_value_is_a_clean_error() -> None:
    value: list[object] = []
    for _ in range(900):
        value = [value]
    with pytest.raises(RecordError, match="nested deeper than 64"):
        canon.canonical_bytes(value)
    with pytest.raises(RecordError, match="nested deeper than 64"):
        canon.pretty_bytes({"spec": value})


def test_a_padded_document_over_the_size_limit_is_refused_before_decoding() -> None:
    envelope = {"payloadType": "application/vnd.in-toto+json", "payload": "e30=", "signatures": []}
    padded = json.dumps({**envelope, "padding": "x" * (80 * 1024 * 1024)}).encode()
    with pytest.raises(RecordError, match=r"^env\.dsse\.json: document is 838\d{5} bytes, over the limit of 67108864"):
        canon.parse_json(padded, source="env.dsse.json")
    with pytest.raises(RecordError, match=r"^r\.json: document is \d+ bytes, over the limit of 1000 bytes$"):
        canon.parse_record_json(b" " * 1001, source="r.json", max_bytes=1000)
    with pytest.raises(RecordError, match="over the limit of 10 bytes"):
        canon.parse_json("[" + '"é",' * 10 + "1]", max_bytes=10)
    assert canon.parse_json(json.dumps(envelope), max_bytes=1000) == envelope


def test_the_cli_reports_a_deep_record_with_exit_3(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"apiVersion": "kernelindex.dev/v1alpha1", "kind": "Workload", "spec": ' + _nested(700) + "}")
    done = subprocess.run(
        [sys.executable, "-m", "kictl", "digest", str(path)], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert "nested deeper than 64 levels" in done.stderr
