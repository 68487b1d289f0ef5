"""A cgroup per worker sandbox: CPU time of everything that ran in it, reaped processes included (issue 27).

The parent makes a group for each worker before it starts (``SandboxGroup.create``), and the worker's first
process joins it before it executes bubblewrap (``wrap``: a ``/bin/sh`` line that writes its own pid into
the group and then ``exec``s the command), so every process the sandbox ever holds is in it.  The group's
CPU counter keeps the time of processes that have exited, which ``/proc``'s per-thread counters lose; its
process list shows every process in it.

Both hierarchies are handled: cgroup v2 (the lent H200: ``cpu.stat``'s ``usage_usec``), and v1 (the
development machines and CI: ``cpuacct.usage`` in the ``cpuacct`` hierarchy), each under the group kictl's own
process is in.  Where neither can be made (not root, no writable hierarchy) there is no group and kictl reads
``/proc`` as before.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
#: The shell line that joins the groups named by its arguments, then executes the rest of them.
_JOIN = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ 2>/dev/null > "$1"; shift; n=$((n - 1)); done; exec "$@"'


@dataclass
class SandboxGroup:
    """One worker's group: the folder, where its CPU time is read, and how (v1: ns; v2: ``usage_usec``)."""

    folder: Path
    v2: bool

    @classmethod
    def create(cls, label: str) -> SandboxGroup | None:
        """A new, empty group below kictl's own, or ``None`` where none can be made here."""
        try:
            lines = Path("/proc/self/cgroup").read_text().splitlines()
        except OSError:
            return None
        v1: dict[str, str] = {}
        v2_path: str | None = None
        for line in lines:
            parts = line.split(":", 2)
            if len(parts) != 3:
                continue
            if parts[1] == "":
                v2_path = parts[2]
            for controller in parts[1].split(","):
                if controller:
                    v1[controller] = parts[2]
        name = f"kictl-{os.getpid()}-{''.join(c if c.isalnum() else '-' for c in label)[:40]}-{secrets.token_hex(4)}"
        if "cpuacct" in v1 and (ROOT / "cpuacct" / "cpuacct.usage").exists():
            candidate, v2 = ROOT / "cpuacct" / v1["cpuacct"].lstrip("/") / name, False
        elif v2_path is not None and (ROOT / "cgroup.controllers").exists():
            candidate, v2 = ROOT / v2_path.lstrip("/") / name, True
        else:
            return None
        try:
            candidate.mkdir()
        except OSError:
            return None
        group = cls(candidate, v2)
        if group.cpu_ns() < 0:
            group.remove()
            return None
        return group

    @property
    def procs(self) -> Path:
        return self.folder / "cgroup.procs"

    def cpu_ns(self) -> int:
        """CPU time of everything that ever ran in the group, in ns (-1 when it cannot be read)."""
        try:
            if not self.v2:
                return int((self.folder / "cpuacct.usage").read_text())
            for line in (self.folder / "cpu.stat").read_text().splitlines():
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) * 1000
        except (OSError, ValueError):
            pass
        return -1

    def pids(self) -> list[int]:
        """The processes in the group now."""
        try:
            return [int(item) for item in self.procs.read_text().split()]
        except (OSError, ValueError):
            return []

    def wrap(self, command: list[str], executable: str | None) -> list[str]:
        """``command`` (run as ``executable`` when given) preceded by joining this group."""
        program = executable or command[0]
        return ["/bin/sh", "-c", _JOIN, "kictl-join", "1", str(self.procs), program, *command[1:]]

    def joined(self, pid: int) -> bool:
        """Whether ``pid`` is in the group (a join that failed leaves the worker outside: the caller then
        drops the group and reads ``/proc``, rather than a counter of nothing)."""
        return pid in self.pids()

    def remove(self) -> None:
        """Remove the group (once its processes are gone; the kernel refuses otherwise, and it stays)."""
        with contextlib.suppress(OSError):
            self.folder.rmdir()
