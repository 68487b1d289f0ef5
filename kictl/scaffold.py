"""Creating a new, empty registry (``kictl init``).

A registry is a git repository with ``registry/trust/root.json`` (a trust
root with no keys yet), ``registry/policy.json`` (the default policy) and a
``.gitignore`` that keeps derived data under ``.kictl/`` out of git.

A new registry is private until it says where its pages are published: its
policy's ``permalinkBase`` is empty unless given, so ``kictl cite`` gives the
digest and the registry's own location, never kernelindex.dev's pages.
"""

from __future__ import annotations

import re
from pathlib import Path

from kictl import canon, trust
from kictl.errors import RegistryError, UsageError
from kictl.layout import KICTL_DIR, POLICY_FILE, REGISTRY_DIR, ROOT_FILE
from kictl.policy import default_policy_document
from kictl.store.git import init_repository

GITIGNORE = f"{KICTL_DIR}/\n__pycache__/\n".encode()


def create_registry(target: Path, *, permalink_base: str = "") -> str:
    """Create a registry at ``target`` and return the sha of its first commit.

    ``permalink_base`` is the URL a record's digest is appended to for its
    permalink (``https://example.org/r/``); empty: none.  Raises
    ``UsageError`` for a base that is no http(s) URL, ``RegistryError`` when
    ``target`` already holds a registry or a git repository, or cannot be
    written.
    """
    if permalink_base and not re.fullmatch(r"https?://[^\s/]+/\S*", permalink_base):
        raise UsageError(f"--permalink-base {permalink_base!r}: give an http(s) URL such as https://example.org/r/")
    target = target.expanduser()
    if (target / REGISTRY_DIR).exists():
        raise RegistryError(f"{target} already holds a registry (it has a registry/ folder)")
    if (target / ".git").exists():
        raise RegistryError(f"{target} is already a git repository; kictl init makes a new one")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RegistryError(f"cannot create {target}: {exc.strerror}") from exc
    files = {
        ROOT_FILE: canon.pretty_bytes(trust.initial_root_document()),
        POLICY_FILE: canon.pretty_bytes({**default_policy_document(), "permalinkBase": permalink_base}),
        ".gitignore": GITIGNORE,
    }
    return init_repository(target, files, "Create an empty KernelIndex registry")
