"""A warm `kictl leaderboard` prints the answer kept for the registry's state (kictl.cli.answers, issues 30 and 44).

Each test ages the registry's files first (their times two seconds or more in the past): a time within two
seconds of now is "racy" and no answer is kept or read then, as the index does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kictl.cli import answers
from kictl.records import StoredRecord
from kictl.store.registry import Registry
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


def _age_links(*links: Path) -> None:
    """``_age`` for links themselves (``os.walk`` lists a link to a folder as a folder and never enters it)."""
    then = time.time() - 3
    for link in links:
        os.utime(link, (then, then), follow_symlinks=False)


def _kept(world: World) -> list[Path]:
    return sorted((world.registry.root / answers.ANSWERS_DIR).glob("*.json"))


def _rewrite(kept: Path, **changes: object) -> None:
    """Rewrite a kept answer with ``changes`` and seal it again with this machine's secret, as kictl would have
    kept it: what a test then sees is the key's and the clock's doing, not the seal's."""
    document = {**json.loads(kept.read_bytes()), **changes}
    answer = answers.Answer(document["stdout"], document["stderr"], document["validUntilNs"])
    sealed = answers.document(document["key"], answer)
    assert sealed is not None
    kept.write_text(json.dumps(sealed))


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
    _rewrite(kept, stdout="what the kept answer says\n")
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
    _rewrite(kept, stdout="the state before\n")
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


def test_an_answer_is_kept_only_for_the_registry_the_command_says_it_read(
    world: World, settled: object, empty_registry: Registry
) -> None:
    """The command table guesses the registry from the command line before the command parses it
    (``option_value``); a guess that is not the registry the command read keeps nothing, nor does a command
    that never says ``made``."""
    root = world.registry.root
    _age(root / "registry", empty_registry.root)
    line = ["leaderboard", DEFINITION, "--registry", str(root)]

    def elsewhere() -> None:
        print("a board of the other registry")
        answers.made(empty_registry.root, {}, stale_after=timedelta(days=30))

    answers.answered(root, line, elsewhere)
    answers.answered(root, line, lambda: print("a board that says nothing"))
    assert _kept(world) == []
    answers.answered(root, line, lambda: answers.made(root, {}, stale_after=timedelta(days=30)))
    assert len(_kept(world)) == 1


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["DEF"], None),
        (["DEF", "--registry", "a"], "a"),
        (["--registry=a", "DEF", "--registry", "b"], "b"),
        (["DEF", "--registry"], None),
        (["DEF", "--", "--registry", "a"], None),
    ],
)
def test_the_registry_is_read_from_the_command_line_as_click_reads_it(args: list[str], expected: str | None) -> None:
    assert answers.option_value(args, "--registry") == expected


def test_an_answer_past_its_time_is_computed_again(cli: RunCli, world: World, settled: object) -> None:
    cold = _board(cli, world)
    (kept,) = _kept(world)
    document = json.loads(kept.read_bytes())
    assert time.time_ns() < document["validUntilNs"] <= time.time_ns() + answers.MAX_AGE.total_seconds() * 1e9
    _rewrite(kept, stdout="old\n", validUntilNs=time.time_ns() - 1)
    assert _board(cli, world) == cold


def test_an_answer_that_git_tracks_is_never_read(cli: RunCli, world: World, settled: object) -> None:
    """A commit (or the index) that brings ``.kictl/answers/<key>.json`` is someone's claim, not this machine's."""
    cold = _board(cli, world)
    (kept,) = _kept(world)
    _rewrite(kept, stdout="fastest: mine\n")
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
        "names = ('pydantic', 'kictl.records', 'kictl.trust', 'kictl.rank', 'kictl.cli.rank')\n"
        "print(sorted(name for name in names if name in sys.modules))\n"
    )

    def run() -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", program], cwd=REPO_ROOT, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        return list(json.loads(done.stdout.strip().splitlines()[-1].replace("'", '"')))

    cold = ["kictl.cli.rank", "kictl.rank", "kictl.records", "kictl.trust", "pydantic"]
    assert run() == cold  # computed and kept
    assert run() == []  # warm: the command table printed the kept answer before importing the command (issue 44)


# --------------------------------------------------------------------------- issue 41: answers cannot be planted


def _planted(kept: Path, **changes: object) -> None:
    kept.write_text(json.dumps({**json.loads(kept.read_bytes()), **changes}))


@pytest.mark.parametrize(
    "seal",
    [None, "0" * 64, "not hex"],
    ids=["no seal", "a made-up seal", "garbage"],
)
def test_a_planted_answer_is_never_printed(cli: RunCli, world: World, settled: object, seal: str | None) -> None:
    """Whoever can write ``.kictl/answers`` writes a well-formed answer for the current key: it is not read."""
    cold = _board(cli, world)
    (kept,) = _kept(world)
    document = json.loads(kept.read_bytes())
    planted = {key: value for key, value in document.items() if key != "seal"}
    planted["stdout"] = "fastest: mine\n"
    if seal is not None:
        planted["seal"] = seal
    kept.write_text(json.dumps(planted))
    assert _board(cli, world) == cold


