"""Bytes in and bytes out: strict JSON parsing, canonical bytes and digests.

This module is the only path between JSON values and bytes in kictl.

* ``parse_json`` reads JSON strictly: duplicate object keys, ``NaN`` and
  ``Infinity``, numbers that overflow a double and integers beyond
  ±(2^53−1) are errors that name the JSON path (I-JSON, RFC 7493 §2.2;
  DESIGN §3 "Number and text policy").  So are documents larger than
  ``max_bytes`` (``MAX_DOCUMENT_BYTES`` unless told) and arrays and objects
  nested deeper than ``MAX_DEPTH``: both are checked before anything
  recursive runs, so no input reaches Python's recursion limit.  An integer literal beyond that range
  is accepted only when it is exactly the RFC 8785 serialisation of a double
  (``100000000000000000000`` is how JCS writes ``1e20``), and it is then read
  as that double, so canonical bytes always parse back to the same value.
* ``canonical_bytes`` is RFC 8785 (JCS).  kictl writes it itself, in the
  same traversal that writes a file's normal form, because validating a large
  registry spends most of its time there; the tests check it byte for byte
  against the ``rfc8785`` package and RFC 8785's own examples.
* ``pretty_bytes`` is the normal form of files in the registry: the same
  values and key order as JCS, indented by two spaces, one trailing newline
  (DESIGN §4).  Removing its insignificant whitespace gives the JCS bytes.
* ``record_digest`` is ``"sha256:" + hex(sha256(JCS({apiVersion, kind, spec})))``.

Why one module of some 600 lines: it is the only path between bytes and
values, and the parser, the writer and the digest must agree on every rule
(number ranges, depth, key order); keeping them side by side is how a reader
checks that they do.

Its size (over 600 lines) is the point: it is the only path between JSON values and bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from kictl.errors import RecordError

MAX_SAFE_INTEGER = 2**53 - 1
DIGEST_PREFIX = "sha256:"
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_HEX_RE = re.compile(r"^[0-9a-f]{64}$")
_IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: The members of a record that its digest covers (DESIGN §3).
DIGEST_MEMBERS = ("apiVersion", "kind", "spec")

#: The deepest nesting of arrays and objects a document may have.  kictl's
#: deepest documents (Definitions, DSSE statements, trust roots) nest 5 levels,
#: so 64 leaves ample room for richer specs and predicates, while every
#: recursive reader and writer (the locator below, ``_Writer``, pydantic) stays
#: far under Python's default limit of 1000 frames at two or three frames a
#: level.  A 700-deep document is refused, not a ``RecursionError``.
MAX_DEPTH = 64

#: The largest document ``parse_json`` reads unless the caller says otherwise.
#: Records with kept samples or embedded sources stay well below it; callers
#: that know their documents are small (envelopes) pass a tighter
#: ``max_bytes``.
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024


# --------------------------------------------------------------------------- paths


def format_path(path: tuple[str | int, ...]) -> str:
    """Render a JSON path as ``$.spec.inputs["k v"][0]``."""
    parts = ["$"]
    for part in path:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        elif _IDENTIFIER_RE.match(part):
            parts.append(f".{part}")
        else:
            parts.append(f"[{json.dumps(part)}]")
    return "".join(parts)


# --------------------------------------------------------------------------- numbers


def es6_number(value: float) -> str:
    """Serialise a finite double as ECMAScript's Number::toString does.

    RFC 8785 §3.2.2.3 adopts ECMA-262 §7.1.12.1 for numbers: the shortest
    digits that round-trip, written without an exponent from 1e-6 up to (not
    including) 1e21.
    """
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"{value!r} is not a JSON number")
    if value == 0:
        return "0"
    if value < 0:
        return "-" + es6_number(-value)
    mantissa, _, exp_text = repr(value).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    if frac_part == "0":
        frac_part = ""
    digits = (int_part + frac_part).lstrip("0")
    # position of the decimal point relative to the start of ``digits``
    point = len(int_part) + (int(exp_text) if exp_text else 0)
    point -= len(int_part + frac_part) - len(digits)
    digits = digits.rstrip("0") or "0"
    k, n = len(digits), point
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    exponent = n - 1
    sign = "+" if exponent >= 0 else "-"
    head = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{head}e{sign}{abs(exponent)}"


# --------------------------------------------------------------------------- parsing


class _Rejected(ValueError):
    """Raised inside json.loads hooks; the slow locator then finds the path."""


def _parse_int(text: str) -> int | float:
    number = int(text)
    if -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER:
        return number
    as_float = _canonical_big_integer(text)
    if as_float is None:
        raise _Rejected(text)
    return as_float


def _canonical_big_integer(text: str) -> float | None:
    """The double that ``text`` is the JCS serialisation of, if it is one."""
    try:
        as_float = float(int(text))
    except OverflowError:
        return None
    if math.isinf(as_float) or es6_number(as_float) != text:
        return None
    return as_float


def _parse_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise _Rejected(text)
    return number


def _parse_constant(text: str) -> Any:
    raise _Rejected(text)


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _Rejected("duplicate key")
    return obj


# Built once: json.loads with hooks would build a decoder (and its scanner) on every call.
_STRICT = json.JSONDecoder(
    object_pairs_hook=_object_pairs, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant
)
_STRICT_BUT_INTS = json.JSONDecoder(
    object_pairs_hook=_object_pairs, parse_float=_parse_float, parse_constant=_parse_constant
)


def parse_record_json(
    data: bytes, *, source: str = "<input>", max_bytes: int = MAX_DOCUMENT_BYTES, max_depth: int = MAX_DEPTH
) -> dict[str, Any]:
    """Parse a record file for ``record_forms``: ``parse_json`` without its per-integer hook.

    Integers are range-checked by ``record_forms`` instead (it refuses unsafe
    ones); call ``parse_json`` again when it does, for the exact message and
    for big integer literals that are the JCS form of a double.  Raises
    ``RecordError`` for everything else ``parse_json`` refuses, the size and
    depth limits included.
    """
    _check_size(len(data), max_bytes, source)
    try:
        text = data.decode("utf-8")
        if nested_deeper_than(text, max_depth):
            raise ValueError("too deep")  # parse_json names the path
        value = _STRICT_BUT_INTS.decode(text)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        value = parse_json(data, source=source, max_bytes=max_bytes, max_depth=max_depth)
    if not isinstance(value, dict):
        raise RecordError(f"{source}: $: a record is a JSON object, found {type(value).__name__}")
    return value


def parse_json(
    data: bytes | str, *, source: str = "<input>", max_bytes: int = MAX_DOCUMENT_BYTES, max_depth: int = MAX_DEPTH
) -> Any:
    """Parse one JSON document strictly.

    Raises ``RecordError`` with one line ``source: $.path: message (line L,
    column C)`` for malformed JSON, duplicate keys, NaN or Infinity, numbers
    too large for a double, integers beyond ±(2^53−1) and arrays or objects
    nested deeper than ``max_depth``; and ``source: document is N bytes...``
    for a document larger than ``max_bytes``.  The size is checked before the
    bytes are decoded and the depth before anything recursive runs.
    """
    if isinstance(data, bytes):
        _check_size(len(data), max_bytes, source)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    else:
        text = data
        if len(text) * 4 > max_bytes:  # a character is at most 4 bytes of UTF-8
            _check_size(len(text.encode("utf-8", "surrogatepass")), max_bytes, source)
    try:
        if nested_deeper_than(text, max_depth):
            raise ValueError("too deep")  # the locator names the path
        return _STRICT.decode(text)
    except (ValueError, RecursionError) as exc:
        located = _Locator(text, max_depth).find_error()
        if located is None:  # pragma: no cover - the locator mirrors json.loads
            raise RecordError(f"{source}: {exc}") from exc
        raise RecordError(f"{source}: {located}") from exc


def _check_size(size: int, max_bytes: int, source: str) -> None:
    if size > max_bytes:
        raise RecordError(f"{source}: document is {size} bytes, over the limit of {max_bytes} bytes")


# Everything but brackets, and whole strings (whose brackets are text): what ``nested_deeper_than``
# removes to keep the bracket skeleton.  Possessive quantifiers keep it linear on unterminated strings.
_NOT_STRUCTURE_RE = re.compile(r'"(?:[^"\\]++|\\.)*+"|[^\[\]{}"]++')
_EMPTY_PAIR_RE = re.compile(r"\[\]|\{\}")


def nested_deeper_than(text: str, limit: int) -> bool:
    """Whether the JSON text ``text`` nests arrays and objects more than ``limit`` deep.

    Runs in linear passes over the text, never recursively.  Text that is not
    JSON may be answered either way; the parser then reports it.
    """
    if text.count("[") + text.count("{") <= limit:  # the common case: too few brackets to be deep
        return False
    skeleton = _NOT_STRUCTURE_RE.sub("", text)
    for _ in range(limit):  # each pass removes the innermost level of every branch
        shorter = _EMPTY_PAIR_RE.sub("", skeleton)
        if not shorter or len(shorter) == len(skeleton):
            return False  # all gone within the limit, or not balanced JSON (the parser says why)
        skeleton = shorter
    return True


_NUMBER_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_STRING_RE = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_WS = " \t\n\r"


class _Located(Exception):
    def __init__(self, path: tuple[str | int, ...], message: str, pos: int) -> None:
        super().__init__(message)
        self.path = path
        self.message = message
        self.pos = pos


class _Locator:
    """A slow recursive-descent JSON reader that says where a document goes wrong.

    It runs only after the fast parser has failed, to turn that failure into a
    message with the JSON path and the line and column.
    """

    def __init__(self, text: str, max_depth: int = MAX_DEPTH) -> None:
        self.text = text
        self.pos = 0
        self.max_depth = max_depth

    def find_error(self) -> str | None:
        try:
            self._skip_ws()
            self._value((), 0)
            self._skip_ws()
            if self.pos != len(self.text):
                raise _Located((), "extra data after the JSON value", self.pos)
        except _Located as exc:
            line = self.text.count("\n", 0, exc.pos) + 1
            column = exc.pos - (self.text.rfind("\n", 0, exc.pos) + 1) + 1
            return f"{format_path(exc.path)}: {exc.message} (line {line}, column {column})"
        except RecursionError:
            return "$: JSON nested too deeply"
        return None

    def _skip_ws(self) -> None:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos] in _WS:
            pos += 1
        self.pos = pos

    def _value(self, path: tuple[str | int, ...], depth: int) -> None:
        text, pos = self.text, self.pos
        char = text[pos] if pos < len(text) else ""
        if char in "{[" and char and depth >= self.max_depth:
            raise _Located(path, f"arrays and objects nested deeper than {self.max_depth} levels", pos)
        if char == "{":
            self._object(path, depth + 1)
        elif char == "[":
            self._array(path, depth + 1)
        elif char == '"':
            self._string(path)
        elif text.startswith(("NaN", "Infinity", "-Infinity"), pos):
            raise _Located(path, "NaN and Infinity are not allowed in JSON", pos)
        elif char == "-" or char.isdigit():
            self._number(path)
        else:
            for literal in ("true", "false", "null"):
                if text.startswith(literal, pos):
                    self.pos = pos + len(literal)
                    return
            found = repr(char) if char else "end of input"
            raise _Located(path, f"expected a JSON value, found {found}", pos)

    def _number(self, path: tuple[str | int, ...]) -> None:
        match = _NUMBER_RE.match(self.text, self.pos)
        if match is None:
            raise _Located(path, "malformed number", self.pos)
        literal = match.group(0)
        if match.group(1) is None and match.group(2) is None:
            number = int(literal)
            if abs(number) > MAX_SAFE_INTEGER and _canonical_big_integer(literal) is None:
                raise _Located(path, f"integer {literal} is beyond ±(2^53−1) and cannot be exact", self.pos)
        elif math.isinf(float(literal)):
            raise _Located(path, f"number {literal} is too large for a double", self.pos)
        self.pos = match.end()

    def _string(self, path: tuple[str | int, ...]) -> str:
        match = _STRING_RE.match(self.text, self.pos)
        if match is None:
            end = self.text.find('"', self.pos + 1)
            newline = self.text.find("\n", self.pos + 1)
            if end < 0 or 0 <= newline < end:
                raise _Located(path, "unterminated string", self.pos)
            raise _Located(path, "invalid escape or control character in string", self.pos)
        self.pos = match.end()
        value: str = json.loads(match.group(0))
        return value

    def _object(self, path: tuple[str | int, ...], depth: int) -> None:
        start = self.pos
        self.pos += 1
        seen: set[str] = set()
        self._skip_ws()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return
        while True:
            self._skip_ws()
            key_pos = self.pos
            if not self.text.startswith('"', self.pos):
                raise _Located(path, "expected a quoted object key", self.pos)
            key = self._string(path)
            if key in seen:
                raise _Located(path, f"duplicate key {json.dumps(key)}", key_pos)
            seen.add(key)
            self._skip_ws()
            if not self.text.startswith(":", self.pos):
                raise _Located((*path, key), "expected ':' after the key", self.pos)
            self.pos += 1
            self._skip_ws()
            self._value((*path, key), depth)
            self._skip_ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith("}", self.pos):
                self.pos += 1
                return
            raise _Located(path, f"object opened at offset {start} is not closed", self.pos)

    def _array(self, path: tuple[str | int, ...], depth: int) -> None:
        self.pos += 1
        self._skip_ws()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return
        index = 0
        while True:
            self._skip_ws()
            self._value((*path, index), depth)
            self._skip_ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                index += 1
                continue
            if self.text.startswith("]", self.pos):
                self.pos += 1
                return
            raise _Located(path, "expected ',' or ']' in array", self.pos)


# --------------------------------------------------------------------------- writing


def _utf16_key(key: str) -> bytes:
    # RFC 8785 §3.2.3: members sorted by the UTF-16 code units of their names.
    return key.encode("utf-16be", "surrogatepass")


def _sorted_keys(value: dict[Any, Any]) -> list[str]:
    try:
        joined = "".join(value)
    except TypeError as exc:
        raise RecordError("cannot canonicalise: object keys must be strings") from exc
    if joined.isascii():
        return sorted(value)  # without astral characters code-point order is UTF-16 order
    return sorted(value, key=_utf16_key)


_encode_string = json.encoder.encode_basestring
_INT_ONLY = {int}


def _scalar(value: Any) -> str:
    """RFC 8785 §3.2.2: the serialisation of a string, number or literal."""
    kind = type(value)
    if kind is str:
        return str(_encode_string(value))
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return str(value)
        raise RecordError(f"cannot canonicalise: integer {value} is beyond ±(2^53−1)")
    if kind is float:
        try:
            return es6_number(value)
        except ValueError as exc:
            raise RecordError(f"cannot canonicalise: {exc}") from exc
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _scalar(str(value))
    if isinstance(value, int):
        return _scalar(int(value))
    if isinstance(value, float):
        return _scalar(float(value))
    raise RecordError(f"cannot canonicalise: unsupported type {kind.__name__}")


class _Writer:
    """One traversal that writes the pretty form, the compact (JCS) form, or both.

    The compact form is RFC 8785: members sorted by UTF-16 code units (§3.2.3),
    strings with the minimal escapes (§3.2.2.2), numbers as ECMAScript writes
    them (§3.2.2.3), no whitespace.  The pretty form is the same tokens with a
    two-space indent.  ``compact`` is switched off for members the digest does
    not cover.
    """

    __slots__ = ("compact", "compact_on", "pretty")

    def __init__(self, *, pretty: bool, compact: bool) -> None:
        self.pretty: list[str] | None = [] if pretty else None
        self.compact: list[str] | None = [] if compact else None
        self.compact_on = compact

    def _put(self, pretty: str, compact: str) -> None:
        if self.pretty is not None:
            self.pretty.append(pretty)
        if self.compact_on and self.compact is not None:
            self.compact.append(compact)

    def value(self, value: Any, level: int) -> None:
        if level >= MAX_DEPTH and isinstance(value, (dict, list, tuple)):
            raise RecordError(f"cannot canonicalise: arrays and objects nested deeper than {MAX_DEPTH} levels")
        kind = type(value)
        if kind is dict:
            self._object(value, level)
        elif kind is list or kind is tuple:
            self._array(value, level)
        elif isinstance(value, dict):
            self._object(dict(value), level)
        elif isinstance(value, (list, tuple)):
            self._array(value, level)
        else:
            text = _scalar(value)
            self._put(text, text)

    def _object(self, value: dict[str, Any], level: int, skip_compact: frozenset[str] = frozenset()) -> None:
        if not value:
            self._put("{}", "{}")
            return
        inner = "\n" + "  " * (level + 1)
        opening_pretty, opening_compact = "{" + inner, "{"
        compact_was = self.compact_on
        pretty, compact = self.pretty, self.compact
        for key in _sorted_keys(value):
            self.compact_on = on = compact_was and key not in skip_compact
            encoded = _encode_string(key)
            if pretty is not None:
                pretty.append(opening_pretty + encoded + ": ")
            if on and compact is not None:
                compact.append(opening_compact + encoded + ":")
            opening_pretty, opening_compact = "," + inner, ","
            item = value[key]
            kind = type(item)
            if kind is str:  # the common scalars inline: most members are strings and numbers
                text = _encode_string(item)
            elif kind is int and -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                text = str(item)
            else:
                self.value(item, level + 1)
                continue
            if pretty is not None:
                pretty.append(text)
            if on and compact is not None:
                compact.append(text)
        self.compact_on = compact_was
        self._put("\n" + "  " * level + "}", "}")

    def _array(self, value: list[Any] | tuple[Any, ...], level: int) -> None:
        if not value:
            self._put("[]", "[]")
            return
        inner = "\n" + "  " * (level + 1)
        if set(map(type, value)) == _INT_ONLY:  # kept samples: a fast path
            if max(value) > MAX_SAFE_INTEGER or min(value) < -MAX_SAFE_INTEGER:
                raise RecordError("cannot canonicalise: an integer is beyond ±(2^53−1)")
            texts = list(map(str, value))
            self._put("[" + inner + ("," + inner).join(texts) + "\n" + "  " * level + "]", "[" + ",".join(texts) + "]")
            return
        separator_pretty, separator_compact = "[" + inner, "["
        for item in value:
            self._put(separator_pretty, separator_compact)
            self.value(item, level + 1)
            separator_pretty, separator_compact = "," + inner, ","
        self._put("\n" + "  " * level + "]", "]")

    def record(self, value: dict[str, Any]) -> None:
        """A record: the compact form covers only the members the digest covers."""
        self._object(value, 0, skip_compact=frozenset(value) - frozenset(DIGEST_MEMBERS))

    @staticmethod
    def _encode(parts: list[str] | None) -> bytes:
        assert parts is not None
        try:
            return "".join(parts).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise RecordError("cannot canonicalise: text contains lone surrogates") from exc

    def pretty_bytes(self) -> bytes:
        return self._encode(self.pretty) + b"\n"

    def compact_bytes(self) -> bytes:
        return self._encode(self.compact)


def canonical_bytes(value: Any) -> bytes:
    """RFC 8785 canonical bytes of a JSON value.

    Raises ``RecordError`` for values JCS cannot represent (NaN, infinities,
    unsafe integers, lone surrogates, non-string keys).  The tests check this
    implementation byte for byte against the ``rfc8785`` package.
    """
    writer = _Writer(pretty=False, compact=True)
    writer.value(value, 0)
    return writer.compact_bytes()


def pretty_bytes(value: Any) -> bytes:
    """The normal form of a file in the registry (DESIGN §4).

    JCS member order and number and string forms, two-space indent, one
    trailing newline.  Raises ``RecordError`` where ``canonical_bytes`` would.
    """
    writer = _Writer(pretty=True, compact=False)
    writer.value(value, 0)
    return writer.pretty_bytes()


def record_forms(record: dict[str, Any]) -> tuple[bytes, str]:
    """A record's normal-form bytes and its digest, from one traversal."""
    missing = [name for name in DIGEST_MEMBERS if name not in record]
    if missing:
        raise RecordError(f"$: record lacks {', '.join(missing)}")
    writer = _Writer(pretty=True, compact=True)
    writer.record(record)
    return writer.pretty_bytes(), bytes_digest(writer.compact_bytes())


