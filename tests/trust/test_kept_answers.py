"""A kept answer never outlives a retraction that reached the registry through a link (issue 41).

A registry whose ``registry/attestations`` is a link to a shared folder (a mirror's layout, or an attacker's)
gets a retraction in that folder: the link's own time does not change, so a key made of the tree's times kept
printing the board from before the retraction, with the retracted run ranked, for up to an hour.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from kictl.cli import answers
from tests.conftest import RunCli
from tests.trust.conftest import Setup, at, commit_all, sign


def _board(cli: RunCli, root: Path) -> list[str]:
    result = cli("leaderboard", "scale_h8", "--workload", "n64", "--registry", root, "--json")
    assert result.exit_code == 0, result.output
    groups: list[dict[str, Any]] = json.loads(result.stdout)
    return [row["run"] for group in groups for row in group["rows"]]


def _age(*tops: Path) -> None:
    """Times under ``tops`` (links included, not followed) that changed in the last three seconds moved three
    seconds back, past the racy window, as if the test had waited; what did not change keeps its time."""
    then = time.time() - 3
    for top in tops:
        for folder, names, files in os.walk(top):
            for path in (Path(folder), *(Path(folder, name) for name in (*names, *files))):
                if path.lstat().st_mtime > then:
                    os.utime(path, (then, then), follow_symlinks=False)


def test_a_retraction_in_a_linked_attestations_folder_ends_the_kept_answer(
    cli: RunCli, setup: Setup, tmp_path: Path
) -> None:
    root = setup.registry.root
    sign(setup, setup.submitter)
    commit_all(setup.registry, at("2025-07-01"), "submitted")
    attestations = root / "registry" / "attestations"
    shared = tmp_path / "shared-attestations"
    attestations.rename(shared)
    attestations.symlink_to(shared, target_is_directory=True)
    _age(root / "registry", root / ".kictl", shared, Path(os.environ["KICTL_CONFIG_HOME"]))
    assert _board(cli, root) == [setup.run.digest]
    assert _board(cli, root) == [setup.run.digest]
    assert len(list((root / answers.ANSWERS_DIR).glob("*.json"))) == 1  # the board is kept
    sign(setup, setup.submitter, "retraction", {"reason": "measured the wrong build"})  # lands in the shared folder
    assert any(path.name.endswith(".json") for path in shared.rglob("*") if path.is_file() and path.stat().st_size)
    _age(root / "registry", root / ".kictl", shared, Path(os.environ["KICTL_CONFIG_HOME"]))
    assert _board(cli, root) == []  # retracted: the kept answer of the state before is not printed
