"""Reading the source's values defensively: strict JSON, typed members, ``$.path`` messages, records built from
the source alone.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
from collections.abc import Iterable
from typing import Any

from kictl import canon
from kictl.errors import RecordError
from kictl.importers.flashinfer_bench.model import _NON_FINITE_STRINGS, MAX_INTEGER_DIGITS, NEAR_NAME_CUTOFF
from kictl.records import (
    API_VERSION,
    StoredRecord,
    record_from_value,
)


class _Skip(Exception):
    """An item of the source that cannot be imported; the message says why."""


def _load_json(text: str, depth: int = canon.MAX_DEPTH) -> Any:
    """A source document: duplicate keys are errors; NaN and Infinity literals are read as floats.

    Python's ``json`` writes NaN and Infinity as bare literals, so traces
    written by it carry them; they become ``null`` in the records.  JSON
    nested deeper than ``depth`` and integer literals of more than
    ``MAX_INTEGER_DIGITS`` digits are refused before they can cost a deep
    recursion or a quadratic conversion.
    """
    if canon.nested_deeper_than(text, depth):
        raise _Skip(f"not JSON kictl reads: arrays and objects nested deeper than {depth} levels")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)
        if len(obj) != len(items):
            seen: set[str] = set()
            for key, _ in items:
                if key in seen:
                    raise _Skip(f"duplicate key {json.dumps(key)}")
                seen.add(key)
        return obj

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=float, parse_int=_source_int)
    except json.JSONDecodeError as exc:
        where = f"column {exc.colno}" if exc.lineno == 1 else f"line {exc.lineno}, column {exc.colno}"
        raise _Skip(f"not JSON: {exc.msg} ({where})") from exc
    except RecursionError as exc:
        raise _Skip("not JSON: nested too deeply") from exc


def _source_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INTEGER_DIGITS:
        raise _Skip(f"not JSON kictl reads: an integer literal of {digits} digits ({text[:12]}…) is out of range")
    return int(text)


def _path(*parts: str | int) -> str:
    return canon.format_path(tuple(parts))


def _object(value: Any, *where: str | int) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Skip(f"{_path(*where)}: expected an object, found {_type_name(value)}")
    return value


def _string(value: Any, *where: str | int) -> str:
    if not isinstance(value, str) or not value:
        raise _Skip(f"{_path(*where)}: expected a non-empty string, found {_type_name(value)}")
    return value


def _number(value: Any, *where: str | int) -> float:
    """A finite or non-finite number; ``"NaN"``/``"Infinity"`` strings are numbers here."""
    if isinstance(value, str) and value in _NON_FINITE_STRINGS:
        return _NON_FINITE_STRINGS[value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Skip(f"{_path(*where)}: expected a number, found {_type_name(value)}")
    return float(value)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _describe_non_finite(value: float) -> str:
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def _build(kind: str, name: str, spec: dict[str, Any], title: str | None = None) -> StoredRecord:
    metadata: dict[str, Any] = {"name": name}
    if title is not None:
        metadata["title"] = title
    raw = {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}
    try:
        return record_from_value(raw, source=f"{kind} record")
    except RecordError as exc:
        raise _Skip(exc.message) from exc


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Skip(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _unexpected(exc: BaseException) -> str:
    """The one-line report of an error no check anticipated (never a traceback, never an abort)."""
    if isinstance(exc, RecursionError):
        return "cannot be imported: nested too deeply"
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"cannot be imported: {type(exc).__name__}: {text[:200]}"


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean X?"`` naming the known name nearest to ``name`` (difflib), or ``""`` when none is near."""
    near = difflib.get_close_matches(name, sorted(known), n=1, cutoff=NEAR_NAME_CUTOFF)
    return f"; did you mean {near[0]}?" if near else ""


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _content_key(axes: Any, inputs: Any) -> bytes:
    """What identifies a workload without a uuid: its source axes and inputs, canonicalised."""
    try:
        return canon.canonical_bytes(_sanitised({"axes": axes, "inputs": inputs}))
    except RecordError as exc:
        raise _Skip(f"$.workload: {exc.message}") from exc


def _sanitised(value: Any) -> Any:
    """A source value with non-finite numbers spelled as strings, so that it can be canonicalised."""
    if isinstance(value, dict):
        return {key: _sanitised(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_sanitised(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return _describe_non_finite(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > canon.MAX_SAFE_INTEGER:
        return str(value)
    return value
