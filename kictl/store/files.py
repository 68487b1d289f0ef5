"""Finding the registry root, and atomic, idempotent, all-or-nothing writes (a temporary file, then a
rename).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from kictl.errors import KictlError, RegistryError
from kictl.layout import (
    REGISTRY_DIR,
)

if TYPE_CHECKING:
    pass
from kictl.store._common import ENV_VAR

# --------------------------------------------------------------------------- locating


#: Where the user's config lives: ``$KICTL_CONFIG_HOME``, else ``$XDG_CONFIG_HOME/kictl``, else ``~/.config/kictl``.
CONFIG_ENV = "KICTL_CONFIG_HOME"


def config_dir() -> Path:
    """The user's kictl config folder (the trust pins of ``kictl.trust.anchor``, the self-test's result)."""
    return user_dir(CONFIG_ENV, "XDG_CONFIG_HOME", ".config")


def user_dir(own: str, xdg: str, fallback: str) -> Path:
    """``$<own>``, else ``$<xdg>/kictl``, else ``~/<fallback>/kictl``: where kictl keeps a user's files."""
    home = os.environ.get(own)
    if home:
        return Path(home)
    base = os.environ.get(xdg)
    return (Path(base) if base else Path.home() / fallback) / "kictl"


def find_root(explicit: Path | None = None, *, cwd: Path | None = None) -> Path:
    """The registry root: ``explicit``, else ``$KICTL_REGISTRY``, else the nearest
    folder upwards from ``cwd`` that has a ``registry/`` folder.

    Raises ``RegistryError`` when none is found or the one named has no ``registry/``.
    """
    if explicit is not None:
        return _checked_root(explicit, "--registry")
    from_env = os.environ.get(ENV_VAR)
    if from_env:
        return _checked_root(Path(from_env), f"${ENV_VAR}")
    start = (cwd or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / REGISTRY_DIR).is_dir():
            return folder
    raise RegistryError(
        f"no registry found from {start} upwards (no registry/ folder); "
        f"pass --registry DIR, set ${ENV_VAR}, or create one with `kictl init DIR`"
    )


def _checked_root(path: Path, origin: str) -> Path:
    root = path.expanduser().resolve()
    if not (root / REGISTRY_DIR).is_dir():
        raise RegistryError(f"{origin} {path} is not a registry (it has no registry/ folder)")
    return root


def read_file(
    path: Path,
    label: str | None = None,
    *,
    missing: type[KictlError] = RegistryError,
    missing_text: str | None = None,
    error: type[KictlError] = RegistryError,
) -> bytes:
    """The bytes of ``path``, or one error that says where (``label``, else the path).

    A missing file raises ``missing`` (``<label>: no such file``, or
    ``missing_text``); a folder or an unreadable file raises ``error``.
    """
    where = label or str(path)
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        if missing_text is not None:
            raise missing(missing_text) from exc
        raise missing("no such file", path=where) from exc
    except IsADirectoryError as exc:
        raise error("is a folder, not a file", path=where) from exc
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror}", path=where) from exc


# --------------------------------------------------------------------------- atomic files


def write_atomic(path: Path, data: bytes, *, mode: int = 0o644) -> bool:
    """Write ``data`` to ``path`` through a temporary file and a rename.

    Returns ``True`` when the file was created or replaced, ``False`` when it
    already held exactly these bytes.  Raises ``RegistryError`` on I/O errors.
    """
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        tmp_name = _temporary_beside(path, data, mode)
        try:
            os.replace(tmp_name, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
            raise
    except OSError as exc:
        raise RegistryError(f"{path}: cannot write: {exc.strerror or exc}{write_hint(exc)}") from exc
    return True


def _temporary_beside(path: Path, data: bytes, mode: int) -> str:
    """A temporary file in ``path``'s folder (``.<name>.<random>.tmp``, ``is_temporary_name``) holding ``data``,
    flushed to disk with ``mode``: what a writer renames or links into place.  Raises ``OSError``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    return tmp_name


def write_hint(exc: OSError) -> str:
    """What to do about a write that failed: a read-only mount, missing permissions, a full disk."""
    if exc.errno == errno.EROFS:
        return " (the registry is mounted read-only: write in a writable checkout, or give --out where there is one)"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return " (no permission: check the folder's owner and mode)"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return " (the disk is full: free space and run it again; nothing was half-written)"
    return ""


def _same_or_refuse(path: Path, data: bytes) -> bool:
    try:
        existing = path.read_bytes()
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read: {exc.strerror}") from exc
    if existing == data:
        return False
    raise RegistryError(
        f"{path} is already published with other bytes; published files are never modified "
        "(metadata changes need a new record)"
    )


def write_immutable(path: Path, data: bytes) -> bool:
    """Publish ``data`` at ``path`` unless it is there already.

    Returns ``True`` only when *this call* created the file: the temporary file
    is hard-linked into place, which fails when another writer got there first
    (then the bytes are compared), so two writers never both think they created
    it and a rollback never removes another writer's file.  Raises
    ``RegistryError`` when ``path`` holds other bytes: published files are
    never modified.
    """
    if path.exists():
        return _same_or_refuse(path, data)
    try:
        tmp_name = _temporary_beside(path, data, 0o644)
        try:
            os.link(tmp_name, path)
        except FileExistsError:
            return _same_or_refuse(path, data)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
    except OSError as exc:
        raise RegistryError(f"{path}: cannot write: {exc.strerror or exc}{write_hint(exc)}") from exc
    return True


#: A temporary file of ``write_atomic`` older than this was left by a killed writer.
STALE_TEMPORARY_S = 60.0


def is_temporary_name(name: str) -> bool:
    """Whether ``name`` is one ``write_atomic`` gives its temporary files (``.<target>.<random>.tmp``)."""
    return name.startswith(".") and name.endswith(".tmp")


@contextlib.contextmanager
def writer_lock(folder: Path) -> Iterator[None]:
    """Hold the registry's writer lock: ``fcntl.flock`` on the ``registry/`` folder itself.

    Writers wait for each other; readers never take it.  Locking the folder
    (not a lock file) leaves nothing behind for git or a tree comparison to see.
    Raises ``RegistryError`` when the folder cannot be opened.
    """
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError as exc:
        raise RegistryError(f"{folder}: cannot open for the writer lock: {exc.strerror or exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def sweep_temporaries(paths: list[Path], *, older_than: float = STALE_TEMPORARY_S) -> list[Path]:
    """Remove the temporary files among ``paths`` older than ``older_than`` seconds; returns those removed."""
    removed = []
    now = time.time()
    for path in paths:
        try:
            if now - path.lstat().st_mtime < older_than:
                continue
            path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed


class Transaction:
    """A batch of immutable writes that is undone as a whole if any write fails."""

    def __init__(self) -> None:
        self.created: list[Path] = []

    def write(self, path: Path, data: bytes) -> bool:
        created = write_immutable(path, data)
        if created:
            self.created.append(path)
        return created

    def rollback(self) -> None:
        for path in reversed(self.created):
            with contextlib.suppress(OSError):
                path.unlink()
        self.created.clear()

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc is not None:
            self.rollback()
