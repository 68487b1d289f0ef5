"""A review report as text for a terminal (100 columns) and as Markdown for a PR comment (within
GitHub's size limit).
"""

from __future__ import annotations

import re
import textwrap
from collections import Counter
from collections.abc import Sequence

from kictl import render
from kictl.records import (
    KINDS,
)
from kictl.render import latency
from kictl.review._common import _CONTROL, MARKDOWN_LIMIT
from kictl.review.model import Finding
from kictl.review.report import ReviewReport, _count
from kictl.store.git import Change


def _added_line(report: ReviewReport) -> str:
    parts = [
        _count(count, kind) for kind, count in sorted(report.added_records.items(), key=lambda i: KINDS.index(i[0]))
    ]
    if report.added_blobs:
        parts.append(_count(report.added_blobs, "blob"))
    if report.added_attestations:
        parts.append(_count(report.added_attestations, "attestation"))
    return ", ".join(parts) if parts else "none"


def _status_counts(changes: Sequence[Change]) -> str:
    words = {"A": "added", "M": "modified", "D": "deleted", "T": "type changed"}
    counts = Counter(change.status for change in changes)
    return ", ".join(f"{counts[s]:,} {words.get(s, s)}" for s in ("A", "M", "D", "T") if counts[s])


def _noun(findings: Sequence[Finding]) -> str:
    if all(finding.path is None and finding.group is not None for finding in findings):
        return "groups"
    if all(finding.path is not None and "/BenchmarkRun/" in finding.path for finding in findings):
        return "runs"
    return "files"


def grouped(findings: Sequence[Finding]) -> list[tuple[Finding, int, str]]:
    """Findings with one code and one message once each: ``(first, how many, noun)``, in first-seen order.

    A hint that a PR's 129 runs all earn is one line "... (129 runs)", not
    129 lines; the JSON report keeps every finding.
    """
    by_text: dict[tuple[str, str], list[Finding]] = {}
    for finding in findings:
        by_text.setdefault((finding.code, finding.message), []).append(finding)
    return [(same[0], len(same), _noun(same)) for same in by_text.values()]


def _where(first: Finding, count: int, noun: str) -> str:
    return first.where if count == 1 else f"{first.where} and {count - 1} more"


def _message(first: Finding, count: int, noun: str) -> str:
    return first.message if count == 1 else f"{first.message} ({count} {noun})"


def _short_hex(text: str) -> str:
    """Shorten 64-digit hex runs for the terminal (digests stay whole in JSON and Markdown); no control characters."""
    return render.compact_hex(_printable(text))


def _printable(text: str) -> str:
    """``text`` with control characters (a newline, a terminal escape) shown as ``?``."""
    return _CONTROL.sub("?", text)


_NBSP = "\u00a0"
#: The space between a number and its unit, which a line break must not split ("30.0 µs").
_UNIT_SPACE = re.compile(r"(?<=\d) (?=(?:ns|µs|ms|s)\b)")


def render_text(report: ReviewReport, *, width: int = 100) -> str:
    """The report for a terminal, lines of at most ``width`` columns (digests in messages stay whole)."""
    lines = [
        f"kictl review: {report.base_ref} ({report.merge_base[:12]}) .. {report.head_ref} ({report.head[:12]})",
        report.summary(),
    ]
    if report.changes and not report.code_only:
        changes = f"changes: {_status_counts(report.changes)}; new: {_added_line(report)}"
        lines.extend(textwrap.wrap(changes, width=width, subsequent_indent="  ", break_long_words=False))
    wrap = textwrap.TextWrapper(width=width, initial_indent="    ", subsequent_indent="    ", break_long_words=False)
    for title, findings in (("lints", report.lints), ("hints", report.hints)):
        if not findings:
            continue
        lines += ["", f"{title}:"]
        for finding, count, noun in grouped(findings):
            lines.append(f"  {finding.code}  {_short_hex(_where(finding, count, noun))}".rstrip())
            message = _message(finding, count, noun)
            lines.extend(line.replace(_NBSP, " ") for line in wrap.wrap(_UNIT_SPACE.sub(_NBSP, message)))
    if report.leaderboards:
        lines += ["", "leaderboards:"]
        for group in report.leaderboards:
            lines.extend(wrap.wrap(group.label))
            for move in group.moves:
                lines.append(
                    f"      {_rank(move.before_rank):>5} -> {_rank(move.after_rank):<5}  "
                    f"{latency(move.before_ns):>10} -> {latency(move.after_ns):<10}  {move.implementation}"
                )
    if report.not_checked:
        lines += ["", "not checked:"]
        item_wrap = textwrap.TextWrapper(
            width=width, initial_indent="  ", subsequent_indent="    ", break_long_words=False
        )
        for item in report.not_checked:
            lines.extend(item_wrap.wrap(f"{item.check}: {item.reason}"))
    return "\n".join(_printable(line) for line in lines) + "\n"


def _rank(rank: int | None) -> str:
    return "-" if rank is None else f"#{rank}"


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")


