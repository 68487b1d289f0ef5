"""A warm `kictl leaderboard` prints the answer kept for the registry's state (kictl.index.answers, issue 30).

Each test ages the registry's files first (their times two seconds or more in the past): a time within two
seconds of now is "racy" and no answer is kept or read then, as the index does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kictl.index import answers
from kictl.records import StoredRecord
from tests.conftest import REPO_ROOT, RunCli
from tests.rank.conftest import World

DEFINITION = "gemm_n64_k64"


def _age(*folders: Path) -> None:
    """Move the times of the files and folders under ``folders`` and the user's config folder that changed in
    the last few seconds to three seconds ago (past the racy window): what changed gets a new time, what did
    not keeps its own, as if the test had waited."""
    now = time.time()
    for top in (*folders, Path(os.environ["KICTL_CONFIG_HOME"])):
        for folder, _, files in os.walk(top):
            for path in (*(Path(folder, name) for name in files), Path(folder)):
                if path.lstat().st_mtime > now - 3:
                    os.utime(path, (now - 3, now - 3), follow_symlinks=False)


def _kept(world: World) -> list[Path]:
    return sorted((world.registry.root / answers.ANSWERS_DIR).glob("*.json"))


@pytest.fixture
def settled(world: World, basic: dict[str, StoredRecord]) -> dict[str, StoredRecord]:
    b = basic
    b["run_fast"] = world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000)
    b["run_slow"] = world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 12_000)
    world.commit("runs")
    _age(world.registry.root / "registry", world.registry.root / ".kictl")
    return b


def _board(cli: RunCli, world: World, *extra: str) -> str:
    result = cli("leaderboard", DEFINITION, "--registry", world.registry.root, *extra)
    assert result.exit_code == 0, result.output
    return str(result.stdout)


@pytest.mark.parametrize("extra", [(), ("--json",), ("--workload", "m128"), ("--workload", "m128", "--json")])
def test_a_kept_answer_is_the_computed_one(cli: RunCli, world: World, settled: object, extra: tuple[str, ...]) -> None:
    cold = _board(cli, world, *extra)
    (kept,) = _kept(world)
    document = json.loads(kept.read_bytes())
    assert document["stdout"] == cold
    kept.write_text(json.dumps({**document, "stdout": "what the kept answer says\n"}))
    assert _board(cli, world, *extra) == "what the kept answer says\n", "the answer was not read"
    kept.unlink()
    assert _board(cli, world, *extra) == cold


def test_each_command_line_has_its_own_answer(cli: RunCli, world: World, settled: object) -> None:
    text = _board(cli, world)
    as_json = _board(cli, world, "--json")
    assert text != as_json
    assert len(_kept(world)) == 2
    assert _board(cli, world) == text
    assert _board(cli, world, "--json") == as_json


def test_a_new_commit_a_record_in_the_working_tree_and_a_policy_edit_each_change_the_answer(
    cli: RunCli, world: World, settled: dict[str, StoredRecord]
) -> None:
    b = settled
    root = world.registry.root
    before = json.loads(_board(cli, world, "--workload", "m128", "--json"))
    assert len(_kept(world)) == 1  # each state keeps its own answer
    assert [row["implementation"] for row in before[0]["rows"]] == ["fast", "slow"]

    world.run(b["m128"], b["flashinfer"], b["protocol"], b["h200"], 8_000)
    world.add()  # in the working tree, not committed
    _age(root / "registry")
    after_add = json.loads(_board(cli, world, "--workload", "m128", "--json"))
    assert len(_kept(world)) == 2  # each state keeps its own answer
    assert after_add[0]["rows"][0]["implementation"] == "flashinfer_wrapper_abc123"

    world.run(b["m128"], b["reference"], b["protocol"], b["h200"], 90_000)
    world.commit("a reference run")
    _age(root / "registry")
    after_commit = json.loads(_board(cli, world, "--workload", "m128", "--json"))
    assert len(_kept(world)) == 3  # each state keeps its own answer
    assert "reference" in [row["implementation"] for row in after_commit[0]["rows"]]

    policy = root / "registry" / "policy.json"
    document = json.loads(policy.read_bytes())
    document["staleAfterDays"] = 1  # every run was observed a day ago or more
    policy.write_text(json.dumps(document))
    _age(root / "registry")
    stale = json.loads(_board(cli, world, "--workload", "m128", "--json"))
    assert len(_kept(world)) == 4  # each state keeps its own answer
    assert all(row["stale"] for row in stale[0]["rows"]), stale
    assert not any(row["stale"] for row in after_commit[0]["rows"])


def test_a_file_changed_in_place_is_a_new_state(cli: RunCli, world: World, settled: dict[str, StoredRecord]) -> None:
    """A file's own size and time count, not only its folder's: an answer kept before a record file was
    rewritten in place is not printed for the state after it (what the board then says is the index's)."""
    _board(cli, world, "--workload", "m128", "--json")
    (kept,) = _kept(world)
    document = json.loads(kept.read_bytes())
    kept.write_text(json.dumps({**document, "stdout": "the state before\n"}))
    path = world.registry.record_path("BenchmarkRun", settled["run_slow"].digest)
    path.write_bytes(path.read_bytes() + b" ")
    _age(world.registry.root / "registry")
    assert _board(cli, world, "--workload", "m128", "--json") != "the state before\n"
    assert len(_kept(world)) == 2


def test_a_racy_registry_keeps_no_answer(cli: RunCli, world: World, settled: dict[str, StoredRecord]) -> None:
    b = settled
    world.run(b["m1"], b["fast"], b["protocol"], b["h200"], 900)
    world.add()  # its shard folder's time is now
    _board(cli, world)
    assert _kept(world) == []


def test_a_registry_too_large_to_walk_keeps_no_answer(
    cli: RunCli, world: World, settled: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(answers, "MAX_ENTRIES", 5)
    cold = _board(cli, world)
    assert _kept(world) == []
    assert _board(cli, world) == cold


def test_an_error_is_never_kept(cli: RunCli, world: World, settled: object) -> None:
    for _ in range(2):
        result = cli("leaderboard", "no_such_definition", "--registry", world.registry.root)
        assert result.exit_code == 3, result.output
    assert _kept(world) == []


def test_an_answer_past_its_time_is_computed_again(cli: RunCli, world: World, settled: object) -> None:
    cold = _board(cli, world)
    (kept,) = _kept(world)
    document = json.loads(kept.read_bytes())
    assert time.time_ns() < document["validUntilNs"] <= time.time_ns() + answers.MAX_AGE.total_seconds() * 1e9
    kept.write_text(json.dumps({**document, "stdout": "old\n", "validUntilNs": time.time_ns() - 1}))
    assert _board(cli, world) == cold


def test_an_answer_that_git_tracks_is_never_read(cli: RunCli, world: World, settled: object) -> None:
    """A commit (or the index) that brings ``.kictl/answers/<key>.json`` is someone's claim, not this machine's."""
    cold = _board(cli, world)
    (kept,) = _kept(world)
    document = json.loads(kept.read_bytes())
    kept.write_text(json.dumps({**document, "stdout": "fastest: mine\n"}))
    world.registry.git.repo.git.add("-f", kept.relative_to(world.registry.root).as_posix())
    assert _board(cli, world) == cold


@pytest.mark.parametrize(
    ("texts", "times", "commits", "expected"),
    [
        ([], [], [], timedelta(hours=1)),
        (['{"expires": "2026-06-01T00:30:00Z"}'], [], [], timedelta(minutes=30)),
        (['{"notAfter": "2025-01-01T00:00:00Z", "notBefore": "2026-06-01T00:10:00+00:00"}'], [], [],
         timedelta(minutes=10)),
        ([], ['{"observedAt": "2026-05-31T00:20:00Z"}'], [], timedelta(minutes=20)),
        ([], [], [datetime(2026, 6, 1, 0, 5, tzinfo=UTC)], timedelta(minutes=5)),
    ],
)  # fmt: skip
def test_an_answer_holds_until_the_first_time_a_judgement_could_flip(
    texts: list[str], times: list[str], commits: list[datetime], expected: timedelta
) -> None:
    made = datetime(2026, 6, 1, tzinfo=UTC)
    until = answers.valid_until(
        made, stale_after=timedelta(days=1), answer_times=times, trust_texts=texts, future_commits=commits
    )
    assert until == int((made + expected).timestamp() * 1e9)


def test_a_warm_leaderboard_imports_neither_pydantic_nor_the_trust_code(
    world: World, settled: dict[str, StoredRecord]
) -> None:
    root = str(world.registry.root)
    program = (
        "import sys\n"
        "from kictl.cli import main\n"
        f"sys.argv = ['kictl', 'leaderboard', {DEFINITION!r}, '--registry', {root!r}]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as stop:\n"
        "    assert not stop.code, stop.code\n"
        "names = ('pydantic', 'kictl.records', 'kictl.trust', 'kictl.rank')\n"
        "print(sorted(name for name in names if name in sys.modules))\n"
    )

    def run() -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", program], cwd=REPO_ROOT, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        return list(json.loads(done.stdout.strip().splitlines()[-1].replace("'", '"')))

    assert run() == ["kictl.rank", "kictl.records", "kictl.trust", "pydantic"]  # cold: computed and kept
    assert run() == []  # warm
