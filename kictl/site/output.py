"""The folder ``kictl site build`` writes into: only its own files, only inside it, never through a link (issue 41).

A pull request's site artifact is built by the pull request's own code, so an unpacked artifact holds
whatever its author chose: a ``build-inputs.json`` that lists ``../../.ssh/id_ed25519``, a subfolder
that is a link to the home folder, a page that is a link to a file elsewhere.  The rules:

* **OUT is kictl's, or it is refused.**  A folder that does not exist or is empty becomes a site
  folder.  Any other folder is one only while its ``build-inputs.json`` is, byte for byte, the one
  kictl last wrote into that very folder on this machine: kictl keeps, outside OUT (in its cache,
  ``kictl.index.secret``), a seal of each output folder's path and manifest under this machine's
  secret.  Nothing inside OUT can forge or replay that, so an unpacked artifact is refused (exit 2)
  unless ``force``: then the build writes its files and removes none of what was there.
* **Only its own files.**  Files are removed only when the sealed manifest lists them; a listed name
  that is not a plain relative path inside OUT (``..``, absolute, empty parts) is an error (exit 4)
  before anything is written.
* **Never through a link.**  OUT itself and every folder on the way to a file are opened with
  ``O_NOFOLLOW`` relative to their parent's descriptor, and a file is replaced by a rename in that
  folder: a link (or anything but a plain folder or file) where kictl would write or remove is an
  error (exit 4), never followed.  A name is removed only when it is a regular file.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections import OrderedDict
from pathlib import Path

from kictl.errors import RegistryError, UsageError
from kictl.index import secret

STATE_FILE = "build-inputs.json"
#: What a seal of an output folder is for (``kictl.index.secret.seal``'s purpose).
SEAL_PURPOSE = "kictl site build: the manifest kictl wrote into this folder"
#: Folder descriptors kept open at once (a site has a folder per run).
_OPEN_FOLDERS = 64
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def site_parts(name: str) -> tuple[str, ...]:
    """The parts of ``name``, a site file's path relative to OUT; raises ``RegistryError`` when it could
    reach outside OUT (absolute, ``..``, ``.``, empty parts, a NUL)."""
    parts = tuple(name.split("/")) if isinstance(name, str) else ()
    if not parts or "\0" in name or name.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise RegistryError(f"{name!r} is not a path inside the output folder; kictl site build writes only there")
    return parts


def _record_path(folder: Path) -> Path:
    """Where the seal of ``folder``'s manifest is kept: kictl's cache, never the folder."""
    name = hashlib.sha256(os.fsencode(folder)).hexdigest()[:32]
    return secret.cache_dir() / "sites" / name


class SiteFolder:
    """An output folder opened for one build.  ``trusted`` says whether its previous manifest is kictl's
    (``manifest`` is then that manifest's bytes, else ``None``)."""

    def __init__(self, path: Path, fd: int, *, trusted: bool, manifest: bytes | None) -> None:
        self.path = path
        self.trusted = trusted
        self.manifest = manifest
        self._root = fd
        self._folders: OrderedDict[tuple[str, ...], int] = OrderedDict()

    # ----------------------------------------------------------------- opening

    @classmethod
    def open(cls, out: Path, *, force: bool = False) -> SiteFolder:
        """Open (or make) ``out``; raises ``UsageError`` for a folder kictl did not make here (unless
        ``force``), a file or a link, ``RegistryError`` when it cannot be made or read."""
        absolute = Path(os.path.abspath(out))
        if absolute == absolute.parent:
            raise UsageError(f"{out}: the output folder cannot be the file system's root")
        path = absolute.parent.resolve() / absolute.name  # the folders above OUT are the user's; OUT is not followed
        fresh = False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(path, 0o755)
            fresh = True
        except FileExistsError:
            pass
        except OSError as exc:
            raise RegistryError(f"{path}: cannot make the output folder: {exc.strerror or exc}") from exc
        try:
            fd = os.open(path, _DIRECTORY_FLAGS)
        except OSError as exc:
            if path.is_symlink():
                raise UsageError(
                    f"{path} is a symbolic link; kictl site build writes only into a real folder (name the folder "
                    "it points to)"
                ) from exc
            if exc.errno == errno.ENOTDIR:
                raise UsageError(f"{path} exists and is not a folder") from exc
            raise RegistryError(f"{path}: cannot open the output folder: {exc.strerror or exc}") from exc
        try:
            names = os.listdir(fd)
            if fresh or not names:
                return cls(path, fd, trusted=True, manifest=None)
            manifest = _read_regular(fd, STATE_FILE)
            record = _read_record(path)
            if manifest is not None and secret.sealed(record, SEAL_PURPOSE, os.fsencode(path), manifest):
                return cls(path, fd, trusted=True, manifest=manifest)
        except OSError as exc:
            os.close(fd)
            raise RegistryError(f"{path}: cannot read the output folder: {exc.strerror or exc}") from exc
        except BaseException:
            os.close(fd)
            raise
        if force:
            return cls(path, fd, trusted=False, manifest=None)
        os.close(fd)
        raise UsageError(
            f"{path} is not empty and is not a site that kictl built there on this machine; build into a new "
            "empty folder (never into an unpacked artifact), or pass --force to build into it, removing nothing"
        )

    def close(self) -> None:
        for fd in self._folders.values():
            os.close(fd)
        self._folders.clear()
        if self._root >= 0:
            os.close(self._root)
            self._root = -1

    def __enter__(self) -> SiteFolder:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ----------------------------------------------------------------- folders

    def _folder(self, parts: tuple[str, ...], *, create: bool) -> int | None:
        """A descriptor of the folder ``parts`` under OUT, reached without following a link; ``None`` when it
        is missing and not ``create``d.  Raises ``RegistryError`` for a link or a file on the way."""
        if not parts:
            return self._root
        if parts in self._folders:
            self._folders.move_to_end(parts)
            return self._folders[parts]
        parent = self._folder(parts[:-1], create=create)
        if parent is None:
            return None
        name = parts[-1]
        try:
            fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                return None
            try:
                os.mkdir(name, 0o755, dir_fd=parent)
                fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
            except OSError as exc:
                raise self._refusal(parts, exc) from exc
        except OSError as exc:
            raise self._refusal(parts, exc) from exc
        self._folders[parts] = fd
        while len(self._folders) > _OPEN_FOLDERS:
            _, oldest = self._folders.popitem(last=False)
            os.close(oldest)
        return fd

    def _refusal(self, parts: tuple[str, ...], exc: OSError) -> RegistryError:
        where = self.path.joinpath(*parts)
        kind = _kind(where)
        if kind is not None:
            return RegistryError(f"{where} is {kind}; kictl site build never writes or removes through it")
        return RegistryError(f"{where}: cannot write: {exc.strerror or exc}")

    # ----------------------------------------------------------------- files

    def is_file(self, name: str) -> bool:
        """Whether ``name`` is a regular file inside OUT, reached through no link."""
        parts = site_parts(name)
        try:
            folder = self._folder(parts[:-1], create=False)
            if folder is None:
                return False
            return stat.S_ISREG(os.stat(parts[-1], dir_fd=folder, follow_symlinks=False).st_mode)
        except (OSError, RegistryError):
            return False

    def write(self, name: str, data: bytes) -> bool:
        """Write ``data`` to ``name`` unless it holds them already: a temporary file in the same folder, then a
        rename (derived data, no fsync).  Returns whether the file was written."""
        parts = site_parts(name)
        folder = self._folder(parts[:-1], create=True)
        assert folder is not None
        leaf = parts[-1]
        try:
            info = os.stat(leaf, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            info = None
        except OSError as exc:
            raise self._refusal(parts, exc) from exc
        if info is not None:
            if not stat.S_ISREG(info.st_mode):
                raise self._refusal(parts, OSError(errno.EEXIST, "not a regular file"))
            if info.st_size == len(data) and _read_regular(folder, leaf) == data:
                return False
        temporary = f".{leaf}.{os.urandom(6).hex()}.tmp"
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=folder)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    os.fchmod(handle.fileno(), 0o644)
                os.replace(temporary, leaf, src_dir_fd=folder, dst_dir_fd=folder)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=folder)
                raise
        except OSError as exc:
            raise RegistryError(f"{self.path.joinpath(*parts)}: cannot write: {exc.strerror or exc}") from exc
        return True

    def remove(self, name: str) -> bool:
        """Remove ``name`` when it is a regular file inside OUT; returns whether it was removed.  A link or other
        non-file there is an error: the build never removes what it did not write."""
        parts = site_parts(name)
        folder = self._folder(parts[:-1], create=False)
        if folder is None:
            return False
        try:
            info = os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise self._refusal(parts, exc) from exc
        if not stat.S_ISREG(info.st_mode):
            raise self._refusal(parts, OSError(errno.EEXIST, "not a regular file"))
        try:
            os.unlink(parts[-1], dir_fd=folder)
        except OSError as exc:
            raise RegistryError(f"{self.path.joinpath(*parts)}: cannot remove: {exc.strerror or exc}") from exc
        return True

    def finish(self, manifest: bytes) -> None:
        """Write the manifest, then seal it for this folder in kictl's cache: the next build knows OUT as its own.
        A seal that cannot be kept only means that the next build asks for ``--force``."""
        self.write(STATE_FILE, manifest)
        mark = secret.seal(SEAL_PURPOSE, os.fsencode(self.path), manifest)
        if mark is not None:
            with contextlib.suppress(OSError):
                _write_record(_record_path(self.path), mark)


def _kind(path: Path) -> str | None:
    """What ``path`` is when it is neither missing nor a plain folder or file kictl may use."""
    try:
        info = path.lstat()
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return "a symbolic link"
    if stat.S_ISDIR(info.st_mode):
        return "a folder where a file belongs"
    if stat.S_ISREG(info.st_mode):
        return "a file where a folder belongs"
    return "neither a file nor a folder"


def _read_regular(folder: int, name: str) -> bytes | None:
    """The bytes of ``name`` in ``folder`` when it is a regular file (never a link, never a FIFO)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), dir_fd=folder)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read()


def _read_record(folder: Path) -> str | None:
    try:
        return _record_path(folder).read_text(encoding="ascii").strip()
    except (OSError, ValueError):
        return None


def _write_record(path: Path, mark: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(mark + "\n")
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
