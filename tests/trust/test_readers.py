"""One rule, one place, for every reader (``kictl.trust.readers``): attacks on what readers believe.

A committed index, an unsigned policy edit and an outsider's retraction change nothing ``verify``,
``show``, ``cite`` or ``leaderboard`` shows; a read-only registry is read by all of them; a corrupt git
store is one clear line and exit 4.  Real keys, real DSSE, real git.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kictl import canon, trust
from kictl.cli.answers import ANSWERS_DIR
from kictl.store.registry import Registry
from kictl.trust.readers import policy_standing, reader_policy, register_run_marks, run_marks
from tests.conftest import RunCli
from tests.trust.conftest import Setup, at, commit_all, rerun_predicate, sign

READERS = ("verify", "show", "cite")


def _verify(cli: RunCli, setup: Setup) -> dict[str, Any]:
    result = cli("verify", setup.run.digest, "--registry", setup.registry.root, "--json")
    assert result.exit_code in (0, 1), result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def _board(cli: RunCli, root: Path) -> list[dict[str, Any]]:
    result = cli("leaderboard", "scale_h8", "--workload", "n64", "--registry", root, "--json")
    assert result.exit_code == 0, result.output
    return [row for group in json.loads(result.stdout) for row in group["rows"]]


def _set_policy(registry: Registry, **members: Any) -> None:
    policy = json.loads(registry.policy_path.read_text())
    policy.update(members)
    registry.policy_path.write_bytes(canon.pretty_bytes(policy))


def _verified_at_8_percent(setup: Setup) -> None:
    """A submission and a verifier's rerun 8% slower: verified under rerunTolerance 0.10."""
    sign(setup, setup.submitter)
    sign(setup, setup.verifier, "rerun", rerun_predicate(1.08))
    commit_all(setup.registry, at("2025-07-01"), "signed")


def test_an_unsigned_policy_edit_changes_nothing_a_reader_shows(cli: RunCli, setup: Setup) -> None:
    registry = setup.registry
    maintainer = setup.maintainer.load()
    _set_policy(registry, rerunTolerance=0.1)
    trust.sign_policy(registry, keys=[maintainer])
    _verified_at_8_percent(setup)
    assert _verify(cli, setup)["level"] == "verified"
    # an unsigned tolerance edit, committed: readers keep the signed policy (from git history)
    _set_policy(registry, rerunTolerance=0.05)
    commit_all(registry, at("2025-08-01"), "tighter, unsigned")
    standing = policy_standing(registry)
    assert standing.source == "history"
    assert standing.note is not None
    assert "not the policy the trust root signs" in standing.note
    assert reader_policy(registry).rerun_tolerance == 0.1
    assert _verify(cli, setup)["level"] == "verified"
    assert [row["evidence"] for row in _board(cli, registry.root)] == ["verified"]
    board = cli("leaderboard", "scale_h8", "--registry", registry.root)
    assert "not the policy the trust root signs" in board.stderr
    # once a maintainer signs it, it counts
    trust.sign_policy(registry, keys=[maintainer])
    commit_all(registry, at("2025-09-01"), "signed")
    assert policy_standing(registry).source == "file"
    assert _verify(cli, setup)["level"] == "disputed"


def test_a_policy_the_root_never_signed_is_not_read(setup: Setup) -> None:
    _set_policy(setup.registry, rerunTolerance=3.0, staleAfterDays=2)
    standing = policy_standing(setup.registry)
    assert (standing.source, standing.policy.rerun_tolerance, standing.policy.stale_after_days) == (
        "defaults",
        0.1,
        365,
    )
    assert standing.note is not None
    assert "not signed" in standing.note


