"""benchmarks/fi_cache.sh: FlashInfer's built modules from one device call to the next, run here with real tar.

Stop 58's first call restored nothing (the setup's `ls` of both archive kinds failed when one was missing) and
rebuilt FlashInfer's prefill and decode modules: 130 s of device time. These tests save a cache laid out as
FlashInfer writes it and restore it the ways the setup meets it.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "fi_cache.sh"
MODULES = ("batch_decode_bf16", "rope")


def _fi_cache(script_args: list[str | Path], home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home)}
    return subprocess.run(["bash", SCRIPT, *map(str, script_args)], env=env, capture_output=True, text=True)


def _built(home: Path) -> Path:
    """A JIT cache as FlashInfer leaves it: per module its .so, object files, ninja files and sources."""
    root = home / ".cache" / "flashinfer"
    for name in MODULES:
        ops = root / "0.6.18.post1" / "90a" / "cached_ops" / name
        ops.mkdir(parents=True)
        (ops / f"{name}.so").write_bytes(b"\x7fELF" + name.encode() * 1000)
        (ops / f"{name}.cuda.o").write_bytes(b"object" * 10000)
        (ops / "build.ninja").write_text("rule nvcc\n")
        generated = root / "0.6.18.post1" / "90a" / "generated" / name
        generated.mkdir(parents=True)
        (generated / f"{name}.cu").write_text("// source\n")
    (root / "kictl-built-keys.json").write_text('["decode", "rope"]')
    return root


def test_save_keeps_the_modules_and_the_list_and_restore_installs_them_from_either_kind(tmp_path: Path) -> None:
    _built(tmp_path / "built")
    carried = tmp_path / "carried"
    carried.mkdir()
    saved = _fi_cache(["save", carried / "fi_cache.txz"], tmp_path / "built")
    assert saved.returncode == 0, saved.stderr
    with tarfile.open(carried / "fi_cache.txz") as archive:
        names = sorted(archive.getnames())
    assert names == sorted(
        [f".cache/flashinfer/0.6.18.post1/90a/cached_ops/{name}/{name}.so" for name in MODULES]
        + [".cache/flashinfer/kictl-built-keys.json"]
    )
    # only the .txz there (the case stop 58's setup missed), then only an old .tgz
    old_carried = tmp_path / "old-carried"
    old_carried.mkdir()
    with tarfile.open(old_carried / "old.tgz", "w:gz") as old:
        old.add(tmp_path / "built" / ".cache", arcname=".cache")
    for folder, kind in ((carried, "txz"), (old_carried, "tgz")):
        home, site = tmp_path / f"home-{kind}", tmp_path / f"site-{kind}"
        home.mkdir()
        restored = _fi_cache(["restore", folder, site], home)
        assert restored.returncode == 0, restored.stderr
        for name in MODULES:
            installed = site / "flashinfer" / "data" / "aot" / name / f"{name}.so"
            assert installed.read_bytes() == b"\x7fELF" + name.encode() * 1000, kind
        assert (home / ".cache" / "flashinfer" / "kictl-built-keys.json").read_text() == '["decode", "rope"]'


def test_a_warm_machine_keeps_what_an_earlier_call_built_in_the_list(tmp_path: Path) -> None:
    """The device keeps $HOME between calls to a warm machine: the second call's restore of the carried cache
    overwrote the list of modules the first had built, and stop 60's second call planned a 75 s build for each."""
    _built(tmp_path / "built")
    carried = tmp_path / "carried"
    carried.mkdir()
    assert _fi_cache(["save", carried / "fi_cache.txz"], tmp_path / "built").returncode == 0
    home = tmp_path / "warm"
    earlier = home / ".cache" / "flashinfer"
    earlier.mkdir(parents=True)
    (earlier / "kictl-built-keys.json").write_text('["mla", "rope"]')  # built by the first call on this machine
    restored = _fi_cache(["restore", carried, tmp_path / "site"], home)
    assert restored.returncode == 0, restored.stderr
    assert json.loads((earlier / "kictl-built-keys.json").read_text()) == ["decode", "mla", "rope"]


def test_nothing_carried_restores_nothing_and_a_bare_machine_saves_an_empty_archive(tmp_path: Path) -> None:
    home, site = tmp_path / "home", tmp_path / "site"
    home.mkdir()
    for folder in (tmp_path / "empty", tmp_path / "absent"):
        if folder.name == "empty":
            folder.mkdir()
        restored = _fi_cache(["restore", folder, site], home)
        assert restored.returncode == 0, restored.stderr
        assert not site.exists()
    saved = _fi_cache(["save", tmp_path / "none.txz"], home)
    assert saved.returncode == 0, saved.stderr
    with tarfile.open(tmp_path / "none.txz") as archive:
        assert archive.getnames() == []


def test_a_wrong_command_line_is_refused_in_one_line(tmp_path: Path) -> None:
    wrong: list[list[str | Path]] = [[], ["save"], ["restore", tmp_path], ["pack", tmp_path]]
    for args in wrong:
        refused = _fi_cache(args, tmp_path)
        assert refused.returncode == 2, args
        assert refused.stderr.startswith("usage: fi_cache.sh"), args
        assert len(refused.stderr.splitlines()) == 1, args
