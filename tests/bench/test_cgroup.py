"""The sandbox's cgroup keeps the CPU time of processes that have exited, and lists those alive (issue 27)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kictl.bench.judge import cgroup

BURN = (
    "import os, time\n"
    "if os.fork() == 0:\n"
    "    end = time.process_time() + 0.2\n"
    "    while time.process_time() < end: pass\n"
)


def test_a_reaped_processs_cpu_time_stays_in_the_group() -> None:
    group = cgroup.SandboxGroup.create("test")
    if group is None:
        pytest.skip("no cgroup can be made here (not root, or no writable hierarchy)")
    try:
        assert group.cpu_ns() == 0
        assert group.pids() == []
        done = subprocess.run(group.wrap([sys.executable, "-c", BURN], None), timeout=60, check=False)
        assert done.returncode == 0
        deadline = 100
        while group.pids() and deadline:  # the grandchild, reparented, burns on after its parent left
            subprocess.run(["sleep", "0.05"], check=False)
            deadline -= 1
        assert group.pids() == []
        # every process that ran there is gone; its CPU time is not: the grandchild's 0.2 s at least
        assert group.cpu_ns() >= 200_000_000
    finally:
        group.remove()
    assert not group.folder.exists()


def test_a_worker_that_could_not_join_its_group_is_read_through_proc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the hierarchy refuses the join, the worker still starts and its group is dropped (no counter of
    nothing is believed)."""
    from kictl.bench.judge import sandbox
    from kictl.bench.judge.runner import WorkerProcess

    probe = cgroup.SandboxGroup.create("probe")
    if probe is None:
        pytest.skip("no cgroup can be made here")
    probe.remove()
    monkeypatch.setattr(cgroup.SandboxGroup, "wrap", lambda self, command, executable: command)
    worker = WorkerProcess("nojoin", "cpu", tmp_path, sandbox.Isolation(None))
    try:
        worker.start()
        assert worker.group is None
        assert worker.cpu_ns() > 0  # /proc's counters of the live worker
    finally:
        worker.stop()
