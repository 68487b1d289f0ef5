"""The harness commit a run records, from git or from a source manifest (a device's copy without current history)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import git
import pytest

import kictl
from kictl.bench.judge.results import SOURCE_MANIFEST_ENV, _source_commit, manifest_commit


def _package(tmp_path: Path) -> tuple[Path, str, str]:
    """A real git repository holding a small ``kictl`` package; its commit and its ls-tree manifest text."""
    repo = git.Repo.init(tmp_path / "repo")
    package = tmp_path / "repo" / "kictl"
    (package / "bench").mkdir(parents=True)
    (package / "__init__.py").write_text("__version__ = '0'\n")
    (package / "bench" / "timer.py").write_text("def now():\n    return 0\n")
    (package / "bench" / "blob.bin").write_bytes(bytes(range(256)))
    repo.index.add(["kictl/__init__.py", "kictl/bench/timer.py", "kictl/bench/blob.bin"])
    commit = repo.index.commit("package").hexsha
    tree = repo.git.ls_tree("-r", "HEAD", "--", "kictl")
    return package, commit, f"{commit}\n{tree}\n"


def test_a_copy_equal_to_the_commit_names_it(tmp_path: Path) -> None:
    package, commit, text = _package(tmp_path)
    (tmp_path / "kictl.tree").write_text(text)
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.cpython-312.pyc").write_bytes(b"\0")
    (package / "bench" / "timer.cpython-312.pyc").write_bytes(b"\0")
    assert manifest_commit(tmp_path / "kictl.tree", package) == commit


@pytest.mark.parametrize("change", ["edit", "add", "remove", "mode-only-bytes"])
def test_a_copy_that_differs_is_dirty(tmp_path: Path, change: str) -> None:
    package, commit, text = _package(tmp_path)
    (tmp_path / "kictl.tree").write_text(text)
    if change == "edit":
        (package / "bench" / "timer.py").write_text("def now():\n    return 1\n")
    elif change == "add":
        (package / "bench" / "patched.py").write_text("")
    elif change == "remove":
        (package / "bench" / "timer.py").unlink()
    else:
        (package / "bench" / "blob.bin").write_bytes(bytes(range(255, -1, -1)))
    assert manifest_commit(tmp_path / "kictl.tree", package) == commit + "+dirty"


@pytest.mark.parametrize(
    "text", ["", "not-a-commit\n", "0" * 40 + "\nno tab here\n", "0" * 39 + "\n", "\udcff"], ids=repr
)
def test_an_unreadable_manifest_claims_no_commit(tmp_path: Path, text: str) -> None:
    package, _commit, _text = _package(tmp_path)
    (tmp_path / "kictl.tree").write_bytes(text.encode("utf-8", "surrogateescape"))
    assert manifest_commit(tmp_path / "kictl.tree", package) is None
    assert manifest_commit(tmp_path / "absent.tree", package) is None


def test_a_file_that_cannot_be_read_claims_no_commit(tmp_path: Path) -> None:
    package, _commit, text = _package(tmp_path)
    (tmp_path / "kictl.tree").write_text(text)
    (package / "loop.py").symlink_to(package / "loop.py")  # a link to itself: reading it fails
    assert manifest_commit(tmp_path / "kictl.tree", package) is None


def test_the_manifest_of_this_checkout_agrees_with_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What benchmarks/carry.sh writes, read back beside this checkout, says what git itself says."""
    root = Path(kictl.__file__).resolve().parent.parent
    if not (root / ".git").exists():
        pytest.skip("kictl does not run from a git checkout here")
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    tree = subprocess.run(
        ["git", "-C", str(root), "ls-tree", "-r", "HEAD", "--", "kictl"], capture_output=True, text=True
    )
    (tmp_path / "kictl.tree").write_text(head + tree.stdout)
    monkeypatch.delenv(SOURCE_MANIFEST_ENV, raising=False)
    by_git = _source_commit()
    monkeypatch.setenv(SOURCE_MANIFEST_ENV, str(tmp_path / "kictl.tree"))
    assert _source_commit() == by_git
    assert by_git is not None
    assert by_git.startswith(head.strip())
