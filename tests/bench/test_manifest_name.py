"""A manifest's file name never leaves the --out folder, whatever the definition's name (issue 41, a writer under a
user-given directory): a name with '/' or '..' gives the record's digest instead."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from kictl import canon
from kictl.bench.judge.results import write_manifest


@pytest.mark.parametrize("name", ["../../escaped", "a/b", "..", "gemm_n4096_k4096"])
def test_a_manifest_is_written_inside_its_folder(tmp_path: Path, name: str) -> None:
    digest = "sha256:" + "ab" * 32
    report = cast(Any, SimpleNamespace(records=[], definition=SimpleNamespace(name=name, digest=digest)))
    folder = tmp_path / "deep" / "out"
    path = write_manifest(report, folder)
    assert path.parent == folder
    assert path.resolve().is_relative_to(folder.resolve())
    expected = name if name == "gemm_n4096_k4096" else canon.digest_hex(digest)
    assert path.name.startswith(f"bench-{expected}-")
    assert sorted(p.name for p in tmp_path.rglob("*.json")) == [path.name]