def test_an_outsiders_retraction_changes_nothing(cli: RunCli, setup: Setup) -> None:
    sign(setup, setup.submitter)
    commit_all(setup.registry, at("2025-07-01"), "submitted")
    # another submitter countersigns a submission later, then retracts: not the record's own submitter
    sign(setup, setup.community)
    sign(setup, setup.community, "retraction", {"reason": "mine now"})
    commit_all(setup.registry, at("2025-07-02"), "an outsider")
    report = _verify(cli, setup)
    assert report["retracted"] is False
    assert any(
        "a retraction needs a maintainer or the record's submitter" in (a["failure"] or "")
        for a in report["attestations"]
    )
    shown = cli("show", setup.run.digest, "--registry", setup.registry.root)
    assert "retracted" not in shown.stdout.lower()
    assert [row["run"] for row in _board(cli, setup.registry.root)] == [setup.run.digest]
    # the record's own submitter may
    sign(setup, setup.submitter, "retraction", {"reason": "measured the wrong build"})
    commit_all(setup.registry, at("2025-07-03"), "retracted by its submitter")
    assert _verify(cli, setup)["retracted"] is True
    assert _board(cli, setup.registry.root) == []


def test_a_committed_index_is_ignored_in_a_fresh_clone(cli: RunCli, setup: Setup, tmp_path: Path) -> None:
    registry = setup.registry
    sign(setup, setup.submitter)
    commit_all(registry, at("2025-07-01"), "submitted")
    honest = _board(cli, registry.root)
    assert [row["latencyNs"] for row in honest] == [1_000_000]
    index = registry.kictl_dir / "index.sqlite"
    with sqlite3.connect(index) as conn:
        tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        run_table = next(name for name in tables if "run" in name.lower() and name != "problems")
        columns = [row[1] for row in conn.execute(f"PRAGMA table_info({run_table})")]
        latency = next(column for column in columns if "latency" in column.lower())
        conn.execute(f"UPDATE {run_table} SET {latency} = 1")
    # a kept answer is keyed on the registry, not on the index derived from it (docs/leaderboards.md, "Kept
    # answers"): the first board's answer, kept when that board came more than 2 s after the commit, would
    # hide the edited index
    shutil.rmtree(registry.root / ANSWERS_DIR, ignore_errors=True)
    assert [row["latencyNs"] for row in _board(cli, registry.root)] == [1]  # the local cache is believed...
    registry.git._run("add", "-f", ".kictl/index.sqlite")
    commit_all(registry, at("2025-07-02"), "a committed index")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(registry.root), str(clone)], check=True)
    assert (clone / ".kictl" / "index.sqlite").is_file()
    shutil.copytree(registry.kictl_dir, clone / ".kictl", dirs_exist_ok=True, ignore=shutil.ignore_patterns("index*"))
    result = cli("leaderboard", "scale_h8", "--workload", "n64", "--registry", clone, "--json")
    assert result.exit_code == 0, result.output
    rows = [row for group in json.loads(result.stdout) for row in group["rows"]]
    assert [row["latencyNs"] for row in rows] == [1_000_000]  # ...a committed one never is
    # and it is left as git has it: a reader never rewrites a tracked file
    assert (
        subprocess.run(["git", "-C", str(clone), "status", "--porcelain"], capture_output=True, text=True).stdout == ""
    )


#: one process runs every reader in turn (a process each would cost seconds): ``[[args...], ...]`` on argv
_READ_ALL = """
import json, sys
from typer.testing import CliRunner
from kictl.cli import make_app
app, codes = make_app(), []
for args in json.loads(sys.argv[1]):
    result = CliRunner().invoke(app, args)
    codes.append([result.exit_code, result.stdout[:200], result.stderr[-300:]])
print(json.dumps(codes))
"""


