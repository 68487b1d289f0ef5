"""This machine's secret (kictl.index.secret, issue 41): private, made once, never taken from a link or a file others
can read, and its seals bind every part."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kictl.index import secret


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "cache" / "kictl"
    monkeypatch.setenv(secret.CACHE_ENV, str(home))
    return home


def test_the_secret_is_made_once_private_to_this_user(cache: Path) -> None:
    mark = secret.seal("purpose", "a")
    assert mark is not None
    path = cache / secret.SECRET_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert secret.seal("purpose", "a") == mark  # the same secret next time
    assert secret.sealed(mark, "purpose", "a")
    assert [p.name for p in cache.iterdir()] == [secret.SECRET_FILE]  # no temporary file left


def test_seals_bind_the_purpose_and_every_part(cache: Path) -> None:
    mark = secret.seal("purpose", "ab", "c")
    assert not secret.sealed(mark, "purpose", "a", "bc")
    assert not secret.sealed(mark, "other purpose", "ab", "c")
    assert not secret.sealed(mark, "purpose", "ab", "c", "")
    assert not secret.sealed(None, "purpose", "ab", "c")
    assert not secret.sealed(mark.upper() if mark else "", "purpose", "ab", "c")


@pytest.mark.parametrize("case", ["group-readable", "link", "short"])
def test_a_secret_others_could_know_is_never_used(cache: Path, tmp_path: Path, case: str) -> None:
    cache.mkdir(parents=True)
    path = cache / secret.SECRET_FILE
    if case == "link":
        planted = tmp_path / "planted"
        planted.write_text("ab" * 32 + "\n")
        planted.chmod(0o600)
        path.symlink_to(planted)
    else:
        path.write_text(("ab" * 32 if case == "group-readable" else "ab" * 8) + "\n")
        path.chmod(0o640 if case == "group-readable" else 0o600)
    assert secret.seal("purpose", "a") is None
    assert not secret.sealed(secret.seal("purpose", "a"), "purpose", "a")
    assert path.is_symlink() == (case == "link")  # left for the user to look at, never replaced


def test_another_machines_secret_gives_other_seals(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = secret.seal("purpose", "a")
    monkeypatch.setenv(secret.CACHE_ENV, str(tmp_path / "elsewhere"))
    assert secret.seal("purpose", "a") not in (None, mark)
    assert not secret.sealed(mark, "purpose", "a")
    assert os.environ[secret.CACHE_ENV].endswith("elsewhere")
