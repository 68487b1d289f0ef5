"""Readers apply harness advisories (issue 28): exactly the matching runs are marked, only when a maintainer
signed; a rerun by a fixed harness clears the mark; leaderboard, verify, show, cite, the site and --json agree.

Real keys, real DSSE envelopes, a real git repository (tests/advisories/conftest.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kictl import trust
from kictl.advisories.document import advisory_path, new_advisory
from kictl.advisories.published import load_advisories, signed_envelope, withdrawn
from kictl.advisories.published import publish_advisory as publish_core
from kictl.errors import UsageError
from kictl.standing import record_marks
from tests.advisories.conftest import ID, Board, advisory_fields, publish, write_envelope
from tests.conftest import RunCli
from tests.trust.conftest import at, commit_all


def _marked(board: Board) -> set[str]:
    return {label for label, run in board.runs.items() if record_marks(board.registry, run.digest).of(run.digest)}


def _rows(cli: RunCli, board: Board, *extra: str) -> list[dict[str, Any]]:
    result = cli("leaderboard", "scale_h8", "--workload", "n64", "--registry", board.registry.root, "--json", *extra)
    assert result.exit_code == 0, result.output
    (group,) = json.loads(result.stdout)
    rows: list[dict[str, Any]] = group["rows"]
    return rows


def _set_policy(board: Board, mode: str) -> None:
    """``advisedRuns: mode`` in the policy, signed by the maintainers (docs/trust.md "The policy")."""
    path = board.registry.policy_path
    path.write_text(json.dumps({**json.loads(path.read_text()), "advisedRuns": mode}, indent=2) + "\n")
    trust.sign_policy(board.registry, keys=[board.setup.maintainer.load()])


def _label(board: Board, run_digest: str) -> str:
    return next(label for label, run in board.runs.items() if run.digest == run_digest)


def test_a_maintainer_signed_advisory_marks_exactly_the_matching_runs(board: Board) -> None:
    publish(board, board.setup.maintainer)
    # 0.1.0 + perf_counter_ns + cpu, and "first", whose protocol records no device (it cannot be told apart);
    # not 0.2.0, not the wall_clock timer, not the cuda device
    assert _marked(board) == {"first", "old"}
    board.registry.add([board.runs["rerun_old"], board.runs["rerun_fixed"]])
    commit_all(board.registry, at("2025-08-01"), "advisory")
    assert _marked(board) == {"first", "old", "rerun_old"}


@pytest.mark.parametrize("signer", ["unsigned", "submitter", "verifier", "stranger"])
def test_an_advisory_not_signed_by_a_maintainer_changes_nothing(board: Board, cli: RunCli, signer: str) -> None:
    advisory = new_advisory(advisory_fields())
    path = advisory_path(ID, 1)
    if signer == "unsigned":
        envelope = signed_envelope(advisory, [board.setup.submitter.load()])
        envelope["signatures"] = []
    else:
        envelope = signed_envelope(advisory, [getattr(board.setup, signer).load()])
    write_envelope(board, path, envelope)
    commit_all(board.registry, at("2025-08-01"), "advisory")
    assert _marked(board) == set()
    assert [row["advisories"] for row in _rows(cli, board)] == [[]] * 5
    found = load_advisories(board.registry)
    assert not found.current
    assert [p for p, _ in found.ignored] == [path]
    listed = cli("advisory", "list", "--registry", board.registry.root, "--json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout)["advisories"] == []


def test_add_refuses_a_key_that_is_no_maintainer(board: Board, cli: RunCli, tmp_path: Any) -> None:
    draft = tmp_path / "advisory.json"
    draft.write_text(json.dumps({"apiVersion": "kernelindex.dev/v1alpha1", "kind": "HarnessAdvisory",
                                 **advisory_fields()}))  # fmt: skip
    result = cli("advisory", "add", draft, "--key", board.setup.verifier.private, "--registry", board.registry.root)
    assert result.exit_code == 1, result.output
    assert "an advisory needs a maintainer key" in result.stderr
    assert not (board.registry.root / advisory_path(ID, 1)).exists()
    result = cli("advisory", "add", draft, "--key", board.setup.maintainer.private, "--registry", board.registry.root)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == advisory_path(ID, 1)
    again = cli("advisory", "add", draft, "--key", board.setup.maintainer.private, "--registry", board.registry.root)
    assert again.exit_code == 2, again.output  # version 1 is published: the next is 2


def test_policy_decides_how_marked_runs_rank(board: Board, cli: RunCli) -> None:
    publish(board, board.setup.maintainer)
    commit_all(board.registry, at("2025-08-01"), "advisory")
    apart = _rows(cli, board)  # the default
    assert [(_label(board, row["run"]), row["rank"], row["advisories"]) for row in apart] == [
        ("cuda", 1, []),
        ("other_timer", 2, []),
        ("fixed", 3, []),
        ("old", 4, [ID]),  # the fastest, ranked below every unmarked run
        ("first", 5, [ID]),
    ]
    for mode, expected in (
        ("rank", [("old", [ID]), ("cuda", []), ("other_timer", []), ("fixed", []), ("first", [ID])]),
        ("drop", [("cuda", []), ("other_timer", []), ("fixed", [])]),
    ):
        _set_policy(board, mode)
        rows = _rows(cli, board)
        assert [(_label(board, row["run"]), row["advisories"]) for row in rows] == expected, mode
    text = cli("leaderboard", "scale_h8", "--workload", "n64", "--registry", board.registry.root)
    assert "left out: 2 under a harness advisory" in text.stdout, text.stdout


def test_a_rerun_by_a_fixed_harness_clears_the_mark_and_readers_agree(board: Board, cli: RunCli, tmp_path: Any) -> None:
    setup = board.setup
    old = board.runs["old"]
    board.registry.add([board.runs["rerun_old"], board.runs["rerun_fixed"]])
    _set_policy(board, "rank")  # "old" leads its group
    publish(board, setup.maintainer)
    # a verifier's rerun by the same (affected) harness agrees, but does not clear the mark
    rerun_old = {"runDigest": board.runs["rerun_old"].digest, "verdict": "agrees", "ratio": 0.99}
    trust.sign_record(board.registry, old.digest, setup.verifier.private, predicate_type="rerun", predicate=rerun_old)
    commit_all(board.registry, at("2025-08-01"), "advisory and a rerun by 0.1.0")
    assert record_marks(board.registry, old.digest).of(old.digest) == (ID,)
    # a community rerun by the fixed harness does not clear it either
    rerun_fixed = {"runDigest": board.runs["rerun_fixed"].digest, "verdict": "agrees", "ratio": 1.01}
    trust.sign_record(
        board.registry, old.digest, setup.community.private, predicate_type="rerun", predicate=rerun_fixed
    )
    commit_all(board.registry, at("2025-08-02"), "a community rerun by 0.2.0")
    assert record_marks(board.registry, old.digest).of(old.digest) == (ID,)

    def readers() -> dict[str, Any]:
        root = board.registry.root
        verify = json.loads(cli("verify", old.digest, "--registry", root, "--json").stdout)
        show = json.loads(cli("show", old.digest, "--registry", root, "--json").stdout)
        cite = json.loads(cli("cite", old.digest, "--registry", root, "--json").stdout)
        row = next(row for row in _rows(cli, board) if row["run"] == old.digest)
        board_json = json.loads(cli("leaderboard", "scale_h8", "--registry", root, "--json").stdout)
        leaders = [record for b in board_json["boards"] for record in b["records"]]
        verify_text = cli("verify", old.digest, "--registry", root).stdout
        return {
            "verify": [m["id"] for m in verify["advisories"]["marked"]],
            "show": [m["id"] for m in show["advisories"]["marked"]],
            "cite": cite["advisories"],
            "row": row["advisories"],
            "leader": [record["advisories"] for record in leaders if record["run"] == old.digest],
            "text": f"verified · harness advisory {ID}" in verify_text,
            "cleared": verify["advisories"]["cleared"],
        }

    marked = readers()
    assert marked == {"verify": [ID], "show": [ID], "cite": [ID], "row": [ID], "leader": [[ID]], "text": True,
                      "cleared": []}  # fmt: skip
    site = _site(cli, board, tmp_path / "site-marked")
    assert site["verify"] == site["show"] == site["cite"] == [ID]
    assert site["badge"]

    trust.sign_record(board.registry, old.digest, setup.verifier.private, predicate_type="rerun", predicate=rerun_fixed)
    commit_all(board.registry, at("2025-08-03"), "a verifier's rerun by 0.2.0")
    cleared = readers()
    assert cleared["verify"] == cleared["show"] == cleared["cite"] == cleared["row"] == []
    assert cleared["leader"] == [[]]  # back at #1 of its group, unmarked
    assert cleared["cleared"] == [{"id": ID, "byRerun": board.runs["rerun_fixed"].digest}]
    site = _site(cli, board, tmp_path / "site-cleared")
    assert site["verify"] == site["show"] == site["cite"] == []
    assert not site["badge"]


def _site(cli: RunCli, board: Board, out: Any) -> dict[str, Any]:
    old = board.runs["old"].digest
    result = cli("site", "build", out, "--registry", board.registry.root)
    assert result.exit_code == 0, result.output
    page = out / "r" / old
    return {
        "verify": [m["id"] for m in json.loads((page / "verify.json").read_text())["advisories"]["marked"]],
        "show": [m["id"] for m in json.loads((page / "show.json").read_text())["advisories"]["marked"]],
        "cite": json.loads((page / "cite.json").read_text())["advisories"],
        "badge": f"harness advisory {ID}" in (page / "index.html").read_text(),
    }


def test_a_withdrawn_advisory_marks_nothing(board: Board, cli: RunCli) -> None:
    publish(board, board.setup.maintainer)
    commit_all(board.registry, at("2025-08-01"), "advisory")
    result = cli("advisory", "withdraw", ID, "--reason", "a false alarm", "--key", board.setup.maintainer.private,
                 "--registry", board.registry.root)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert _marked(board) == set()
    shown = json.loads(cli("advisory", "show", ID, "--registry", board.registry.root, "--json").stdout)
    assert (shown["version"], shown["status"], shown["marks"]) == (2, "withdrawn", [])
    # a submitter cannot un-withdraw it: its version 3 counts for nothing
    current = load_advisories(board.registry).get(ID).advisory
    reopened = new_advisory({**advisory_fields(), "version": 3})
    write_envelope(board, advisory_path(ID, 3), signed_envelope(reopened, [board.setup.submitter.load()]))
    assert _marked(board) == set()
    with pytest.raises(UsageError, match="withdrawn already"):
        withdrawn(current, "again")


def test_show_lists_the_runs_an_advisory_marks(board: Board, cli: RunCli) -> None:
    publish_core(board.registry, new_advisory(advisory_fields()), [board.setup.maintainer.load()])
    result = cli("advisory", "show", ID, "--registry", board.registry.root, "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["marks"] == sorted(board.runs[label].digest for label in ("first", "old"))
    text = cli("advisory", "show", ID, "--registry", board.registry.root)
    assert f"advisory   {ID} version 1 (open)" in text.stdout
    unknown = cli("advisory", "show", "KI-2026-0099", "--registry", board.registry.root)
    assert unknown.exit_code == 3, unknown.output


def test_rerun_advisory_lists_what_this_machine_cannot_rerun(board: Board, cli: RunCli) -> None:
    """The walk-through's runs name a GPU product ("CPU") this machine is not, or a CUDA device: none runs here.

    (tests/rerun runs real reruns; here only the selection ``kictl rerun --advisory`` makes is checked.)
    """
    from kictl.advisories.rerun import runnable_advised_runs

    publish(board, board.setup.maintainer)
    here, elsewhere = runnable_advised_runs(board.registry, ID)
    assert here == []
    assert sorted(digest for digest, _ in elsewhere) == sorted(board.runs[k].digest for k in ("first", "old"))
    result = cli("rerun", "--advisory", ID, "--out", "out", "--registry", board.registry.root)
    assert result.exit_code == 1, result.output
    assert f"advisory {ID} marks no run this machine can rerun" in result.stderr
    assert result.stderr.count("not rerun here: sha256:") == 2
    unknown = cli("rerun", "--advisory", "KI-2026-0042", "--out", "out", "--registry", board.registry.root)
    assert unknown.exit_code == 3, unknown.output
