"""``copy_bundled`` (tests/conftest.py) copies a template built once per process: each copy stands alone."""

from __future__ import annotations

import os
from pathlib import Path

import git
import pytest

from tests.conftest import _bundled_template, copy_bundled


def test_copies_share_nothing_with_each_other_or_the_template(tmp_path: Path) -> None:
    first = copy_bundled(tmp_path / "first")
    second = copy_bundled(tmp_path / "second")
    template = _bundled_template(results=False, catalogue=False, advisories=True)
    policy = Path("registry") / "policy.json"
    original = (template.root / policy).read_bytes()
    (first.root / policy).write_bytes(original + b"\n")
    repo = git.Repo(first.root)
    repo.git.add("-A")
    repo.index.commit("changed in the first copy only")
    assert (second.root / policy).read_bytes() == original
    assert (template.root / policy).read_bytes() == original
    assert git.Repo(second.root).head.commit.hexsha != repo.head.commit.hexsha
    assert not git.Repo(second.root).is_dirty(untracked_files=True)
    assert (first.root / ".git").stat().st_ino != (second.root / ".git").stat().st_ino


def test_a_changed_template_fails_the_next_copy(tmp_path: Path) -> None:
    copy_bundled(tmp_path / "first")
    template = _bundled_template(results=False, catalogue=False, advisories=True)
    folder = template.root / "registry"
    before = folder.stat()
    planted = folder / "planted.json"
    planted.write_bytes(b"{}")
    try:
        with pytest.raises(AssertionError, match="was changed after it was built"):
            copy_bundled(tmp_path / "second")
    finally:
        planted.unlink()
        os.utime(folder, ns=(before.st_atime_ns, before.st_mtime_ns))
    copy_bundled(tmp_path / "third")  # as built again
    assert not (tmp_path / "third" / "registry" / "planted.json").exists()
