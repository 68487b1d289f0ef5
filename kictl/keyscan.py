"""Find private keys in files: the check CI and the pre-commit hook run so that no private key lands in a repository.

Custody (docs/trust.md "Key custody"): the maintainers' keys live outside every repository and the verifier's is
a secret of the rerun workflow, so a private key in a tracked file is always a leak, whoever wrote it.  This module
recognises

* a PEM private-key block of any algorithm (``-----BEGIN … PRIVATE KEY-----`` … ``-----END …``, encrypted or
  not, also inside JSON strings whose newlines are escaped), the format ``kictl keygen`` writes;
* the Base64 of an Ed25519 PKCS#8 body (kictl's own keys) without its armour, and the same DER bytes raw in a
  binary file.

A PEM marker alone (documentation, a test that checks ``keygen``'s first line) is not a key.  Only the standard
library is imported, so ``python3 -m kictl.keyscan`` runs before any install.

Usage: ``python3 -m kictl.keyscan [PATH ...]``: the given files (the pre-commit hook passes the staged ones), or
every file git tracks in the current repository.  Exit 0 when none holds a key, 1 with one line per finding
(``path:line: what``), 4 when a file or git cannot be read.
"""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

_BEGIN = "-----" + "BEGIN"  # split so that this file is not itself a marker a scanner could trip on
_END = "-----" + "END"
_PEM = re.compile(
    (_BEGIN + r" ((?:[A-Z0-9]+ )*)PRIVATE KEY-----(.{0,16384}?)" + _END + r" (?:[A-Z0-9]+ )*PRIVATE KEY-----").encode(),
    re.DOTALL,
)
#: The DER prefix of an Ed25519 private key in PKCS#8 (RFC 8410): SEQUENCE, version 0, the OID 1.3.101.112, then
#: the 32-byte key as an OCTET STRING inside an OCTET STRING.  v2 (with the public key) starts with version 1.
_ED25519_DER = (
    bytes.fromhex("302e020100300506032b657004220420"),
    bytes.fromhex("3051020101300506032b657004220420"),
)
#: Base64 of those prefixes, cut where the encoding stops depending on the key's bytes (whole 3-byte groups).
_ED25519_B64 = tuple(base64.b64encode(prefix[:15]) for prefix in _ED25519_DER)
_BASE64_CHARS = re.compile(rb"[A-Za-z0-9+/=]")
#: A PEM body shorter than this is a marker in prose or a truncated example, not a key.
_MIN_BODY = 40


@dataclass(frozen=True, slots=True)
class Finding:
    """A private key found in a file: where, and which form."""

    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _body_chars(body: bytes) -> int:
    return len(_BASE64_CHARS.findall(body.replace(b"\\n", b"")))


def scan_bytes(data: bytes, path: str) -> list[Finding]:
    """Every private key in ``data`` (the contents of ``path``), in the order found."""
    found: list[Finding] = []
    spans: list[tuple[int, int]] = []
    for match in _PEM.finditer(data):
        if _body_chars(match.group(2)) >= _MIN_BODY:
            kind = match.group(1).decode().strip()
            found.append(
                Finding(path, _line_of(data, match.start()), f"a PEM {kind + ' ' if kind else ''}PRIVATE KEY block")
            )
            spans.append(match.span())
    for needle in _ED25519_B64:
        for match in re.finditer(re.escape(needle), data):
            if not any(start <= match.start() < end for start, end in spans):
                found.append(Finding(path, _line_of(data, match.start()), "a Base64 Ed25519 private key (PKCS#8)"))
    for needle in _ED25519_DER:
        start = data.find(needle)
        while start != -1:
            found.append(Finding(path, _line_of(data, start), "a DER Ed25519 private key (PKCS#8)"))
            start = data.find(needle, start + 1)
    return found


def scan_files(paths: Iterable[Path], root: Path) -> list[Finding]:
    """Scan each regular file in ``paths`` (not links or folders); raises ``OSError`` when one is unreadable."""
    found: list[Finding] = []
    for path in paths:
        if path.is_symlink() or not path.is_file():
            continue
        try:
            label = str(path.relative_to(root))
        except ValueError:
            label = str(path)
        found.extend(scan_bytes(path.read_bytes(), label))
    return found


def tracked_files(root: Path) -> list[Path]:
    """Every file git tracks under ``root`` (raises ``OSError`` or ``subprocess.CalledProcessError`` when git fails)."""
    done = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True)
    return [root / name for name in done.stdout.decode().split("\0") if name]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    root = Path.cwd()
    try:
        paths = [Path(arg) for arg in args] if args else tracked_files(root)
        found = scan_files(paths, root)
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"keyscan: cannot read the files to check: {exc}", file=sys.stderr)
        return 4
    for finding in found:
        print(finding)
    if found:
        print(
            f"keyscan: {len(found)} private key(s) in the files checked: remove them (and rotate the key: "
            'docs/trust.md, "Key custody")',
            file=sys.stderr,
        )
        return 1
    print(f"keyscan: no private key in {len(paths)} file(s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
