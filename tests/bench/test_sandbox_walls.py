"""The sandbox holds against root (issue 27): no capability, locked binds, a seccomp filter, no checkout inside.

The tests run as whoever runs the suite (root in CI and here): each starts one process in exactly the sandbox a
worker gets (``sandbox.sandboxed``) and has it attack the walls, then looks from outside at what changed.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from kictl.bench.judge import sandbox, seccomp
from tests.bench.conftest import SANDBOX
from tests.conftest import REPO_ROOT

ATTACK = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
found = {}
def call(name, *args):
    result = getattr(libc, name)(*args)
    return 0 if result == 0 else ctypes.get_errno()
site = sys.argv[2]
MS_REMOUNT, MS_BIND, MS_RDONLY = 32, 4096, 1
found["uid"] = os.getuid()
found["capeff"] = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0]
found["seccomp"] = [l.split()[1] for l in open("/proc/self/status") if l.startswith("Seccomp:")][0]
found["remount"] = call("mount", None, site.encode(), None, MS_REMOUNT | MS_BIND, None)
found["remount_usr"] = call("mount", None, b"/usr", None, MS_REMOUNT, None)
found["mknod"] = call("mknod", b"/tmp/null", 0o20666, os.makedev(1, 3))
found["unshare"] = call("unshare", 0x10000000 | 0x00020000)
found["ptrace"] = call("ptrace", 16, 1, None, None)
found["bpf"] = call("syscall", 321, 0, None, 0)
for name, path in (("write_site", os.path.join(site, "kictl-planted")), ("write_kictl", "/kictl-worker/planted"),
                   ("write_root", "/planted")):
    try:
        open(path, "w").write("x")
        found[name] = 0
    except OSError as exc:
        found[name] = exc.errno
open("/tmp/mine", "w").write("private")
found["tmp"] = open("/tmp/mine").read()
import kictl
found["kictl"] = kictl.__file__
found["checkout_visible"] = any(os.path.exists(os.path.join(sys.argv[1], name)) for name in ("kictl", "README.md"))
found["registry_visible"] = os.path.exists(os.path.join(sys.argv[1], "registry"))
print(json.dumps(found))
"""


def test_the_filter_is_whole_bpf_instructions_and_refuses_unknown_machines() -> None:
    for machine in seccomp.ARCHES:
        program = seccomp.program(machine)
        assert len(program) % 8 == 0
        assert 8 < len(program) // 8 < 4096
        first = struct.unpack_from("<HBBI", program, 0)
        assert first == (0x20, 0, 0, 4)  # the arch is checked before any number is read
    with pytest.raises(seccomp.Unsupported):
        seccomp.program("sparc")


def test_the_checkout_and_home_are_never_bound() -> None:
    folders = sandbox._python_folders()
    repo = os.path.realpath(REPO_ROOT)
    assert repo not in folders
    assert "/" not in folders
    assert not any(repo.startswith(folder + "/") for folder in folders)
    assert not any(f.startswith(repo + "/") and "packages" not in f and not f.startswith(sys.prefix) for f in folders)
    copy = Path(sandbox.worker_package())
    assert (copy / "kictl" / "bench" / "worker" / "main.py").read_bytes() == (
        REPO_ROOT / "kictl/bench/worker/main.py"
    ).read_bytes()
    # the worker's part of kictl only: no judge, no records, no registry code
    assert not (copy / "kictl" / "bench" / "judge").exists()
    assert not (copy / "kictl" / "records.py").exists()
    assert not (copy / "kictl" / "store").exists()
    assert not list(copy.rglob("*.json"))
    assert not (copy / "registry").exists()


def test_the_workers_copy_of_kictl_is_imported_from_its_own_bytecode(tmp_path: Path) -> None:
    """The copy holds each file's bytecode, valid for the copy: a worker (which writes no bytecode, and could not
    in its read-only bind) imports kictl's modules from it rather than compiling them at every start."""
    copy = sandbox.worker_package()
    env = {"PYTHONPATH": copy, "PYTHONDONTWRITEBYTECODE": "1", "PATH": os.environ.get("PATH", "/usr/bin")}
    done = subprocess.run(
        [sys.executable, "-v", "-c", "import kictl.bench.worker.main"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    loaded = [line for line in done.stderr.splitlines() if line.startswith(f"# code object from '{copy}")]
    assert any("/kictl/bench/worker/__pycache__/main." in line for line in loaded), done.stderr[-2000:]
    assert len(loaded) >= 10, loaded
    assert [line for line in loaded if not line.endswith(".pyc'")] == []  # nothing compiled from source


@pytest.mark.skipif(not SANDBOX, reason="needs a working bubblewrap sandbox")
def test_a_root_run_sandbox_cannot_remount_mknod_or_write_outside_its_tmp(tmp_path: Path) -> None:
    isolation = sandbox.resolve(False)
    import torch

    site = Path(torch.__file__).parent.parent
    command, executable, fds = sandbox.sandboxed(
        isolation, [sys.executable, "-c", ATTACK, str(REPO_ROOT), str(site)], cuda=False, scratch=tmp_path
    )
    try:
        done = subprocess.run(
            command,
            executable=executable,
            pass_fds=fds,
            capture_output=True,
            text=True,
            timeout=120,
            env=sandbox.worker_environment(isolation),
            cwd="/",
            check=False,
        )
    finally:
        for fd in fds:
            os.close(fd)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    eperm = 1
    assert found["uid"] == sandbox.SANDBOX_UID
    assert found["capeff"] == "0000000000000000"
    assert found["seccomp"] == "2"
    assert found["remount"] == eperm
    assert found["remount_usr"] == eperm
    assert found["mknod"] == eperm
    assert found["unshare"] == eperm
    assert found["ptrace"] == eperm
    assert found["bpf"] == eperm
    assert all(found[name] in (eperm, 13, 30, 2) for name in ("write_site", "write_kictl", "write_root")), found
    assert found["tmp"] == "private"
    assert found["kictl"].startswith(sandbox.PACKAGE_MOUNT + "/")
    assert not found["checkout_visible"]
    assert not found["registry_visible"]
    assert not (site / "kictl-planted").exists()


@pytest.mark.skipif(not SANDBOX, reason="needs a working bubblewrap sandbox")
def test_an_interpreter_named_through_dotdot_still_runs_in_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `../main/.venv/bin/python` from a sibling checkout: the sandbox binds the venv, not the folder the path
    # climbs out of, so the name must be resolved before it goes in (it failed as "cannot make a sandbox")
    (tmp_path / "checkout").mkdir()
    climbing = os.path.join(tmp_path, "checkout", *[".."] * (len(tmp_path.parts) + 1))
    name = climbing + sys.executable
    assert ".." in name
    assert os.path.samefile(name, sys.executable)
    monkeypatch.setattr(sys, "executable", name)
    sandbox.probe.cache_clear()
    try:
        found = sandbox.resolve(False)
        command, _, fds = sandbox.worker_command(found, cuda=False)
        for fd in fds:
            os.close(fd)
    finally:
        sandbox.probe.cache_clear()
    assert found.bwrap is not None
    assert os.path.abspath(name) in command
    assert name not in command
