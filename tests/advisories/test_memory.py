"""Advisories keep a memory (issue 41, class 2): a copy that deletes or changes an advisory's version files
clears nothing.

The attacks: a fork deletes an advisory in a later commit and a reader clones it fresh; a fork deletes a
withdrawal to bring the advisory back; a fork changes a published version's bytes; a checkout whose history
was rewritten after this machine read it.  Each reader still applies the highest version seen, prints one loud
warning, and ``kictl verify`` exits 1.  Real keys, real DSSE envelopes, real git clones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import git
import pytest

from kictl import canon
from kictl.advisories.document import advisory_path
from kictl.advisories.memory import MEMORY_FILE, recall, take_warnings
from kictl.advisories.published import load_advisories
from kictl.standing import record_marks
from kictl.store.registry import Registry
from kictl.trust.anchor import pin
from tests.advisories.conftest import ID, Board, publish
from tests.conftest import RunCli
from tests.trust.conftest import at, commit_all


@pytest.fixture(autouse=True)
def _no_queued_warnings() -> None:
    take_warnings()


def _delete(registry: Registry, path: str, moment: str, message: str = "tidy up") -> None:
    (registry.root / path).unlink()
    registry.git._run("rm", "-q", "--cached", path)
    commit_all(registry, at(moment), message)


def _fresh_clone(board: Board, tmp_path: Path) -> Registry:
    """A fresh clone of the board's repository; this machine pins the board's anchor as a reader would."""
    anchor = (board.registry.root / "registry/trust/2.root.json").read_bytes()
    pin(canon.DIGEST_PREFIX + canon.sha256_hex(anchor))
    target = tmp_path / "clone"
    git.Repo.clone_from(str(board.registry.root), str(target))
    assert not (target / MEMORY_FILE).exists()
    return Registry(target)


def _verify(cli: RunCli, registry: Registry, digest: str) -> Any:
    return cli("verify", digest, "--registry", registry.root)


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning: ADVISORY DELETED")]


def _leaderboard_marks(cli: RunCli, registry: Registry, digest: str) -> list[str]:
    result = cli("leaderboard", "scale_h8", "--workload", "n64", "--registry", registry.root, "--json")
    assert result.exit_code == 0, result.output
    (group,) = json.loads(result.stdout)
    marks: list[str] = next(row["advisories"] for row in group["rows"] if row["run"] == digest)
    return marks


def test_a_deleted_advisory_still_marks_its_runs_in_a_fresh_clone(board: Board, cli: RunCli, tmp_path: Path) -> None:
    old = board.runs["old"].digest
    publish(board, board.setup.maintainer)
    commit_all(board.registry, at("2025-08-01"), "advisory")
    honest = _fresh_clone(board, tmp_path / "before")
    checked = _verify(cli, honest, old)
    assert checked.exit_code == 0, checked.output
    assert _warnings(checked.stderr) == []

    _delete(board.registry, advisory_path(ID, 1), "2025-09-01")
    clone = _fresh_clone(board, tmp_path / "after")
    assert not (clone.root / advisory_path(ID, 1)).exists()

    checked = _verify(cli, clone, old)
    assert checked.exit_code == 1, checked.output
    (line,) = _warnings(checked.stderr)
    assert advisory_path(ID, 1) in line
    assert f"{ID} version 1, open" in line
    assert "\n" not in line
    assert "ADVISORY DELETED" in checked.stdout  # among the failures, too
    assert "harness advisory KI-2026-0001" in checked.stdout  # and the run is still marked
    # every reader still marks the run, and says why on stderr
    assert record_marks(clone, old).of(old) == (ID,)
    assert _leaderboard_marks(cli, clone, old) == [ID]
    shown = cli("show", old, "--registry", clone.root, "--json")
    assert shown.exit_code == 0, shown.output
    assert [mark["id"] for mark in json.loads(shown.stdout)["advisories"]["marked"]] == [ID]
    assert len(_warnings(shown.stderr)) == 1
    # a run the advisory does not match is not marked, but its verify fails too: the copy is not intact
    fixed = _verify(cli, clone, board.runs["fixed"].digest)
    assert fixed.exit_code == 1, fixed.output


def test_a_deleted_withdrawal_does_not_bring_the_advisory_back(board: Board, cli: RunCli, tmp_path: Path) -> None:
    old = board.runs["old"].digest
    publish(board, board.setup.maintainer)
    commit_all(board.registry, at("2025-08-01"), "advisory")
    withdrawn = cli("advisory", "withdraw", ID, "--reason", "a false alarm", "--key", board.setup.maintainer.private,
                    "--registry", board.registry.root)  # fmt: skip
    assert withdrawn.exit_code == 0, withdrawn.output
    commit_all(board.registry, at("2025-08-02"), "withdrawn")
    _delete(board.registry, advisory_path(ID, 2), "2025-09-01")
    clone = _fresh_clone(board, tmp_path)

    assert record_marks(clone, old).of(old) == ()  # version 2, withdrawn, is the highest seen
    assert _leaderboard_marks(cli, clone, old) == []
    checked = _verify(cli, clone, old)
    assert checked.exit_code == 1, checked.output
    (line,) = _warnings(checked.stderr)
    assert advisory_path(ID, 2) in line
    assert f"{ID} version 2, withdrawn" in line
    listed = cli("advisory", "list", "--registry", clone.root, "--json")
    assert listed.exit_code == 0, listed.output
    document = json.loads(listed.stdout)
    assert [(a["id"], a["version"], a["status"]) for a in document["advisories"]] == [(ID, 2, "withdrawn")]
    assert [(m["path"], m["how"]) for m in document["missing"]] == [(advisory_path(ID, 2), "deleted")]


def test_a_changed_published_version_still_counts_as_published(board: Board, cli: RunCli, tmp_path: Path) -> None:
    """A fork overwrites the withdrawal's bytes with an envelope that does not verify: same as deleting it."""
    old = board.runs["old"].digest
    publish(board, board.setup.maintainer)
    commit_all(board.registry, at("2025-08-01"), "advisory")
    publish(board, board.setup.maintainer, version=2, status="withdrawn", withdrawnReason="false alarm")
    commit_all(board.registry, at("2025-08-02"), "withdrawn")
    path = board.registry.root / advisory_path(ID, 2)
    path.write_text(path.read_text().replace('"sig": "', '"sig": "AAAA'))
    commit_all(board.registry, at("2025-09-01"), "edit")
    clone = _fresh_clone(board, tmp_path)
    found = load_advisories(clone)
    assert found.get(ID).advisory.status == "withdrawn"
    assert [(m.path, m.how) for m in found.missing] == [(advisory_path(ID, 2), "changed")]
    assert record_marks(clone, old).of(old) == ()
    assert _verify(cli, clone, old).exit_code == 1


