"""Rendering a review: the Markdown stays under its limit with the overflow summarised, and data cannot break it."""

from __future__ import annotations

import json

import pytest
from markdown_it import MarkdownIt

from kictl.review import (
    MARKDOWN_LIMIT,
    Finding,
    GroupDiff,
    Move,
    NotChecked,
    ReviewReport,
    Standing,
    md_code,
    md_text,
    render_markdown,
    render_text,
)
from kictl.store.git import Change
from tests.review.conftest import assert_markdown_renders, cells, table_blocks


def _report(lints: int, groups: int = 0) -> ReviewReport:
    report = ReviewReport(base_ref="origin/main", head_ref="HEAD", base="a" * 40, merge_base="a" * 40, head="b" * 40)
    for number in range(lints):
        path = f"registry/records/BenchmarkRun/{number % 256:02x}/{number:064x}.json"
        report.changes.append(Change("A", path))
        report.lints.append(Finding("schema", f"$.spec.timing.latencyNs.avg{number}: unknown member", path))
    for number in range(groups):
        moves = tuple(Move(f"kernel_{i}", i + 1, i + 2, 1000 + i, 1000 + i) for i in range(40))
        report.leaderboards = report.leaderboards or []
        report.leaderboards.append(
            GroupDiff(f"sha256:{number:064x}", "gemm", f"m{number}", "H200", "kictl", "median", None, None, moves)
        )
    report.not_checked.append(NotChecked("signatures", "no signature verifier was given to the review"))
    return report


def test_small_report_is_whole() -> None:
    markdown = render_markdown(_report(3))
    assert markdown.splitlines()[0] == "### kictl review fails: 3 lints, 0 hints in 3 changed files"
    assert assert_markdown_renders(markdown) == 1
    (block,) = table_blocks(markdown)
    assert len(block) == 2 + 3
    assert "Overflow" not in markdown


@pytest.mark.parametrize(("lints", "groups"), [(2_000, 0), (10, 400), (400, 60)])
def test_overflow_is_summarised_under_the_limit(lints: int, groups: int) -> None:
    report = _report(lints, groups)
    markdown = render_markdown(report)
    assert len(markdown) <= MARKDOWN_LIMIT
    assert_markdown_renders(markdown)
    assert markdown.splitlines()[0].startswith(f"### kictl review fails: {lints:,} lints")
    assert "_Overflow: " in markdown
    assert markdown.rstrip().endswith("<sub>`kictl review --format json` gives this report as JSON.</sub>")
    assert len(report.to_json()["lints"]) == lints  # the JSON keeps everything
    if groups == 0:
        rows = len(table_blocks(markdown)[0]) - 2
        assert f"_…and {lints - rows:,} lints more, not shown: the comment is limited to 60,000 characters" in markdown


def test_lints_come_before_hints_and_leaderboards() -> None:
    report = _report(2, 1)
    report.hints.append(Finding("policy-changed", "changes the policy", "registry/policy.json"))
    markdown = render_markdown(report)
    assert markdown.index("#### Lints") < markdown.index("#### Hints") < markdown.index("#### Leaderboards")
    assert markdown.index("#### Leaderboards") < markdown.index("#### Not checked")
    assert assert_markdown_renders(markdown) == 3


def test_hostile_text_cannot_break_a_table() -> None:
    report = _report(0)
    path = "registry/records/BenchmarkRun/ab/`x|y`.json"
    report.changes.append(Change("A", path))
    report.lints.append(
        Finding("schema", "a | pipe, `code`, *stars*, [link](http://x), <b>html</b>, @maintainer\nnew line", path)
    )
    report.leaderboards = [
        GroupDiff(
            "sha256:" + "0" * 64,
            "gemm|x",
            "m`1`",
            "H200",
            "fam",
            "median",
            None,
            Standing("k|<script>", "sha256:" + "1" * 64, 1, 5, "reported"),
            (Move("k|<script>", None, 1, None, 5),),
        )
    ]
    markdown = render_markdown(report)
    assert assert_markdown_renders(markdown) == 2
    for block in table_blocks(markdown):
        assert {len(cells(line)) for line in block} == {len(cells(block[0]))}
    assert "@maintainer" not in markdown
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    assert "<b>" not in html
    assert "<script>" not in html
    assert "<code>k|&lt;script&gt;</code>" in html


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", "`plain`"),
        ("a`b", "``a`b``"),
        ("`edge`", "`` `edge` ``"),
        ("x|y", "`x\\|y`"),
    ],
)
def test_md_code(text: str, expected: str) -> None:
    assert md_code(text) == expected