def md_text(text: str) -> str:
    """Text safe in a Markdown table cell: punctuation escaped, no line breaks, no @mentions."""
    flat = _printable(" ".join(text.split()))
    return _MD_SPECIAL.sub(r"\\\1", flat).replace("@", "&#64;")


def md_code(text: str) -> str:
    """Inline code that survives any content: a fence longer than any backtick run inside, pipes escaped."""
    flat = _printable(" ".join(text.split()))
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    padded = f" {flat} " if flat.startswith("`") or flat.endswith("`") else flat
    return f"{fence}{padded}{fence}".replace("|", "\\|")


class _Budget:
    """Lines of Markdown that stop growing before ``limit`` characters, counting what was left out."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.lines: list[str] = []
        self.size = 0

    def fits(self, line: str, reserve: int = 0) -> bool:
        return self.size + len(line) + 1 + reserve <= self.limit

    def add(self, line: str) -> None:
        self.lines.append(line)
        self.size += len(line) + 1


_RESERVE = 600  # room kept for the overflow notes and the footer


def _table(budget: _Budget, headers: Sequence[str], rows: Sequence[Sequence[str]], align: str, noun: str) -> int:
    """Add a table, as many rows as fit; returns how many rows were left out."""
    head = "| " + " | ".join(headers) + " |"
    separator = "|" + "|".join(" ---: " if a == "r" else " --- " for a in align) + "|"
    if not rows:
        return 0
    first = "| " + " | ".join(rows[0]) + " |"
    if not budget.fits(head + separator + first, reserve=_RESERVE + 2):
        budget.add(f"_{_count(len(rows), noun)} not shown: the comment is limited to {MARKDOWN_LIMIT:,} characters._")
        return len(rows)
    budget.add(head)
    budget.add(separator)
    shown = 0
    for row in rows:
        line = "| " + " | ".join(row) + " |"
        if not budget.fits(line, reserve=_RESERVE):
            break
        budget.add(line)
        shown += 1
    left = len(rows) - shown
    if left:
        budget.add("")
        budget.add(
            f"_…and {_count(left, noun)} more, not shown: the comment is limited to {MARKDOWN_LIMIT:,} "
            "characters; the JSON report has them all._"
        )
    return left


def render_markdown(report: ReviewReport, *, limit: int = MARKDOWN_LIMIT) -> str:
    """The report as a PR comment: a summary line, lints first, a table per group; at most ``limit`` characters."""
    budget = _Budget(limit)
    verdict = "passes" if report.ok else "fails"
    budget.add(f"### kictl review {verdict}: {md_text(report.findings_line())}")
    budget.add("")
    budget.add(
        f"Base {md_code(report.base_ref)} at {md_code(report.merge_base[:12])} (merge base), "
        f"head {md_code(report.head[:12])}."
    )
    if report.changes and not report.code_only:
        budget.add(f"Changes: {_status_counts(report.changes)}. New: {md_text(_added_line(report))}.")
    left: Counter[str] = Counter()
    for title, findings, noun in (
        ("Lints (each fails the review)", report.lints, "lint"),
        ("Hints", report.hints, "hint"),
    ):
        if not findings:
            continue
        budget.add("")
        budget.add(f"#### {title}")
        budget.add("")
        rows = [
            [
                md_code(_where(finding, count, noun)) if finding.where else "",
                md_code(finding.code),
                md_text(_message(finding, count, noun)),
            ]
            for finding, count, noun in grouped(findings)
        ]
        left[noun] += _table(budget, ["where", noun, "message"], rows, "lll", noun)
    if report.leaderboards:
        budget.add("")
        budget.add("#### Leaderboards")
        for number, group in enumerate(report.leaderboards):
            if not budget.fits("", reserve=_RESERVE * 2):
                rest = len(report.leaderboards) - number
                left["comparison group"] += rest
                budget.add("")
                budget.add(f"_{_count(rest, 'comparison group')} more, not shown._")
                break
            budget.add("")
            budget.add(f"**{md_text(group.label)}** (group {md_code(group.key)})")
            budget.add("")
            rows = [
                [
                    md_code(move.implementation),
                    _rank(move.before_rank),
                    latency(move.before_ns),
                    _rank(move.after_rank),
                    latency(move.after_ns),
                ]
                for move in group.moves
            ]
            headers = ["implementation", "rank before", "latency before", "rank after", "latency after"]
            left["leaderboard row"] += _table(budget, headers, rows, "lrrrr", "leaderboard row")
    if report.not_checked:
        budget.add("")
        budget.add("#### Not checked")
        budget.add("")
        for item in report.not_checked:
            line = f"- {md_text(item.check)}: {md_text(item.reason)}"
            if budget.fits(line, reserve=_RESERVE // 2):
                budget.add(line)
    budget.add("")
    if any(left.values()):
        parts = [_count(count, noun) for noun, count in left.items() if count]
        budget.add(f"_Overflow: {', '.join(parts)} not shown; the review's JSON artifact holds the full report._")
    budget.add("<sub>`kictl review --format json` gives this report as JSON.</sub>")
    return "\n".join(budget.lines) + "\n"