def _readers(commands: list[list[str]], root: Path) -> list[list[Any]]:
    """Every command, with ``--registry root``, in one process on a read-only registry (mounted so for root)."""
    argv = json.dumps([[*args, "--registry", str(root)] for args in commands])
    command = [sys.executable, "-c", _READ_ALL, argv]
    env = {**os.environ, "HOME": str(root.parent)}
    if os.geteuid() != 0:
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    else:
        script = f'mount --bind -o ro "{root}" "{root}" && exec "$@"'
        done = subprocess.run(
            ["unshare", "--mount", "sh", "-c", script, "sh", *command],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
    if done.returncode != 0 and os.geteuid() == 0 and "mount" in done.stderr:
        pytest.skip(f"no read-only mount here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    codes: list[list[Any]] = json.loads(done.stdout)
    return codes


def _make_read_only(root: Path) -> None:
    if os.geteuid() == 0:
        return  # a read-only bind mount in _kictl: permissions do not stop root
    for folder, _dirs, files in os.walk(root):
        for name in files:
            os.chmod(os.path.join(folder, name), 0o444)
        os.chmod(folder, 0o555)


def _restore(root: Path) -> None:
    for folder, _dirs, _files in os.walk(root):
        os.chmod(folder, 0o755)


def test_a_read_only_registry_works_for_every_reader(setup: Setup) -> None:
    if os.geteuid() == 0 and shutil.which("unshare") is None:
        pytest.skip("root without unshare cannot make a read-only registry")
    registry = setup.registry
    sign(setup, setup.submitter)
    commit_all(registry, at("2025-07-01"), "submitted")
    # a newer trust root than this machine has seen: verify would record the highest version in .kictl/
    trust.add_key(
        registry, trust.load_public_key(setup.stranger.public), owner="late", roles=["submitter"],
        keys=[setup.maintainer.load()], not_before=at("2025-01-01"),
    )  # fmt: skip
    commit_all(registry, at("2025-07-02"), "a new key")
    _make_read_only(registry.root)
    commands = [*([name, setup.run.digest] for name in READERS), ["leaderboard", "scale_h8"]]
    try:
        results = _readers(commands, registry.root)
    finally:
        _restore(registry.root)
    for command, (code, stdout, stderr) in zip(commands, results, strict=True):
        assert code == 0, (command, stderr)
        assert stdout, command


def test_a_corrupt_git_store_is_one_clear_line_and_exit_4(cli: RunCli, setup: Setup) -> None:
    registry = setup.registry
    head = registry.git.head()
    assert head is not None
    path = registry.root / ".git" / "objects" / head[:2] / head[2:]
    path.chmod(0o644)
    path.write_bytes(b"not a zlib stream")
    for args in ([*READERS[:2]], ["cite"]):
        for name in args:
            result = cli(name, setup.run.digest, "--registry", registry.root)
            assert result.exit_code == 4, (name, result.output)
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1, result.stderr
            assert "is corrupt" in lines[0], result.stderr
    for args in (["leaderboard", "scale_h8"], ["review", "--base", "HEAD", "--head", "HEAD"]):
        result = cli(*args, "--registry", registry.root)
        assert result.exit_code == 4, (args, result.output)
        assert "is corrupt" in result.stderr


def test_a_corrupt_tree_deeper_in_the_store_is_exit_4_too(cli: RunCli, setup: Setup) -> None:
    registry = setup.registry
    tree = registry.git._run("rev-parse", "HEAD^{tree}").strip()
    path = registry.root / ".git" / "objects" / tree[:2] / tree[2:]
    path.chmod(0o644)
    path.write_bytes(b"not a zlib stream")
    (registry.kictl_dir).mkdir(exist_ok=True)
    result = cli("verify", setup.run.digest, "--registry", registry.root)
    assert result.exit_code == 4, result.output
    assert "corrupt" in result.stderr


def test_rules_registered_by_other_modules_mark_runs(setup: Setup) -> None:
    def affected(registry: Registry, digests: Any) -> dict[str, list[str]]:
        return {digest: ["advisory:test"] for digest in digests}

    register_run_marks(affected)
    try:
        assert run_marks(setup.registry, [setup.run.digest]) == {setup.run.digest: ["advisory:test"]}
    finally:
        from kictl.trust import readers

        readers._MARKS.remove(affected)


def test_a_committed_link_in_place_of_kictl_is_not_followed(setup: Setup) -> None:
    from kictl.store.derived import derived_file_trusted

    registry = setup.registry
    elsewhere = registry.root / "registry" / "cache"
    elsewhere.mkdir()
    (elsewhere / "index.sqlite").write_bytes(b"whatever the commit brought")
    local = registry.root / ".kictl"
    local.rename(registry.root / "kictl-local")
    local.symlink_to(elsewhere)
    assert not derived_file_trusted(registry.root, ".kictl/index.sqlite")
    local.unlink()
    (registry.root / "kictl-local").rename(local)
    assert derived_file_trusted(registry.root, ".kictl/index.sqlite")
