"""Derived files under ``.kictl/`` that git tracks: never believed (DESIGN §4, docs/trust.md "What readers count").

Derived data (the query index, the anchor state, kept answers) is rebuilt by each machine and never
committed. A file there that git tracks came with the checkout, from whoever wrote the commit, so every
reader ignores it and rebuilds (``kictl.index``) or refuses to pin from it (``kictl.trust.anchor``).

A question about the store's files and git, so it sits in ``kictl.store`` (below the trust root and the
index, which both ask it), and it is cheap: two plain ``git`` calls and no gitpython, so that a warm
``kictl leaderboard`` stays cheap.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from kictl.errors import RegistryError
from kictl.layout import KICTL_DIR
from kictl.store.git import _held, current_commit

#: ``head`` not given: ask git for HEAD.
_ASK = "ask"


def _git(root: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise RegistryError(f"cannot run git in {root}: {exc}") from exc
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["git failed"])[-1]
        raise RegistryError(f"{root}: git {args[0]} failed: {last}")
    return done.stdout


def tracked_derived_files(root: Path, head: str | None = _ASK) -> set[str]:
    """Paths under ``.kictl/`` that git tracks (in HEAD or staged), relative to the registry root ``root``.

    ``head`` is HEAD's sha (``None``: no commit yet) when the caller knows it already. Raises
    ``RegistryError`` (exit 4) when git cannot say: a corrupt store is reported, never read as "nothing
    tracked".
    """
    if not (root / KICTL_DIR).exists() and not (root / KICTL_DIR).is_symlink():
        return set()
    if not (root / ".git").exists():
        return set()
    if head == _ASK:
        head = current_commit(root)  # raises RegistryError for a HEAD git cannot read
    # asked once while ``root`` is held still (``kictl.store.git.held_still``: a site build asks for each run)
    return set(_held(root, ("tracked-derived", head or ""), lambda: _tracked(root, head)))


def _tracked(root: Path, head: str | None) -> frozenset[str]:
    staged = _git(root, "ls-files", "-z", "--", KICTL_DIR)
    committed = _git(root, "ls-tree", "-r", "-z", "--name-only", head, "--", KICTL_DIR) if head else ""
    return frozenset(path for path in (staged + "\0" + committed).split("\0") if path)


def derived_file_trusted(root: Path, path: str, head: str | None = _ASK) -> bool:
    """Whether the derived file ``path`` (relative, under ``.kictl/``) of the registry at ``root`` may be read:
    git tracks neither it nor ``.kictl`` itself, and neither is a symbolic link (a committed link could point
    ``.kictl/`` at files the commit brought under another name).

    Raises ``RegistryError`` when git cannot say (a corrupt store).
    """
    folder = root / KICTL_DIR
    if folder.is_symlink() or (root / path).is_symlink():
        return False
    tracked = tracked_derived_files(root, head)
    return (
        path not in tracked
        and KICTL_DIR not in tracked
        and not any(path.startswith(f"{tracked_path}/") for tracked_path in tracked)
    )
