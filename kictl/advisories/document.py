"""The harness advisory document (docs/advisories.md): its schema, its normal form and which protocols it names.

An advisory says that some builds of a benchmark harness had a hole: which
harness (by name), which versions (ranges, the fixed version excluded), which
commits inside them where a version alone cannot tell, which timers, devices
and isolation; the class of exploit, whether it can make a result look better
than it is (``impact: results``) or only fail honest code (``impact:
failures``), the version that fixed it and the exploit-corpus entries that
demonstrate it.  The document is not a record: it has no digest of its own and
is updated (``version`` 2, 3, ...) by a maintainer, e.g. to withdraw it.

A protocol whose harness left a member out (no version, no commit, no device,
no isolation) cannot be told apart from an affected build, so it matches:
an advisory marks too much rather than too little, and a controlled rerun by an
unaffected harness clears the mark (``kictl.advisories.marks``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, ValidationError, model_validator

from kictl import canon, layout
from kictl.errors import RecordError
from kictl.records import API_VERSION, WireModel, validation_error

KIND = "HarnessAdvisory"
#: ``KI-<year>-<number>``: four digits each, like a CVE's shape.
ID_PATTERN = r"^KI-[0-9]{4}-[0-9]{4}$"
_ID_RE = re.compile(ID_PATTERN)
#: What a bound of a version range may be: a plain release, e.g. ``0.2.0``.
RELEASE_PATTERN = r"^[0-9]+(\.[0-9]+){0,3}$"

AdvisoryId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
Release = Annotated[str, StringConstraints(pattern=RELEASE_PATTERN)]
Commit = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")]
Word = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]*$", max_length=64)]
Line = Annotated[str, StringConstraints(pattern=r"^[^\x00-\x1f\x7f]+$", min_length=1, max_length=300)]
Paragraph = Annotated[str, StringConstraints(pattern=r"^[^\x00-\x09\x0b-\x1f\x7f]+$", min_length=1, max_length=8192)]
#: A corpus entry: the file name of a cheat in the exploit corpus without ``.py``.
EntryName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]+$", max_length=128)]


class VersionRange(WireModel):
    """Versions ``introduced <= v < fixed``; an absent bound is open."""

    introduced: Release | None = None
    fixed: Release | None = None

    @model_validator(mode="after")
    def _ordered(self) -> VersionRange:
        if self.introduced is not None and self.fixed is not None and release(self.fixed) <= release(self.introduced):
            raise ValueError(f"fixed {self.fixed} is not after introduced {self.introduced}")
        return self

    def contains(self, version: tuple[int, ...], pre: bool) -> bool:
        """Whether ``version`` (with ``pre`` for a pre-release or dev build of it) lies in the range."""
        if self.introduced is not None and version < release(self.introduced):
            return False
        if self.fixed is not None:
            fixed = release(self.fixed)
            return version < fixed or (version == fixed and pre)
        return True


class Affects(WireModel):
    """Which benchmark protocols the hole touches; an absent list is every value."""

    harness: Word
    versions: Annotated[tuple[VersionRange, ...], Field(min_length=1)]
    #: Inside the versions, only these commits (for a hole fixed between two versions); a build that
    #: records no commit, or a ``+dirty`` one, cannot be told apart and matches.
    commits: Annotated[tuple[Commit, ...], Field(min_length=1)] | None = None
    timers: Annotated[tuple[Word, ...], Field(min_length=1)] | None = None
    devices: Annotated[tuple[Literal["cpu", "cuda"], ...], Field(min_length=1)] | None = None
    #: The first word of the protocol's ``measurement.isolation`` (``bubblewrap``, ``none``), or
    #: ``unrecorded`` for a protocol that does not say.
    isolation: Annotated[tuple[Word, ...], Field(min_length=1)] | None = None


class Fixed(WireModel):
    version: Release
    commit: Commit | None = None


class Advisory(WireModel):
    """One version of a harness advisory (docs/advisories.md)."""

    api_version: Literal["kernelindex.dev/v1alpha1"]
    kind: Literal["HarnessAdvisory"]
    id: AdvisoryId
    #: 1 when first published; a maintainer's update is the next number.
    version: Annotated[int, Field(ge=1, le=10_000)]
    status: Literal["open", "withdrawn"]
    summary: Line
    exploit_class: Word = Field(alias="class")
    impact: Literal["results", "failures"]
    affects: Affects
    fixed: Fixed | None = None
    corpus: Annotated[tuple[EntryName, ...], Field(min_length=1)]
    details: Paragraph | None = None
    withdrawn_reason: Line | None = None

    @model_validator(mode="after")
    def _coherent(self) -> Advisory:
        if (self.status == "withdrawn") != (self.withdrawn_reason is not None):
            raise ValueError("a withdrawn advisory says why (withdrawnReason), an open one has no withdrawnReason")
        if self.fixed is not None:
            for bound in self.affects.versions:
                if bound.fixed is not None and release(bound.fixed) > release(self.fixed.version):
                    raise ValueError(
                        f"affects versions up to {bound.fixed}, past the fixed version {self.fixed.version}"
                    )
        if len(set(self.corpus)) != len(self.corpus):
            raise ValueError("corpus entries repeat")
        return self

    @property
    def open(self) -> bool:
        return self.status == "open"


def release(text: str) -> tuple[int, ...]:
    """``0.2`` and ``0.2.0`` as ``(0, 2, 0, 0)``: a release padded to four numbers."""
    numbers = tuple(int(part) for part in text.split("."))
    return numbers + (0,) * (4 - len(numbers))


_HARNESS_VERSION_RE = re.compile(r"^v?([0-9]+(?:\.[0-9]+){0,3})(.*)$")


def parse_harness_version(text: str) -> tuple[tuple[int, ...], bool] | None:
    """The release of a harness version string and whether it is a pre-release or dev build before it.

    ``0.2.0`` → ``((0,2,0,0), False)``; ``0.2.0.dev3`` and ``0.2.0rc1`` → ``((0,2,0,0), True)`` (PEP 440
    orders them before ``0.2.0``); ``0.2.0.post1`` and ``0.2.0+local`` → not a pre-release.  ``None``
    for anything else (such a protocol cannot be placed, so it matches every range).
    """
    found = _HARNESS_VERSION_RE.match(text.strip())
    if found is None:
        return None
    rest = found.group(2).lower()
    pre = bool(re.match(r"^[.-]?(a|b|c|rc|alpha|beta|pre|preview|dev)[0-9]*", rest))
    if rest and not pre and not re.match(r"^([.-]?post[0-9]*)?(\+[a-z0-9.]+)?$", rest):
        return None
    return release(found.group(1)), pre


def parse_advisory(value: Any, *, source: str = "<input>") -> Advisory:
    """Validate an advisory document given as parsed JSON; raises ``RecordError`` (``source: $.path: message``)."""
    if not isinstance(value, dict):
        raise RecordError("an advisory is a JSON object", path=source, pointer="$")
    try:
        return Advisory.model_validate_json(json.dumps(value, allow_nan=False))
    except ValidationError as exc:
        raise validation_error(exc, value, source) from exc


def load_advisory_bytes(data: bytes, *, source: str = "<input>") -> tuple[Advisory, dict[str, Any]]:
    """Parse strictly (``canon.parse_json``) and validate; returns the model and the JSON value.

    Raises ``RecordError``.
    """
    value = canon.parse_json(data, source=source)
    return parse_advisory(value, source=source), value


def advisory_value(advisory: Advisory) -> dict[str, Any]:
    """The JSON value of a model, members it does not have left out."""
    value: dict[str, Any] = advisory.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


def new_advisory(fields: Mapping[str, Any]) -> Advisory:
    """An advisory document from its members (``apiVersion`` and ``kind`` filled in); raises ``RecordError``."""
    return parse_advisory({"apiVersion": API_VERSION, "kind": KIND, **fields}, source="advisory")


def is_advisory_id(text: str) -> bool:
    return bool(_ID_RE.match(text))


def _first_word(text: str | None) -> str:
    if not text:
        return "unrecorded"
    return re.split(r"[\s:]", text.strip(), maxsplit=1)[0].lower() or "unrecorded"


def _device_of(measurement: Mapping[str, Any]) -> str | None:
    device = measurement.get("device")
    if isinstance(device, str) and device:
        return "cuda" if device.lower().startswith("cuda") else device.lower()
    timer = measurement.get("timer")
    if isinstance(timer, str) and timer.startswith(("cuda", "cupti")):
        return "cuda"
    return None


def protocol_matches(affects: Affects, protocol_spec: Mapping[str, Any]) -> bool:
    """Whether a BenchmarkProtocol's spec (its JSON) lies in ``affects`` (docs/advisories.md "Matching").

    Harness name, version range, commits, timer, device and isolation must each
    match; a member the protocol does not record matches (it cannot be told apart).
    """
    harness = protocol_spec.get("harness") or {}
    measurement = protocol_spec.get("measurement") or {}
    if not isinstance(harness, Mapping) or not isinstance(measurement, Mapping):
        return False
    name = harness.get("name")
    if not isinstance(name, str) or name.strip().casefold() != affects.harness:
        return False  # "KICTL " is kictl: a name that differs only in case or spaces does not escape
    version = harness.get("version")
    if isinstance(version, str):
        parsed = parse_harness_version(version)
        if parsed is not None and not any(bound.contains(*parsed) for bound in affects.versions):
            return False
    commit = harness.get("commit")
    if affects.commits is not None and isinstance(commit, str) and not commit.endswith("+dirty"):
        if commit not in affects.commits:
            return False
    if affects.timers is not None and measurement.get("timer") not in affects.timers:
        return False
    if affects.devices is not None:
        device = _device_of(measurement)
        if device is not None and device not in affects.devices:
            return False
    if affects.isolation is not None:
        isolation = measurement.get("isolation")
        if _first_word(isolation if isinstance(isolation, str) else None) not in affects.isolation:
            return False
    return True


#: The file suffix of an advisory version (``registry/advisories/<ID>/<N>.dsse.json``).
SUFFIX = ".dsse.json"


def advisory_path(advisory_id: str, version: int) -> str:
    """``registry/advisories/<ID>/<version>.dsse.json`` (relative to the registry root)."""
    return f"{layout.ADVISORIES_DIR}/{advisory_id}/{version}{SUFFIX}"


def parse_advisory_path(path: str) -> tuple[str, int] | None:
    """``(ID, version)`` of an advisory version's path, else ``None``."""
    parts = path.split("/")
    if len(parts) != 4 or "/".join(parts[:2]) != layout.ADVISORIES_DIR or not is_advisory_id(parts[2]):
        return None
    number = parts[3].removesuffix(SUFFIX)
    if number == parts[3] or not (number.isascii() and number.isdigit()) or number[0] == "0" or len(number) > 5:
        return None
    return parts[2], int(number)