# --------------------------------------------------------------------------- digests


def sha256_hex(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def bytes_digest(data: bytes) -> str:
    """``sha256:<hex>`` of raw bytes (blobs, envelopes)."""
    return DIGEST_PREFIX + sha256_hex(data)


def digest_body(record: Mapping[str, Any]) -> dict[str, Any]:
    """The members of a record that its digest covers; raises ``RecordError``."""
    missing = [name for name in DIGEST_MEMBERS if name not in record]
    if missing:
        raise RecordError(f"$: record lacks {', '.join(missing)}")
    return {name: record[name] for name in DIGEST_MEMBERS}


def record_digest(record: Mapping[str, Any]) -> str:
    """``sha256:`` + hex SHA-256 of JCS({apiVersion, kind, spec}); metadata is not covered."""
    return bytes_digest(canonical_bytes(digest_body(record)))


def is_digest(text: str) -> bool:
    """Whether ``text`` is a full ``sha256:<64 hex>`` digest."""
    return DIGEST_RE.match(text) is not None


def digest_hex(digest: str) -> str:
    """The 64 hex digits of a full digest; raises ``RecordError`` for anything else."""
    if not is_digest(digest):
        raise RecordError(f"not a digest: {digest!r} (expected sha256: and 64 lowercase hex digits)")
    return digest[len(DIGEST_PREFIX) :]


def is_hex_digest(text: str) -> bool:
    """Whether ``text`` is 64 lowercase hex digits."""
    return _HEX_RE.match(text) is not None
