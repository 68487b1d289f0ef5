"""``kictl.store.git.held_still``: a reader that holds a repository still asks git each question once."""

from __future__ import annotations

from pathlib import Path

import git

from kictl.store.git import added_on_main_line, current_commit, held_still, merged_times


def _commit(repo: git.Repo, root: Path, name: str, when: int) -> str:
    (root / "registry").mkdir(exist_ok=True)
    (root / "registry" / name).write_text(name)
    repo.index.add([f"registry/{name}"])
    stamp = f"{when} +0000"
    return repo.index.commit(name, author_date=stamp, commit_date=stamp).hexsha


def test_answers_are_held_inside_the_block_and_asked_again_outside(tmp_path: Path) -> None:
    repo = git.Repo.init(tmp_path, initial_branch="main")
    first = _commit(repo, tmp_path, "a.json", 1_700_000_000)
    with held_still(tmp_path):
        assert current_commit(tmp_path) == first
        times = merged_times(tmp_path, "registry")
        assert times == {"registry/a.json": 1_700_000_000}
        assert set(added_on_main_line(tmp_path, "registry")) == {"registry/a.json"}
        times["registry/forged.json"] = 1  # a caller's edit of its copy never reaches the next caller
        second = _commit(repo, tmp_path, "b.json", 1_700_000_100)  # against the promise: the block does not see it
        with held_still(tmp_path):  # a nested block shares the outer one's answers
            assert current_commit(tmp_path) == first
        assert merged_times(tmp_path, "registry") == {"registry/a.json": 1_700_000_000}
        assert set(added_on_main_line(tmp_path, "registry")) == {"registry/a.json"}
    assert current_commit(tmp_path) == second  # outside any block, git is asked
    assert merged_times(tmp_path, "registry") == {"registry/a.json": 1_700_000_000, "registry/b.json": 1_700_000_100}
    assert set(added_on_main_line(tmp_path, "registry")) == {"registry/a.json", "registry/b.json"}


def test_a_held_block_is_per_repository(tmp_path: Path) -> None:
    one, other = tmp_path / "one", tmp_path / "other"
    repos = {root: git.Repo.init(root, initial_branch="main") for root in (one, other)}
    _commit(repos[one], one, "a.json", 1_700_000_000)
    with held_still(one):
        assert current_commit(other) is None  # no commit yet, and not held
        made = _commit(repos[other], other, "b.json", 1_700_000_000)
        assert current_commit(other) == made


def test_the_location_and_the_tracked_derived_files_are_held_too(tmp_path: Path) -> None:
    from kictl.store.derived import tracked_derived_files
    from kictl.store.git import public_location

    repo = git.Repo.init(tmp_path, initial_branch="main")
    _commit(repo, tmp_path, "a.json", 1_700_000_000)
    (tmp_path / ".kictl").mkdir()
    (tmp_path / ".kictl" / "index.sqlite").write_text("claimed")
    with held_still(tmp_path):
        assert public_location(tmp_path) == str(tmp_path.resolve())
        assert tracked_derived_files(tmp_path) == set()
        repo.create_remote("origin", "https://user:token@example.org/registry.git")  # against the promise
        repo.index.add([".kictl/index.sqlite"])
        assert public_location(tmp_path) == str(tmp_path.resolve())
        held = tracked_derived_files(tmp_path)
        assert held == set()
        held.add(".kictl/forged")  # a caller's edit of its copy never reaches the next caller
        assert tracked_derived_files(tmp_path) == set()
    assert public_location(tmp_path) == "https://example.org/registry.git"  # outside any block, git is asked
    assert tracked_derived_files(tmp_path) == {".kictl/index.sqlite"}
