"""The advisory document: its schema and which protocols it matches (docs/advisories.md "Matching")."""

from __future__ import annotations

from typing import Any

import pytest

from kictl.advisories.document import Affects, new_advisory, protocol_matches
from kictl.errors import RecordError
from tests.advisories.conftest import advisory_fields

COMMIT = "a" * 40


def _affects(**changes: Any) -> Affects:
    return new_advisory(
        advisory_fields(affects={"harness": "kictl", "versions": [{"fixed": "0.2.0"}], **changes})
    ).affects


def _protocol(version: str | None = "0.1.0", *, name: str = "kictl", commit: str | None = None,
              **measurement: str) -> dict[str, Any]:  # fmt: skip
    harness: dict[str, Any] = {"name": name}
    if version is not None:
        harness["version"] = version
    if commit is not None:
        harness["commit"] = commit
    return {"harness": harness, "measurement": {"timer": "perf_counter_ns", **measurement}}


@pytest.mark.parametrize(
    ("version", "matches"),
    [
        ("0.1.0", True),
        ("0.1", True),
        ("0.2.0.dev3", True),  # PEP 440: before 0.2.0
        ("0.2.0rc1", True),
        ("0.2.0", False),
        ("0.2", False),
        ("0.2.0+local", False),
        ("0.2.0.post1", False),
        ("1.0", False),
        ("not a version", True),  # cannot be placed: it cannot be told apart
        (None, True),
    ],
)
def test_version_ranges(version: str | None, matches: bool) -> None:
    assert protocol_matches(_affects(), _protocol(version)) is matches


def test_the_harness_name_is_compared_without_case_or_spaces() -> None:
    assert protocol_matches(_affects(), _protocol(name=" KICTL "))
    assert not protocol_matches(_affects(), _protocol(name="flashinfer-bench"))


@pytest.mark.parametrize(
    ("commit", "matches"), [(COMMIT, True), ("b" * 40, False), ("b" * 40 + "+dirty", True), (None, True)]
)
def test_commits_narrow_the_versions(commit: str | None, matches: bool) -> None:
    assert protocol_matches(_affects(commits=[COMMIT]), _protocol(commit=commit)) is matches


def test_timers_devices_and_isolation() -> None:
    affects = _affects(timers=["cuda_events"], devices=["cuda"], isolation=["bubblewrap", "unrecorded"])
    assert protocol_matches(affects, _protocol(timer="cuda_events", device="cuda:0", isolation="bubblewrap 0.8.0: x"))
    assert protocol_matches(affects, _protocol(timer="cuda_events"))  # device from the timer, no isolation recorded
    assert not protocol_matches(affects, _protocol(timer="cuda_events", isolation="none: --no-sandbox"))
    assert not protocol_matches(affects, _protocol(timer="cuda_events", device="cpu"))
    assert not protocol_matches(affects, _protocol())  # perf_counter_ns


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"id": "KI-26-1"}, "String should match pattern"),
        ({"status": "withdrawn"}, "a withdrawn advisory says why"),
        ({"withdrawnReason": "x"}, "a withdrawn advisory says why"),
        ({"fixed": {"version": "0.1.5"}}, "past the fixed version 0.1.5"),
        ({"impact": "speed"}, "Input should be 'results' or 'failures'"),
        ({"summary": "two\nlines"}, "String should match pattern"),
        ({"corpus": ["a", "a"]}, "corpus entries repeat"),
        ({"affects": {"harness": "kictl", "versions": [{"introduced": "0.3", "fixed": "0.2"}]}}, "is not after"),
        ({"extra": 1}, "unknown member"),
    ],
)
def test_malformed_advisories_are_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(RecordError, match=message):
        new_advisory(advisory_fields(**changes))
