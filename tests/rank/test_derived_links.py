"""Derived data (the query index, kept answers) is never written or read through a link (issue 41).

A checkout can bring ``.kictl`` (or ``.kictl/answers``) as a link to a folder outside the registry; a reader then
wrote its index or its answers there, and read back whatever that folder held.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from kictl.index.query import QueryIndex
from kictl.records import StoredRecord
from kictl.store.registry import Registry
from tests.conftest import RunCli
from tests.rank.conftest import World


def _settle(world: World, basic: dict[str, StoredRecord]) -> Registry:
    b = basic
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000)
    world.commit("a run")
    then = time.time() - 3  # past the racy window: answers would be kept
    for folder, names, files in os.walk(world.registry.root):
        for name in (*names, *files):
            os.utime(Path(folder, name), (then, then), follow_symlinks=False)
    return world.registry


def _board(cli: RunCli, root: Path) -> str:
    result = cli("leaderboard", "gemm_n64_k64", "--registry", root)
    assert result.exit_code == 0, result.output
    return str(result.stdout)


def test_a_linked_kictl_folder_is_never_written_or_read(
    cli: RunCli, world: World, basic: dict[str, StoredRecord], tmp_path: Path
) -> None:
    registry = _settle(world, basic)
    outside = tmp_path / "outside"
    outside.mkdir()
    local = registry.root / ".kictl"
    if local.exists():
        local.rename(tmp_path / "kictl-before")
    local.symlink_to(outside, target_is_directory=True)
    first = _board(cli, registry.root)
    assert _board(cli, registry.root) == first
    assert list(outside.iterdir()) == []
    with QueryIndex.open(registry) as index:
        assert index.report.mode == "memory"
        assert any("through a link" in reason for reason in index.report.reasons)
    assert list(outside.iterdir()) == []


def test_a_linked_answers_folder_is_never_written(
    cli: RunCli, world: World, basic: dict[str, StoredRecord], tmp_path: Path
) -> None:
    registry = _settle(world, basic)
    outside = tmp_path / "outside"
    outside.mkdir()
    registry.kictl_dir.mkdir(exist_ok=True)
    (registry.kictl_dir / "answers").symlink_to(outside, target_is_directory=True)
    first = _board(cli, registry.root)
    assert _board(cli, registry.root) == first
    assert list(outside.iterdir()) == []
