"""``kictl review`` lints advisories as strictly as records: a real PR branch in a real git repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kictl.advisories.document import advisory_path, new_advisory
from kictl.advisories.published import signed_envelope
from kictl.review import review
from tests.advisories.conftest import ID, Board, advisory_fields, publish, write_envelope
from tests.trust.conftest import at, commit_all


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


def _pr(board: Board) -> str:
    """Switch to a new PR branch off the current one; returns the base branch's name."""
    base = _git(board.registry.root, "rev-parse", "--abbrev-ref", "HEAD")
    _git(board.registry.root, "checkout", "-q", "-b", "pr")
    return base


def _lints(board: Board, base: str) -> list[tuple[str, str | None]]:
    report = review(board.registry, base, "pr")
    return [(finding.code, finding.path) for finding in report.lints]


@pytest.mark.parametrize("signer", ["unsigned", "submitter", "verifier"])
def test_an_advisory_not_signed_by_a_maintainer_is_a_lint(board: Board, signer: str) -> None:
    base = _pr(board)
    envelope = signed_envelope(new_advisory(advisory_fields()), [board.setup.submitter.load()])
    if signer == "unsigned":
        envelope["signatures"] = []
    else:
        envelope = signed_envelope(new_advisory(advisory_fields()), [getattr(board.setup, signer).load()])
    write_envelope(board, advisory_path(ID, 1), envelope)
    commit_all(board.registry, at("2025-08-01"), "an advisory")
    assert _lints(board, base) == [("bad-advisory", advisory_path(ID, 1))]


def test_a_maintainer_signed_advisory_passes_and_its_edits_do_not(board: Board) -> None:
    base = _pr(board)
    path = publish(board, board.setup.maintainer)
    commit_all(board.registry, at("2025-08-01"), "an advisory")
    assert _lints(board, base) == []
    _git(board.registry.root, "checkout", "-q", base)
    _git(board.registry.root, "merge", "-q", "--no-ff", "-m", "merge the advisory", "pr")
    _git(board.registry.root, "checkout", "-q", "-b", "pr2")
    path.write_bytes(path.read_bytes().replace(b'"payload"', b'"payload" ', 1))
    (board.registry.root / "registry/advisories/KI-2026-0002").mkdir()
    (board.registry.root / "registry/advisories/KI-2026-0002/notes.txt").write_text("x")
    commit_all(board.registry, at("2025-08-02"), "edit it")
    report = review(board.registry, base, "pr2")
    assert sorted((f.code, f.path) for f in report.lints) == [
        ("path-not-allowed", "registry/advisories/KI-2026-0002/notes.txt"),
        ("published-changed", advisory_path(ID, 1)),
    ]


def test_an_update_must_be_the_next_version_and_malformed_ones_are_lints(board: Board) -> None:
    base = _pr(board)
    maintainer = board.setup.maintainer.load()
    skipped = new_advisory(advisory_fields(version=2))  # no version 1 yet
    write_envelope(board, advisory_path(ID, 2), signed_envelope(skipped, [maintainer]))
    other = new_advisory(advisory_fields(id="KI-2026-0003"))  # named under another id's folder
    write_envelope(board, advisory_path("KI-2026-0004", 1), signed_envelope(other, [maintainer]))
    commit_all(board.registry, at("2025-08-01"), "two bad advisories")
    found = review(board.registry, base, "pr").lints
    assert sorted((f.code, f.path) for f in found) == [
        ("bad-advisory", advisory_path(ID, 2)),
        ("bad-advisory", advisory_path("KI-2026-0004", 1)),
    ]
    messages = " | ".join(f.message for f in found)
    assert "does not follow version 1" not in messages
    assert "version 2 does not follow version 0" in messages
    assert "holds KI-2026-0003 version 1, not KI-2026-0004 version 1" in messages


def test_a_new_run_of_an_advised_harness_gets_a_hint(board: Board) -> None:
    from kictl.trust import sign_record
    from tests.advisories.conftest import _run
    from tests.trust.conftest import build_records

    publish(board, board.setup.maintainer)
    commit_all(board.registry, at("2025-08-01"), "an advisory on main")
    base = _pr(board)
    implementation = build_records(tag="late").implementation
    late = _run(board.setup, "late", board.protocols["old"], 500_000, implementation)
    fixed = _run(board.setup, "late-fixed", board.protocols["fixed"], 600_000, implementation)
    board.registry.add([implementation, late, fixed])
    for run in (late, fixed):
        sign_record(board.registry, run.digest, board.setup.submitter.private)
    commit_all(board.registry, at("2025-08-02"), "two new runs")
    report = review(board.registry, base, "pr")
    assert report.lints == []
    advised = [finding for finding in report.hints if finding.code == "advised-run"]
    hexdigest = late.digest.removeprefix("sha256:")
    assert [finding.path for finding in advised] == [f"registry/records/BenchmarkRun/{hexdigest[:2]}/{hexdigest}.json"]
    assert ID in advised[0].message
