"""This machine's secret: proof that a derived file was written here, by kictl (issue 41).

Derived files live in places others can write: kept answers under the registry's ``.kictl/answers``
(whoever can write the registry folder, a checkout, a shared disk), a site's ``build-inputs.json``
in an output folder (an unpacked pull-request artifact holds one made by the pull request's own
code).  A reader that believes such a file prints what its author chose, or deletes the files it
lists.  So each of them carries a seal: HMAC-SHA256, under a secret that only this user on this
machine reads, over the file's content and what it is for.  A file without a seal that verifies
was not written here and is ignored (kept answers) or refused (a site's output folder).

The secret is 32 random bytes in ``$KICTL_CACHE_HOME/secret``, else ``$XDG_CACHE_HOME/kictl/secret``,
else ``~/.cache/kictl/secret``: outside every registry and output folder, in a cache (not the config
folder, which people keep in dotfile repositories).  It is made on first use with mode 0600 in a
folder of mode 0700.  One that is not a regular file of this user readable by no one else (a link, a
group-readable file) is never used: nothing is then sealed and no seal verifies, which costs a kept
answer or asks for a fresh output folder, never a wrong answer.  Deleting it forgets every seal.

Only the standard library, and little of it: the warm ``kictl leaderboard`` reads the secret.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import stat
from pathlib import Path

from kictl.store.files import user_dir

#: Overrides where the secret lives (tests, and a user who wants it elsewhere).
CACHE_ENV = "KICTL_CACHE_HOME"
SECRET_FILE = "secret"
_SIZE = 32


def cache_dir() -> Path:
    """kictl's cache folder: ``$KICTL_CACHE_HOME``, else ``$XDG_CACHE_HOME/kictl``, else ``~/.cache/kictl``."""
    return user_dir(CACHE_ENV, "XDG_CACHE_HOME", ".cache")


def secret_path() -> Path:
    return cache_dir() / SECRET_FILE


def machine_secret() -> bytes | None:
    """The secret, made on first use; ``None`` when it cannot be made or is not private to this user."""
    return _secret_at(str(secret_path()))


@functools.cache
def _secret_at(path: str) -> bytes | None:
    found = _read_private(path)
    if found is not None:
        return found
    with contextlib.suppress(OSError):
        _create(Path(path))
    return _read_private(path)


def _read_private(path: str) -> bytes | None:
    """The secret's bytes when ``path`` is a regular file of this user that no one else may read or write."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            return None
        data = os.read(fd, 4 * _SIZE + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        secret = bytes.fromhex(data.decode("ascii").strip())
    except ValueError:
        return None
    return secret if len(secret) == _SIZE else None


def _create(path: Path) -> None:
    """Write a new secret to ``path`` unless one is there: a private temporary file, then a hard link
    (which never replaces a file another process made first)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(os.urandom(_SIZE).hex().encode("ascii") + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def _message(purpose: str, parts: tuple[bytes | str, ...]) -> bytes:
    """``purpose`` and ``parts``, each length-prefixed: no two lists of parts give one message."""
    chunks = []
    for part in (purpose, *parts):
        data = part.encode("utf-8", "surrogateescape") if isinstance(part, str) else part
        chunks.append(len(data).to_bytes(8, "big") + data)
    return b"".join(chunks)


def seal(purpose: str, *parts: bytes | str) -> str | None:
    """HMAC-SHA256 (hex) of ``parts`` for ``purpose`` under this machine's secret; ``None`` without one."""
    secret = machine_secret()
    if secret is None:
        return None
    return hmac.new(secret, _message(purpose, parts), hashlib.sha256).hexdigest()


def sealed(mark: object, purpose: str, *parts: bytes | str) -> bool:
    """Whether ``mark`` is the seal of ``parts`` for ``purpose`` under this machine's secret."""
    if not isinstance(mark, str):
        return False
    expected = seal(purpose, *parts)
    return expected is not None and hmac.compare_digest(expected, mark)
