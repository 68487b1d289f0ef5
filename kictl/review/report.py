"""``ReviewReport``: the findings, counts and leaderboard moves of one review, and its ``--json``
document.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kictl.review.model import Finding, GroupDiff, NotChecked
from kictl.store.git import Change


@dataclass
class ReviewReport:
    """Everything ``review`` found, in the order it is shown."""

    base_ref: str
    head_ref: str
    base: str  # the base revision's commit
    merge_base: str
    head: str
    changes: list[Change] = field(default_factory=list)
    code_only: bool = False
    lints: list[Finding] = field(default_factory=list)
    hints: list[Finding] = field(default_factory=list)
    added_records: dict[str, int] = field(default_factory=dict)
    added_blobs: int = 0
    added_attestations: int = 0
    leaderboards: list[GroupDiff] | None = None
    not_checked: list[NotChecked] = field(default_factory=list)
    odd_names: set[str] = field(default_factory=set)  # changed paths that are not UTF-8, shown escaped

    @property
    def ok(self) -> bool:
        return not self.lints

    @property
    def verdict(self) -> str:
        return "pass" if self.ok else "fail"

    def findings_line(self) -> str:
        """What was found, without the verdict."""
        if self.code_only:
            return "a code-only PR (it touches neither registry/ nor definitions/); nothing to review"
        if not self.changes:
            return "no changes between the merge base and the head"
        return (
            f"{_count(len(self.lints), 'lint')}, {_count(len(self.hints), 'hint')} "
            f"in {_count(len(self.changes), 'changed file')}"
        )

    def summary(self) -> str:
        """The one-line verdict: ``pass: ...`` or ``fail: ...``."""
        return f"{self.verdict}: {self.findings_line()}"

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "summary": self.summary(),
            "base": {"ref": self.base_ref, "commit": self.base, "mergeBase": self.merge_base},
            "head": {"ref": self.head_ref, "commit": self.head},
            "codeOnly": self.code_only,
            "changes": [{"status": change.status, "path": change.path} for change in self.changes],
            "added": {
                "records": dict(self.added_records),
                "blobs": self.added_blobs,
                "attestations": self.added_attestations,
            },
            "lints": [finding.to_json() for finding in self.lints],
            "hints": [finding.to_json() for finding in self.hints],
            "leaderboards": None if self.leaderboards is None else [group.to_json() for group in self.leaderboards],
            "notChecked": [item.to_json() for item in self.not_checked],
        }


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"
