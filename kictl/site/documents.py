"""The JSON beside each page: the documents the CLI prints with ``--json``, for the same question.

The shapes are the CLI's own: each result type's ``to_json()`` (the same
methods ``kictl leaderboard``, ``floor``, ``history``, ``verify`` and ``cite``
print with ``--json``) and ``kictl show``'s members, so a page's JSON and the
CLI's cannot drift apart.
"""

from __future__ import annotations

import json
from typing import Any

from kictl import trust
from kictl.rank import Citation, DefinitionBoard, FloorEstimate, History, RankedGroup, WorkloadBoard


def dumps(document: Any) -> bytes:
    """One JSON document as the CLI's ``emit_json`` prints it (two-space indent, UTF-8, one newline)."""
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def leaderboard(board: DefinitionBoard) -> dict[str, Any]:
    """``kictl leaderboard DEF [--gpu G] --json``."""
    return board.to_json()


def workload_group(board: WorkloadBoard, group: RankedGroup) -> dict[str, Any]:
    """One element of ``kictl leaderboard DEF --workload W --json``: the group with this comparison key."""
    return {
        "definition": {"name": board.definition.name, "digest": board.definition.digest},
        "workloadAxes": board.workload.axes,
        "minimumEvidence": board.min_evidence,
        **group.to_json(),
    }


def floor(estimates: list[FloorEstimate]) -> list[dict[str, Any]]:
    """``kictl floor DEF --gpu G --json``."""
    return [estimate.to_json() for estimate in estimates]


def history(result: History) -> dict[str, Any]:
    """``kictl history TARGET --json``."""
    return result.to_json()


def history_group(result: History, comparison_key: str) -> dict[str, Any] | None:
    """The element of ``kictl history DEF --json``'s ``groups`` for one comparison group."""
    document = result.to_json()
    return next((group for group in document["groups"] if group["comparisonKey"] == comparison_key), None)


#: a record no harness advisory marks (``kictl.advisories.marks.Marks.run_json``)
NO_ADVISORIES: dict[str, Any] = {"marked": [], "cleared": []}


def show(report: trust.VerifyReport, raw: Any, path: str, advisories: dict[str, Any] | None = None) -> dict[str, Any]:
    """``kictl show REF --json``: the record with its evidence, attestations and verification failures."""
    return {
        "digest": report.digest,
        "kind": report.kind,
        "name": report.name,
        "path": path,
        "evidence": report.trust.to_json(),
        "advisories": advisories or NO_ADVISORIES,
        "attestations": [result.to_json() for result in report.attestations],
        "failures": report.failures,
        "record": raw,
    }


def verify(report: trust.VerifyReport, advisories: dict[str, Any] | None = None) -> dict[str, Any]:
    """``kictl verify REF --json``."""
    return {**report.to_json(), "advisories": advisories or NO_ADVISORIES}


def cite(citation: Citation) -> dict[str, Any]:
    """``kictl cite REF --format json``."""
    return citation.to_json()