def test_md_text() -> None:
    assert md_text("a_b *c* [d] <e> | f @g\nh") == "a\\_b \\*c\\* \\[d\\] \\<e\\> \\| f &#64;g h"


def test_text_wraps_at_100_columns() -> None:
    report = _report(5, 1)
    report.lints.append(Finding("below-floor", "word " * 60, "registry/records/BenchmarkRun/00/" + "0" * 64 + ".json"))
    text = render_text(report)
    assert all(len(line) <= 100 for line in text.splitlines())
    assert "0" * 12 + "…" in text


def test_a_latency_is_never_split_from_its_unit() -> None:
    report = _report(0)
    for width in range(80, 95):  # one of these puts "30.0" at the end of a 100-column line
        report.hints.append(Finding("new-first", "w" * width + " is 30.0 µs, 1.33x faster", group="sha256:" + "0" * 64))
    lines = render_text(report).splitlines()
    assert all(len(line) <= 100 for line in lines)
    assert not [line for line in lines if line.strip().startswith("µs")]
    assert sum(line.endswith(" is 30.0 µs,") for line in lines) > 0


def test_the_changes_line_wraps_too() -> None:
    report = _report(1)
    report.added_records = {"Implementation": 1, "BenchmarkProtocol": 1, "ExecutionEnvironment": 1, "BenchmarkRun": 2}
    report.added_attestations = 2
    lines = render_text(report).splitlines()
    assert lines[2:4] == [
        "changes: 1 added; new: 1 Implementation, 1 BenchmarkProtocol, 1 ExecutionEnvironment, 2",
        "  BenchmarkRuns, 2 attestations",
    ]


def test_json_is_one_document() -> None:
    document = json.loads(json.dumps(_report(2, 1).to_json()))
    assert document["leaderboards"][0]["moves"][0] == {
        "implementation": "kernel_0",
        "beforeRank": 1,
        "afterRank": 2,
        "beforeNs": 1000,
        "afterNs": 1000,
    }
    assert document["notChecked"] == [
        {"check": "signatures", "reason": "no signature verifier was given to the review"}
    ]


def test_a_repeated_hint_is_one_line_with_its_count() -> None:
    """Issue 13: review repeated one hint 129 times; now it says it once, with "(129 runs)"."""
    report = _report(0)
    message = "no verifier has rerun this run yet; one rerun would make it verified"
    paths = [f"registry/records/BenchmarkRun/{n:02x}/{n:064x}.json" for n in range(129)]
    report.hints.extend(Finding("rerun-suggested", message, path) for path in paths)
    report.hints.append(Finding("stale-group", "the #1 of this group is 400 days old", group="sha256:" + "c" * 64))
    text = render_text(report)
    assert text.count(message) == 1
    assert f"{message} (129 runs)" in " ".join(text.split())
    assert f"{paths[0][:32]}" in text
    assert "and 128 more" in text
    assert "the #1 of this group is 400 days old" in text
    assert "(1 groups)" not in text
    markdown = render_markdown(report)
    assert markdown.count("no verifier has rerun this run yet") == 1
    assert "(129 runs)" in markdown
    (block,) = table_blocks(markdown)
    assert len(block) == 2 + 2
    assert len(report.to_json()["hints"]) == 130  # the JSON keeps every finding
