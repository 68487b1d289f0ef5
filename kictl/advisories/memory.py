"""What an advisory was, wherever a copy of the registry dropped it: git history and this machine's memory.

A fork or a mirror can delete an advisory's version files.  Without a memory, the runs it marked read
clean in that copy, and deleting a withdrawal brings the advisory back.  An advisory's **state is the
highest version seen** (a withdrawal is a version like any other), and two things see versions that a
copy no longer holds (docs/advisories.md, "Deleted advisories"):

* **git history.**  The registry is append-only, so every version file ever added on the main line
  (``git log --first-parent``, as signing times are read) must still be in the tree with the bytes it
  was added with.  One that is gone, or whose bytes changed, is read from the commit that added it and
  verified like any other version (at that commit's time).  This is what a fresh clone of a fork sees.
* **this machine's memory.**  ``.kictl/advisories.json`` (git-ignored, like the trust root's
  ``.kictl/trust.json``) keeps, per advisory id, the highest committed version that verified here,
  its envelope and the commit that added it.  A copy whose history was rewritten cannot hide from a
  machine that read it before: a remembered commit that no branch or tag holds any more is history
  rewritten; one that another branch holds is a branch switch (a maintainer back on ``main`` after
  reading a PR branch), and one that HEAD holds is the history check's.  A memory file that git
  tracks came with the checkout and is ignored (``kictl.store.derived``).

Readers apply the highest version from the tree, the history and the memory alike, so a run stays
marked and a withdrawal stays withdrawn, and each missing version is one loud warning on stderr
(``warning: ADVISORY DELETED: ...``), gathered here for the command line to print; ``kictl verify``
fails (exit 1) while one is missing.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kictl.advisories.document import parse_advisory_path
from kictl.errors import RegistryError
from kictl.layout import ADVISORIES_DIR, KICTL_DIR
from kictl.records import format_timestamp
from kictl.store.derived import derived_file_trusted
from kictl.store.files import write_atomic
from kictl.store.git import ever_touched, read_blobs

#: This machine's memory of the advisories of the registry it sits in (git-ignored, under ``.kictl/``).
MEMORY_FILE = f"{KICTL_DIR}/advisories.json"


@dataclass(frozen=True, slots=True)
class Seen:
    """A version file that the tree does not hold as it was published: where it was seen, and its bytes."""

    path: str
    data: bytes
    signed_at: datetime
    #: ``deleted`` (not in the tree), ``changed`` (other bytes in the tree) or ``remembered`` (only this
    #: machine's memory has it)
    how: str
    commit: str | None = None  # the main-line commit that added it (history), else None


def traces(root: Path) -> bool:
    """Whether the registry at ``root`` has, had or is remembered to have had advisory files (cheap, never raises).

    A folder with entries, this machine's memory file, or a main-line commit that added a file under
    ``registry/advisories/``: only then do readers verify anything.
    """
    folder = root / ADVISORIES_DIR
    try:
        if folder.is_dir() and any(folder.iterdir()):
            return True
    except OSError:
        return True  # let the reader say what is wrong
    if (root / MEMORY_FILE).is_file():
        return True

    try:
        return ever_touched(root, ADVISORIES_DIR)
    except RegistryError:
        return True  # let the reader report the git failure


def from_history(
    root: Path, present: dict[str, bytes | None], added: dict[str, tuple[str, int]], *, now: datetime
) -> list[Seen]:
    """Version files added on the main line whose bytes the tree no longer holds (module docstring).

    ``present`` maps each file under ``registry/advisories/`` to its bytes (``None``: not a readable
    regular file); ``added`` is ``kictl.store.git.added_on_main_line`` of ``registry/advisories/``.  One
    ``git cat-file --batch``.  Raises ``RegistryError`` when git fails.
    """

    wanted = [(sha, path) for path, (sha, _) in sorted(added.items()) if parse_advisory_path(path) is not None]
    found: list[Seen] = []
    for (sha, path), data in read_blobs(root, wanted).items():
        if data is None or present.get(path) == data:
            continue  # as published (whether it verifies is verification's question)
        signed_at = min(datetime.fromtimestamp(added[path][1], UTC), now)
        found.append(Seen(path, data, signed_at, "changed" if path in present else "deleted", sha))
    return found


def _trusted(root: Path) -> bool:
    try:
        return derived_file_trusted(root, MEMORY_FILE)
    except RegistryError:
        return False


def recall(root: Path, main_line: set[str]) -> list[Seen]:
    """The versions this machine remembers for the registry at ``root`` that git history no longer shows.

    ``main_line``: the commits of ``added_on_main_line`` (what the history check already covers).  A
    remembered commit another ref still holds is left out (a branch switch, not a rewrite).  None when git
    tracks the memory file.  Never raises: a damaged memory file remembers nothing (the next write
    replaces it), and a git failure keeps the entry.
    """
    path = root / MEMORY_FILE
    if not path.is_file() or not _trusted(root):
        return []
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return []
    entries = value.get("advisories") if isinstance(value, dict) else None
    if not isinstance(entries, dict):
        return []
    found = []
    for entry in entries.values():
        if not isinstance(entry, dict):
            continue
        try:
            data = base64.b64decode(str(entry["envelope"]), validate=True)
            signed_at = datetime.fromisoformat(str(entry["signedAt"]).replace("Z", "+00:00")).astimezone(UTC)
            commit = entry.get("commit")
            seen = Seen(str(entry["path"]), data, signed_at, "remembered", commit if isinstance(commit, str) else None)
        except (KeyError, ValueError, TypeError):
            continue
        if seen.commit is not None and (seen.commit in main_line or _held_elsewhere(root, seen.commit)):
            continue
        found.append(seen)
    return found


def _held_elsewhere(root: Path, commit: str) -> bool:
    """Whether a branch, tag or remote-tracking ref of the repository at ``root`` holds ``commit``."""

    try:
        done = subprocess.run(
            ["git", "-C", str(root), "for-each-ref", "--format=%(refname)", "--contains", commit],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return False
    return done.returncode == 0 and bool(done.stdout.strip())


def remember(root: Path, versions: Iterable[tuple[str, int, str, bytes, datetime, str | None]]) -> None:
    """Keep ``(id, version, path, envelope bytes, signing time, commit)`` as the highest seen of each id, where
    higher.  ``commit``: the main-line commit that added it (``None`` in a registry that is no git repository;
    an uncommitted version in a git repository is not passed: it is not published yet).

    Best effort: a read-only checkout (a CI cache, a mounted registry) is read all the same, with nothing
    remembered.  A memory file that git tracks is left alone.
    """

    path = root / MEMORY_FILE
    if path.exists() and not _trusted(root):
        return
    try:
        value: Any = json.loads(path.read_bytes()) if path.is_file() else {}
    except (OSError, ValueError):
        value = {}
    entries = value.get("advisories") if isinstance(value, dict) else None
    entries = dict(entries) if isinstance(entries, dict) else {}
    changed = False
    for advisory_id, version, where, data, signed_at, commit in versions:
        held = entries.get(advisory_id)
        held_version = held.get("version") if isinstance(held, dict) else None
        if isinstance(held_version, int) and held_version >= version:
            continue
        entries[advisory_id] = {
            "version": version,
            "path": where,
            "signedAt": format_timestamp(signed_at),
            "envelope": base64.b64encode(data).decode("ascii"),
            **({"commit": commit} if commit is not None else {}),
        }
        changed = True
    if not changed:
        return
    document = {"advisories": dict(sorted(entries.items()))}
    try:
        (root / KICTL_DIR).mkdir(exist_ok=True)
        write_atomic(path, (json.dumps(document, indent=2, sort_keys=True) + "\n").encode())
    except (OSError, RegistryError):
        pass


# --------------------------------------------------------------------------- warnings for the command line

_WARNINGS: dict[str, None] = {}


def warn(line: str) -> None:
    """Queue one warning line for the command line (each once per process)."""
    _WARNINGS.setdefault(line, None)


def take_warnings() -> list[str]:
    """The queued warnings, oldest first; the queue is emptied (``kictl.cli._common.guarded`` prints them)."""
    lines = list(_WARNINGS)
    _WARNINGS.clear()
    return lines
