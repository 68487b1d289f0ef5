"""No private key lands in the repository (issue 39): ``python3 -m kictl.keyscan``, run by .ci/run and the pre-commit
hook, finds a key written into a test asset, in every form a key takes here, and flags nothing honest.

Real keys: ``kictl keygen``'s own (Ed25519 PKCS#8 PEM, plain and encrypted) and an RSA key from ``cryptography``.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import git
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from kictl import keyscan, trust
from tests.conftest import REPO_ROOT


@pytest.fixture
def key_pem(tmp_path: Path) -> bytes:
    out = tmp_path / "keys" / "leaked.key"
    trust.generate_keypair(out, owner="someone")
    return out.read_bytes()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with honest files: a public key, prose naming the PEM marker, keygen's test as it is."""
    root = tmp_path / "repo"
    (root / "tests" / "assets").mkdir(parents=True)
    public = tmp_path / "pub" / "ok.key"
    trust.generate_keypair(public, owner="someone")
    (root / "tests" / "assets" / "ok.key.pub").write_bytes(public.with_name("ok.key.pub").read_bytes())
    (root / "README.md").write_text("keygen writes a `-----BEGIN PRIVATE KEY-----` block; never commit it.\n")
    (root / "tests" / "test_cli.py").write_bytes((REPO_ROOT / "tests" / "trust" / "test_cli.py").read_bytes())
    repository = git.Repo.init(root, initial_branch="main")
    repository.index.add(["README.md", "tests"])
    repository.index.commit("honest files")
    return root


def _scan(root: Path, *paths: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kictl.keyscan", *paths],
        cwd=root,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
        check=False,
    )


def _track(root: Path, name: str, data: bytes) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    git.Repo(root).index.add([name])


def test_the_repository_holds_no_private_key() -> None:
    assert keyscan.scan_files(keyscan.tracked_files(REPO_ROOT), REPO_ROOT) == []


def test_honest_files_pass(repo: Path) -> None:
    done = _scan(repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""
    assert "no private key in 3 file(s)" in done.stderr


def _encrypted(pem: bytes) -> bytes:
    key = serialization.load_pem_private_key(pem, password=None)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"a passphrase"),
    )


def _rsa() -> bytes:
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )


def _body(pem: bytes) -> bytes:
    return b"".join(line for line in pem.splitlines() if not line.startswith(b"-----"))


@pytest.mark.parametrize(
    ("form", "what"),
    [
        ("pem", "a PEM PRIVATE KEY block"),
        ("encrypted", "a PEM ENCRYPTED PRIVATE KEY block"),
        ("rsa", "a PEM RSA PRIVATE KEY block"),
        ("json-string", "a PEM PRIVATE KEY block"),
        ("base64-body", "a Base64 Ed25519 private key (PKCS#8)"),
        ("der", "a DER Ed25519 private key (PKCS#8)"),
    ],
)
def test_a_key_written_into_a_test_asset_is_caught(repo: Path, key_pem: bytes, form: str, what: str) -> None:
    data = {
        "pem": key_pem,
        "encrypted": _encrypted(key_pem) if form == "encrypted" else b"",
        "rsa": _rsa() if form == "rsa" else b"",
        # a key pasted into a record's embedded source: the newlines are JSON escapes
        "json-string": json.dumps(
            {"sources": [{"path": "k.py", "content": f"KEY = '''{key_pem.decode()}'''"}]}
        ).encode(),
        "base64-body": b"SIGNING_KEY = '" + _body(key_pem) + b"'\n",
        "der": b"\x00\x01binary header " + base64.b64decode(_body(key_pem)) + b"\x00",
    }[form]
    name = "tests/assets/cheats/notes.json" if form == "json-string" else "tests/assets/fixture.bin"
    _track(repo, name, b"line one\n" + data)
    done = _scan(repo)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines() == [f"{name}:2: {what}"]
    assert "1 private key(s)" in done.stderr


def test_the_hook_checks_the_files_it_is_given(repo: Path, key_pem: bytes) -> None:
    (repo / "staged.key").write_bytes(key_pem)  # not tracked yet: the pre-commit hook passes staged files
    assert _scan(repo).returncode == 0
    done = _scan(repo, "staged.key", "README.md")
    assert done.returncode == 1
    assert done.stdout == "staged.key:1: a PEM PRIVATE KEY block\n"


def test_a_marker_without_a_key_is_not_one() -> None:
    fake = b"-----BEGIN PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----\n"
    assert keyscan.scan_bytes(fake, "docs/x.md") == []


def test_an_unreadable_list_exits_4(tmp_path: Path) -> None:
    done = _scan(tmp_path)  # not a git repository: git ls-files fails
    assert done.returncode == 4
    assert done.stderr.startswith("keyscan: cannot read the files to check")


def test_ci_and_the_pre_commit_hook_run_the_check() -> None:
    ci = (REPO_ROOT / ".ci" / "run").read_text().splitlines()
    assert "python3 -m kictl.keyscan" in ci  # before the install: a leak fails CI first
    assert ci.index("python3 -m kictl.keyscan") < next(i for i, line in enumerate(ci) if "pytest" in line)
    hooks = (REPO_ROOT / ".pre-commit-config.yaml").read_text()
    assert "entry: python3 -m kictl.keyscan" in hooks