def test_a_tampered_answer_is_never_printed(cli: RunCli, world: World, settled: object) -> None:
    cold = _board(cli, world)
    (kept,) = _kept(world)
    for change in ({"stdout": "fastest: mine\n"}, {"stderr": "note\n"}, {"validUntilNs": time.time_ns() + 10**13}):
        _planted(kept, **change)  # the honest seal, another content
        assert _board(cli, world) == cold, change
        (kept,) = _kept(world)  # the honest answer, kept again


def test_an_answer_sealed_on_another_machine_is_never_printed(
    cli: RunCli, world: World, settled: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = _board(cli, world)
    (kept,) = _kept(world)
    mine = os.environ["KICTL_CACHE_HOME"]
    monkeypatch.setenv("KICTL_CACHE_HOME", str(tmp_path / "another-machine"))
    _rewrite(kept, stdout="fastest: mine\n")  # sealed under the other machine's secret
    monkeypatch.setenv("KICTL_CACHE_HOME", mine)
    assert _board(cli, world) == cold
    (kept,) = _kept(world)
    assert json.loads(kept.read_bytes())["stdout"] == cold  # this machine's answer replaced it


def test_without_a_private_secret_nothing_is_kept(cli: RunCli, world: World, settled: object) -> None:
    """A secret that others may read is no secret: nothing is sealed, so nothing is kept or believed."""
    from kictl.index import secret

    path = secret.secret_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("ab" * 32 + "\n")
    path.chmod(0o644)
    cold = _board(cli, world)
    assert _kept(world) == []
    assert _board(cli, world) == cold
    assert path.read_text() == "ab" * 32 + "\n"  # left as it was: the user's to fix


def test_a_linked_attestations_folder_is_keyed_on_what_it_points_to(
    world: World, settled: object, tmp_path: Path
) -> None:
    """A link's own time does not change when its target does: the key stamps the target's tree."""
    root = world.registry.root
    attestations = root / "registry" / "attestations"
    shared = tmp_path / "shared-attestations"
    attestations.mkdir(parents=True, exist_ok=True)
    attestations.rename(shared)
    attestations.symlink_to(shared, target_is_directory=True)
    _age(root / "registry", shared)
    _age_links(attestations)
    head = None  # any fixed HEAD: the key's other parts are the subject
    before = answers.state_key(root, head, ["leaderboard"])
    assert before is not None
    assert answers.state_key(root, head, ["leaderboard"]) == before
    (shared / "ab").mkdir()
    (shared / "ab" / "retraction.json").write_text("{}")
    _age(shared)
    after = answers.state_key(root, head, ["leaderboard"])
    assert after is not None
    assert after != before
    # the same link text to another folder is another state too
    other = tmp_path / "other"
    shutil.copytree(shared, other)
    shared.rename(tmp_path / "moved")
    other.rename(shared)
    _age(shared)
    assert answers.state_key(root, head, ["leaderboard"]) not in (before, after)


def test_a_linked_registry_folder_and_a_link_loop(world: World, settled: object, tmp_path: Path) -> None:
    root = world.registry.root
    real = tmp_path / "real-registry"
    (root / "registry").rename(real)
    (root / "registry").symlink_to(real, target_is_directory=True)
    (real / "loop").symlink_to(real, target_is_directory=True)  # walked once, not forever
    _age(real)
    _age_links(root / "registry", real / "loop")
    before = answers.state_key(root, None, ["leaderboard"])
    assert before is not None
    (real / "policy.json").write_bytes((real / "policy.json").read_bytes() + b" ")
    _age(real)
    assert answers.state_key(root, None, ["leaderboard"]) not in (None, before)


def test_keeping_an_answer_never_follows_or_reads_what_was_planted_beside_it(
    cli: RunCli, world: World, settled: object, tmp_path: Path
) -> None:
    """Keeping prunes the folder: a link is not followed, a FIFO is not read (it would block), a file that is no
    sealed answer is removed."""
    victim = tmp_path / "victim.json"
    victim.write_text('{"validUntilNs": 0}')
    folder = world.registry.root / answers.ANSWERS_DIR
    folder.mkdir(parents=True)
    (folder / "link.json").symlink_to(victim)
    os.mkfifo(folder / "fifo.json")
    (folder / "planted.json").write_text(json.dumps({"format": answers.FORMAT, "validUntilNs": 2**62}))
    _age(world.registry.root / ".kictl")
    cold = _board(cli, world)  # would block on the FIFO if it were read
    assert victim.read_text() == '{"validUntilNs": 0}'
    assert (folder / "fifo.json").exists()
    assert (folder / "link.json").is_symlink()
    assert not (folder / "planted.json").exists()
    assert len(_kept(world)) == 3  # the FIFO, the link and the answer kept now
    assert _board(cli, world) == cold
