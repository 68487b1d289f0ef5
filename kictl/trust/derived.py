"""Derived files under ``.kictl/`` that git tracks: never believed (DESIGN §4, docs/trust.md "What readers count").

Derived data (the query index, the anchor state) is rebuilt by each machine and never committed. A
file there that git tracks came with the checkout, from whoever wrote the commit, so every reader
ignores it and rebuilds (``kictl.index``) or refuses to pin from it (``kictl.trust.anchor``).

Kept apart from ``kictl.trust.readers`` so that the anchor code can ask without importing the trust
root (no import cycle), and without gitpython: two plain ``git`` calls, so that a warm ``kictl
leaderboard`` stays cheap.
"""

from __future__ import annotations

import subprocess

from kictl.errors import RegistryError
from kictl.layout import KICTL_DIR
from kictl.store import Registry, current_commit


def _git(registry: Registry, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(registry.root), *args], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise RegistryError(f"cannot run git in {registry.root}: {exc}") from exc
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["git failed"])[-1]
        raise RegistryError(f"{registry.root}: git {args[0]} failed: {last}")
    return done.stdout


def tracked_derived_files(registry: Registry) -> set[str]:
    """Paths under ``.kictl/`` that git tracks (in HEAD or staged), relative to the registry root.

    Raises ``RegistryError`` (exit 4) when git cannot say: a corrupt store is
    reported, never read as "nothing tracked".
    """
    if not (registry.root / KICTL_DIR).exists() and not (registry.root / KICTL_DIR).is_symlink():
        return set()
    if not registry.is_git_repository():
        return set()
    staged = _git(registry, "ls-files", "-z", "--", KICTL_DIR)
    head = current_commit(registry.root)  # raises RegistryError for a HEAD git cannot read
    committed = _git(registry, "ls-tree", "-r", "-z", "--name-only", head, "--", KICTL_DIR) if head else ""
    return {path for path in (staged + "\0" + committed).split("\0") if path}


def derived_file_trusted(registry: Registry, path: str) -> bool:
    """Whether the derived file ``path`` (relative, under ``.kictl/``) may be read: git tracks neither it nor
    ``.kictl`` itself, and neither is a symbolic link (a committed link could point ``.kictl/`` at files the
    commit brought under another name).

    Raises ``RegistryError`` when git cannot say (a corrupt store).
    """
    folder = registry.root / KICTL_DIR
    if folder.is_symlink() or (registry.root / path).is_symlink():
        return False
    tracked = tracked_derived_files(registry)
    return path not in tracked and KICTL_DIR not in tracked
