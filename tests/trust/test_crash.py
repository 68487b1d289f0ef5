"""A killed writer leaves a registry that the next command reads or repairs (issue 41, class 7).

Each writer runs in a child process that sends itself SIGKILL (``kill -9``) just before its Nth file
operation (``os.fsync``, ``os.link``, ``os.replace``, ``os.unlink``): every step of the write, one child
per step, until a child gets through.  The hook exists only in this test (it wraps the ``os`` functions in
the child); kictl has none.  After each kill, on a copy of the registry as the kill left it, ``trust
verify``, ``verify`` and the same command again must work, or name the repair (``kictl trust repair``),
which must then work.  Real keys, a real git registry, real processes killed for real.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kictl import trust
from kictl.store.files import is_temporary_name
from kictl.store.registry import Registry
from kictl.trust.root import REPAIR_COMMAND
from tests.conftest import RunCli
from tests.trust.conftest import Setup, make_key

#: The child: wrap the file operations of ``os`` so that the Nth one kills the process, then run kictl.
CHILD = """
import os, runpy, signal, sys

step, count = int(sys.argv[1]), [0]

def deadly(name):
    real = getattr(os, name)
    def wrapped(*args, **kwargs):
        count[0] += 1
        if count[0] == step:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    setattr(os, name, wrapped)

for name in ("fsync", "link", "replace", "unlink"):
    deadly(name)
sys.argv = ["kictl", *sys.argv[2:]]
runpy.run_module("kictl", run_name="__main__")
"""

pytestmark = pytest.mark.slow  # a child process per step of each writer


def _killed_at(step: int, args: list[str]) -> int:
    """Run ``kictl ARGS`` in a child killed at its ``step``th file operation; its return code."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", CHILD, str(step), *args], env=env, capture_output=True, check=False)
    assert done.returncode in (0, -signal.SIGKILL), done.stderr.decode()
    return done.returncode


def _each_kill(setup: Setup, tmp_path: Path, args: Callable[[Path], list[str]]) -> list[Registry]:
    """A copy of the registry per step of ``kictl ARGS``, as a kill at that step left it (the last: finished)."""
    copies = []
    for step in range(1, 40):
        copy = tmp_path / f"step-{step}"
        shutil.copytree(setup.registry.root, copy, symlinks=True)
        code = _killed_at(step, args(copy))
        copies.append(Registry(copy))
        if code == 0:
            return copies
    raise AssertionError("the writer never finished")


def _ok_or_names_repair(cli: RunCli, *args: str | Path) -> bool:
    """Run ``kictl ARGS``: True when it worked, False when it failed naming the repair; anything else fails."""
    result = cli(*args)
    if result.exit_code == 0:
        return True
    assert REPAIR_COMMAND in result.output, result.output
    assert result.output.count("\n") <= 12, result.output
    return False


def test_a_killed_add_key_is_read_or_repaired_at_every_step(cli: RunCli, setup: Setup, tmp_path: Path) -> None:
    new = make_key(tmp_path / "keys", "newcomer")
    maintainer = str(setup.maintainer.private)

    def add_key(root: Path) -> list[str]:
        return [
            "trust",
            "add-key",
            str(new.public),
            "--role",
            "submitter",
            "--key",
            maintainer,
            "--registry",
            str(root),
        ]

    copies = _each_kill(setup, tmp_path, add_key)
    assert len(copies) >= 4  # the new version's file, root.json: a temporary file, a link or rename, a cleanup
    states = []
    for registry in copies:
        root = registry.root
        readable = _ok_or_names_repair(cli, "trust", "verify", "--registry", root)
        assert _ok_or_names_repair(cli, "verify", setup.run.digest, "--registry", root) == readable
        if not readable:
            assert not _ok_or_names_repair(cli, *add_key(root))  # the next writer names it too
            repaired = cli("trust", "repair", "--registry", root)
            assert repaired.exit_code == 0, repaired.output
        assert cli("trust", "verify", "--registry", root).exit_code == 0
        again = cli(*add_key(root))
        assert again.exit_code == 0 or "already in the trust root" in again.output, again.output
        assert new.keyid in trust.registry_root(registry).keys
        checked = cli("verify", setup.run.digest, "--registry", root)
        assert checked.exit_code == 0, checked.output
        states.append(readable)
    assert False in states  # some kill fell between the two files, and the repair finished it
    assert states[0]
    assert states[-1]


def test_a_killed_sign_leaves_no_file_a_reader_counts(cli: RunCli, setup: Setup, tmp_path: Path) -> None:
    submitter = str(setup.submitter.private)

    def sign(root: Path) -> list[str]:
        return ["sign", setup.run.digest, "--key", submitter, "--registry", str(root)]

    copies = _each_kill(setup, tmp_path, sign)
    assert len(copies) >= 3
    left_temporaries = 0
    for registry in copies:
        folder = registry.attestation_folder(setup.run.digest)
        left_temporaries += sum(1 for path in folder.glob("*") if is_temporary_name(path.name))
        checked = cli("verify", setup.run.digest, "--registry", registry.root, "--json")
        assert checked.exit_code == 0, checked.output
        assert cli("validate", "--registry", registry.root).exit_code == 0
        again = cli(*sign(registry.root))
        assert again.exit_code == 0, again.output
        assert '"submitted": true' in cli("verify", setup.run.digest, "--registry", registry.root, "--json").stdout
        repaired = cli("trust", "repair", "--registry", registry.root)
        assert repaired.exit_code == 0, repaired.output
        assert not [path for path in folder.glob("*") if is_temporary_name(path.name)]
    assert left_temporaries  # a kill left a temporary file beside the envelope, and nothing counted it


def test_a_killed_trust_init_never_leaves_an_unpinned_root(cli: RunCli, tmp_path: Path, key_folder: Path) -> None:
    """``trust init`` pins its anchor on this machine before it writes the root: no kill leaves a keyed root
    that this machine does not trust (which only a `kictl trust pin` by hand would fix)."""
    import json

    from kictl.scaffold import create_registry
    from tests.trust.conftest import key_files

    root = tmp_path / "fresh"
    create_registry(root)
    maintainer = key_files(key_folder, "maintainer")
    copies = []
    for step in range(1, 40):
        copy = tmp_path / f"init-{step}"
        shutil.copytree(root, copy, symlinks=True)
        code = _killed_at(step, ["trust", "init", "--key", str(maintainer.private), "--registry", str(copy)])
        copies.append(copy)
        if code == 0:
            break
    assert len(copies) >= 6
    for copy in copies:
        if not _ok_or_names_repair(cli, "trust", "verify", "--registry", copy):
            assert cli("trust", "repair", "--registry", copy).exit_code == 0
        checked = cli("trust", "verify", "--registry", copy, "--json")
        assert checked.exit_code == 0, checked.output
        chain = json.loads(checked.stdout)
        if chain["version"] == 1:  # killed before the anchor was written: init again
            again = cli("trust", "init", "--key", maintainer.private, "--registry", copy)
            assert again.exit_code == 0, again.output
            chain = json.loads(cli("trust", "verify", "--registry", copy, "--json").stdout)
        assert chain["version"] == 2
        assert chain["anchor"] is not None
        assert chain["anchor"]["source"] == "this machine"