def test_this_machine_remembers_what_a_rewritten_history_hides(board: Board, cli: RunCli) -> None:
    """The advisory is gone from the files and from history (a reset): only this machine's memory has it."""
    old = board.runs["old"].digest
    base = board.registry.git.head()
    assert base is not None
    publish(board, board.setup.maintainer)
    commit_all(board.registry, at("2025-08-01"), "advisory")
    assert record_marks(board.registry, old).of(old) == (ID,)  # read once here: remembered
    remembered = json.loads((board.registry.root / MEMORY_FILE).read_text())["advisories"]
    assert (remembered[ID]["version"], remembered[ID]["path"]) == (1, advisory_path(ID, 1))
    board.registry.git.reset_hard(base)
    assert not (board.registry.root / advisory_path(ID, 1)).exists()
    assert [seen.path for seen in recall(board.registry.root, set())] == [advisory_path(ID, 1)]

    assert record_marks(board.registry, old).of(old) == (ID,)
    checked = _verify(cli, board.registry, old)
    assert checked.exit_code == 1, checked.output
    (line,) = _warnings(checked.stderr)
    assert "seen on this machine" in line
    assert MEMORY_FILE in line


def test_a_memory_that_git_tracks_is_ignored(board: Board) -> None:
    """A copy cannot bring a memory of its own: a committed .kictl/advisories.json counts for nothing."""
    old = board.runs["old"].digest
    base = board.registry.git.head()
    assert base is not None
    publish(board, board.setup.maintainer)
    commit_all(board.registry, at("2025-08-01"), "advisory")
    record_marks(board.registry, old)
    board.registry.git.reset_hard(base)  # only the memory has it now
    assert recall(board.registry.root, set())
    board.registry.git._run("add", "-f", MEMORY_FILE)
    commit_all(board.registry, at("2025-08-02"), "memory")
    assert recall(board.registry.root, set()) == []
    assert record_marks(board.registry, old).of(old) == ()


def test_an_intact_registry_with_advisories_warns_of_nothing(board: Board, cli: RunCli) -> None:
    publish(board, board.setup.maintainer)
    commit_all(board.registry, at("2025-08-01"), "advisory")
    publish(board, board.setup.maintainer, version=2, status="withdrawn", withdrawnReason="false alarm")
    checked = _verify(cli, board.registry, board.runs["old"].digest)  # version 2 not committed yet
    assert checked.exit_code == 0, checked.output
    assert _warnings(checked.stderr) == []
    assert load_advisories(board.registry).missing == []


def test_a_killed_writers_temporary_file_is_never_read(board: Board, cli: RunCli) -> None:
    """``advisory add`` writes a temporary file and links it into place: one left by a kill counts for nothing."""
    path = publish(board, board.setup.maintainer)
    commit_all(board.registry, at("2025-08-01"), "advisory")
    leftover = path.with_name(f".{path.name}.k1ll3d.tmp")
    leftover.write_bytes(path.read_bytes()[:40])
    found = load_advisories(board.registry)
    assert (found.ignored, found.missing) == ([], [])
    listed = cli("advisory", "list", "--registry", board.registry.root)
    assert listed.exit_code == 0, listed.output
    assert "ignored" not in listed.stderr
    assert _verify(cli, board.registry, board.runs["old"].digest).exit_code == 0


def test_reading_a_pr_branch_then_going_back_to_main_is_no_deletion(board: Board, cli: RunCli) -> None:
    """Honest: a maintainer reads a PR branch that publishes an advisory, then switches back to main."""
    root = board.registry.root
    main = board.registry.git.current_branch()
    assert main is not None
    board.registry.git._run("checkout", "-q", "-b", "advisories")
    publish(board, board.setup.maintainer)
    assert recall(root, set()) == []  # not committed: not published, not remembered
    commit_all(board.registry, at("2025-08-01"), "advisory")
    assert record_marks(board.registry, board.runs["old"].digest).of(board.runs["old"].digest) == (ID,)
    board.registry.git._run("checkout", "-q", main)
    assert recall(root, set()) == []  # the branch still holds it: a switch, not a rewrite
    checked = _verify(cli, board.registry, board.runs["old"].digest)
    assert checked.exit_code == 0, checked.output
    assert _warnings(checked.stderr) == []
    board.registry.git._run("branch", "-q", "-D", "advisories")  # now nothing holds it: as if history was rewritten
    assert _verify(cli, board.registry, board.runs["old"].digest).exit_code == 1
