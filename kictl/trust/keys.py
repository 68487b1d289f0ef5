"""Ed25519 keys: generating, loading and writing key files, and keyids (the SHA-256 of the raw public
key).

Private keys are PKCS#8 PEM files of mode 0600, encrypted when ``$KICTL_KEY_PASSPHRASE``
is set; public keys are SubjectPublicKeyInfo PEM, optionally preceded by ``owner:``
and ``keyid:`` lines (RFC 7468 §5.2).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from kictl import canon
from kictl.errors import EnvError, RegistryError, UsageError
from kictl.store.files import read_file
from kictl.trust._common import PASSPHRASE_ENV


def public_bytes(public_key: Ed25519PublicKey) -> bytes:
    """The raw 32 bytes of an Ed25519 public key."""
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def keyid_of(public_key: Ed25519PublicKey) -> str:
    """Hex SHA-256 of the raw 32-byte public key (docs/trust.md)."""
    return canon.sha256_hex(public_bytes(public_key))


def _passphrase() -> bytes | None:
    value = os.environ.get(PASSPHRASE_ENV)
    return value.encode("utf-8") if value else None


def public_key_text(public_key: Ed25519PublicKey, *, owner: str | None = None) -> bytes:
    """The ``.pub`` file: ``owner:`` and ``keyid:`` lines, then the PEM public key."""
    lines = []
    if owner:
        if "\n" in owner or "\r" in owner:
            raise UsageError("an owner is one line of text")
        lines.append(f"owner: {owner}\n")
    lines.append(f"keyid: {keyid_of(public_key)}\n")
    pem = public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "".join(lines).encode("utf-8") + pem


def generate_keypair(out: Path, *, owner: str | None = None) -> str:
    """Write a new Ed25519 key to ``out`` (PEM, mode 0600) and ``out.pub``; return its keyid.

    The private key is encrypted with ``$KICTL_KEY_PASSPHRASE`` when that is
    set.  Raises ``UsageError`` when either file exists (keys are never
    overwritten) and ``RegistryError`` when they cannot be written.
    """
    public_path = out.with_name(out.name + ".pub")
    for path in (out, public_path):
        if path.exists() or path.is_symlink():
            raise UsageError(f"{path} exists; keygen never overwrites a key (choose another --out)")
    private_key = Ed25519PrivateKey.generate()
    passphrase = _passphrase()
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption()
    )
    private_pem = private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    public_text = public_key_text(private_key.public_key(), owner=owner)
    created: list[Path] = []
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        for path, data, mode in ((out, private_pem, 0o600), (public_path, public_text, 0o644)):
            # O_EXCL: never replace a file that appeared since the check above.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            created.append(path)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(path, mode)  # the umask may have removed bits, never added them
    except FileExistsError as exc:
        _remove_all(created[:-1] if created and created[-1] != Path(exc.filename) else created)
        raise UsageError(f"{exc.filename} exists; keygen never overwrites a key") from exc
    except OSError as exc:
        _remove_all(created)
        raise RegistryError(f"cannot write {exc.filename or out}: {exc.strerror}") from exc
    return keyid_of(private_key.public_key())


def _remove_all(paths: Iterable[Path]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink()


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """An Ed25519 private key from a PEM file.

    The passphrase comes from ``$KICTL_KEY_PASSPHRASE``.  Raises ``EnvError``
    (exit 5) when the file is missing, readable by group or others, encrypted
    without a passphrase set, not decryptable with it, or not an Ed25519 key.
    """
    try:
        info = path.stat()
    except FileNotFoundError as exc:
        raise EnvError(f"no private key at {path}") from exc
    except OSError as exc:
        raise EnvError(f"{path}: cannot read: {exc.strerror}") from exc
    if os.name == "posix" and info.st_mode & 0o077:
        mode = stat.S_IMODE(info.st_mode)
        raise EnvError(
            f"{path}: permissions {mode:04o} are too open for a private key "
            f"(group or others may read it); run chmod 600 {path}"
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EnvError(f"{path}: cannot read: {exc.strerror}") from exc
    passphrase = _passphrase()
    encrypted = b"ENCRYPTED PRIVATE KEY" in data
    if encrypted and passphrase is None:
        raise EnvError(f"{path} is encrypted; set ${PASSPHRASE_ENV} to its passphrase")
    try:
        key = serialization.load_pem_private_key(data, password=passphrase if encrypted else None)
    except ValueError as exc:
        if encrypted:
            raise EnvError(f"cannot decrypt {path}: wrong passphrase in ${PASSPHRASE_ENV}") from exc
        raise EnvError(f"{path} is not a PEM private key") from exc
    except (TypeError, UnsupportedAlgorithm) as exc:
        raise EnvError(f"{path} is not a usable PEM private key: {exc}") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise EnvError(f"{path} is a {type(key).__name__.removeprefix('_')}, not an Ed25519 key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """An Ed25519 public key from a PEM file (a ``.pub`` file from ``kictl keygen``).

    Raises ``EnvError`` when the file is missing or holds no Ed25519 public key.
    """
    data = read_file(path, missing=EnvError, missing_text=f"no public key at {path}", error=EnvError)
    if b"PRIVATE KEY" in data:
        raise EnvError(f"{path} holds a private key; give its .pub file")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise EnvError(f"{path} is not a PEM public key") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise EnvError(f"{path} is not an Ed25519 public key")
    return key


def public_key_owner(path: Path) -> str | None:
    """The ``owner:`` line of a ``.pub`` file written by ``kictl keygen --owner``, if any."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("-----BEGIN"):
            break
        if line.startswith("owner:"):
            return line.removeprefix("owner:").strip() or None
    return None
