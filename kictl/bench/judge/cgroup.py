"""A cgroup per worker sandbox: its CPU time, its limits, and its priority while a neighbour is timed (issues 27, 40).

The parent makes a group for each worker before it starts (``SandboxGroup.create``), and the worker's first
process joins it before it executes bubblewrap (``wrap``: a ``/bin/sh`` line that writes its own pid into
the group and then ``exec``s the command), so every process the sandbox ever holds is in it.  The group's
CPU counter keeps the time of processes that have exited, which ``/proc``'s per-thread counters lose; its
process list shows every process in it.

The group also holds the worker's limits (``Limits``, set by the parent before the worker exists, out of the
sandbox's reach: its ``/sys`` is read-only and its user owns nothing there):

* memory (``memory.max`` / v1 ``memory.limit_in_bytes``, swap included): past it the kernel kills a process
  of the sandbox, and the group counts the kill (``oom_kill``), which ``breaches`` reports;
* tasks, processes and threads together (``pids.max``): past it ``fork`` and ``clone`` fail, and the group
  counts the refusal (``pids.events``' ``max``);
* the CPU's priority (``cpu.idle``): while another worker's call is timed, kictl's parent marks every other
  worker's group idle (``quiet``), so what a neighbour runs then (a signal handler, a timer) gets the CPU
  only when the timed worker does not want it, and never preempts it.

Both hierarchies are handled: cgroup v2 (the lent GPU machines: one folder, ``cpu.stat``'s ``usage_usec``), and
v1 (the development machines and CI: one folder per controller, ``cpuacct.usage``), each under the group kictl's
own process is in.  Where neither can be made (not root, no writable hierarchy) there is no group: kictl reads
``/proc`` for the CPU time, and the runner sets what rlimits can bound instead (``runner``).  A controller that
cannot be used (v2 with the controller not delegated) leaves that limit unenforced, and ``enforced`` says which are.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
#: The shell line that joins the groups named by its arguments, then executes the rest of them.
_JOIN = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ 2>/dev/null > "$1"; shift; n=$((n - 1)); done; exec "$@"'
MIB = 1 << 20
GIB = 1 << 30
#: Tasks (processes and threads together) a worker's sandbox may hold: torch's pools, CUDA's and CUPTI's threads
#: and a JIT compiler's processes fit many times over; a fork bomb does not.
DEFAULT_TASKS = 512
#: The worker's private ``/tmp`` (a tmpfs, whose pages are memory): its sources, a JIT's build files.
DEFAULT_TMPFS_BYTES = 2 * GIB
#: The worker's log (its stdout and stderr): warnings and a stack dump fit; past it the parent stops reading.
DEFAULT_LOG_BYTES = 16 * MIB
#: The least memory a worker is given (torch's import alone takes about 400 MB).
MIN_MEMORY_BYTES = 1 * GIB


def _memory_total() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 16 * GIB


@dataclass(frozen=True, slots=True)
class Limits:
    """What one worker's sandbox may hold.  ``default`` is what ``kictl bench`` sets."""

    memory_bytes: int
    tasks: int = DEFAULT_TASKS
    tmpfs_bytes: int = DEFAULT_TMPFS_BYTES
    log_bytes: int = DEFAULT_LOG_BYTES

    @classmethod
    def default(cls) -> Limits:
        """Half the machine's memory per worker (at least ``MIN_MEMORY_BYTES``), the other defaults above."""
        return cls(memory_bytes=max(MIN_MEMORY_BYTES, _memory_total() // 2))

    def describe(self) -> str:
        return (
            f"memory {_size(self.memory_bytes)}, {self.tasks} tasks, /tmp {_size(self.tmpfs_bytes)}, "
            f"log {_size(self.log_bytes)}"
        )


def _size(value: int) -> str:
    return f"{value / GIB:g} GiB" if value >= GIB and value % (GIB // 8) == 0 else f"{value / MIB:g} MiB"


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
    except OSError:
        return False
    return True


def _read_text(path: Path) -> str:
    """A cgroup file's text, through the OS's calls alone.

    kictl's parent reads a worker's counters (CPU time, per CPU, the limits' events) and flips its ``cpu.idle``
    several times per CPU timed call, for every worker of the session; through Python's file objects each read
    cost 37 us and each write 31 us on the 2-core VM, through ``os.open`` 10 us.  Nothing is held open between
    calls (a session of a hundred workers keeps its descriptors to its pipes and regions).  Raises ``OSError``."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = [os.read(fd, 65536)]
        while len(chunks[-1]) == 65536:  # the counters fit one read; a longer text is read to its end
            chunks.append(os.read(fd, 65536))
    finally:
        os.close(fd)
    return b"".join(chunks).decode("ascii", errors="replace")


def _write_bytes(path: Path, value: bytes) -> bool:
    """``value`` written to a cgroup file through the OS's calls alone (``_read_text``); False if refused."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        os.write(fd, value)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def _keyed(path: Path) -> dict[str, int]:
    """A flat keyed file (``memory.events``, ``pids.events``, v1's ``memory.oom_control``); {} if unreadable."""
    found: dict[str, int] = {}
    try:
        for line in _read_text(path).splitlines():
            parts = line.split()
            if len(parts) == 2:
                with contextlib.suppress(ValueError):
                    found[parts[0]] = int(parts[1])
    except OSError:
        pass
    return found


@dataclass
class SandboxGroup:
    """One worker's group: the folder its CPU time is read from, and how (v1: ns; v2: ``usage_usec``).

    ``folders`` holds every folder the worker joins (v1: one per controller; v2: ``folder`` alone);
    ``enforced`` the limits the kernel holds it to (``memory``, ``tasks``), ``idle_file`` where it is quieted.
    """

    folder: Path
    v2: bool
    folders: dict[str, Path] = field(default_factory=dict)
    limits: Limits | None = None
    enforced: tuple[str, ...] = ()
    idle_file: Path | None = None
    quieted: bool = False

    @classmethod
    def create(cls, label: str, limits: Limits | None = None) -> SandboxGroup | None:
        """A new, empty group below kictl's own, with ``limits`` where the controllers allow, or ``None`` where
        none can be made here."""
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
            group = cls(ROOT / "cpuacct" / v1["cpuacct"].lstrip("/") / name, False)
            wanted = ("cpuacct", "memory", "pids", "cpu")
            for controller in wanted:
                if controller not in v1 or not (ROOT / controller).is_dir():
                    continue
                folder = ROOT / controller / v1[controller].lstrip("/") / name
                if any(folder.resolve() == made.resolve() for made in group.folders.values()):
                    continue  # co-mounted controllers (cpu,cpuacct): one folder
                try:
                    folder.mkdir()
                except OSError:
                    if controller == "cpuacct":
                        return None
                    continue
                group.folders[controller] = folder
        elif v2_path is not None and (ROOT / "cgroup.controllers").exists():
            parent = ROOT / v2_path.lstrip("/")
            for controller in ("memory", "pids", "cpu"):  # best effort: refused where kictl's group holds processes
                _write(parent / "cgroup.subtree_control", f"+{controller}")
            group = cls(parent / name, True)
            try:
                group.folder.mkdir()
            except OSError:
                return None
            group.folders["unified"] = group.folder
        else:
            return None
        if group.cpu_ns() < 0:
            group.remove()
            return None
        group.limits = limits
        if limits is not None:
            group._apply(limits)
        idle = group._controller_folder("cpu") / "cpu.idle"
        group.idle_file = idle if idle.exists() else None
        return group

    def _controller_folder(self, controller: str) -> Path:
        return self.folder if self.v2 else self.folders.get(controller, self.folder)

    def _apply(self, limits: Limits) -> None:
        enforced = []
        memory = self._controller_folder("memory")
        if self.v2:
            if _write(memory / "memory.max", str(limits.memory_bytes)):
                _write(memory / "memory.swap.max", "0")
                enforced.append("memory")
        elif "memory" in self.folders and _write(memory / "memory.limit_in_bytes", str(limits.memory_bytes)):
            _write(memory / "memory.memsw.limit_in_bytes", str(limits.memory_bytes))  # no swap either
            enforced.append("memory")
        pids = self._controller_folder("pids")
        if (self.v2 or "pids" in self.folders) and _write(pids / "pids.max", str(limits.tasks)):
            enforced.append("tasks")
        self.enforced = tuple(enforced)

    @property
    def procs(self) -> Path:
        return self.folder / "cgroup.procs"

    def cpu_ns(self) -> int:
        """CPU time of everything that ever ran in the group, in ns (-1 when it cannot be read)."""
        try:
            if not self.v2:
                return int(_read_text(self.folder / "cpuacct.usage"))
            for line in _read_text(self.folder / "cpu.stat").splitlines():
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) * 1000
        except (OSError, ValueError):
            pass
        return -1

    def cpu_ns_per_cpu(self) -> dict[int, int] | None:
        """CPU time of everything that ever ran in the group, per CPU, in ns (v1's ``cpuacct.usage_percpu``);
        ``None`` where the hierarchy keeps no such counter (v2)."""
        if self.v2:
            return None
        try:
            return dict(enumerate(int(item) for item in _read_text(self.folder / "cpuacct.usage_percpu").split()))
        except (OSError, ValueError):
            return None

    def pids(self) -> list[int]:
        """The processes in the group now."""
        try:
            return [int(item) for item in self.procs.read_text().split()]
        except (OSError, ValueError):
            return []

    def wrap(self, command: list[str], executable: str | None) -> list[str]:
        """``command`` (run as ``executable`` when given) preceded by joining this group (every folder of it)."""
        program = executable or command[0]
        joins = [str(folder / "cgroup.procs") for folder in self.folders.values()] or [str(self.procs)]
        return ["/bin/sh", "-c", _JOIN, "kictl-join", str(len(joins)), *joins, program, *command[1:]]

    def joined(self, pid: int) -> bool:
        """Whether ``pid`` is in the group (a join that failed leaves the worker outside: the caller then
        drops the group and reads ``/proc``, rather than a counter of nothing)."""
        return pid in self.pids()

    def breaches(self) -> list[str]:
        """The limits the sandbox ran into, as the kernel counted them (``resource_limit`` details)."""
        if self.limits is None:
            return []
        found = []
        if "memory" in self.enforced:
            memory = self._controller_folder("memory")
            events = _keyed(memory / ("memory.events" if self.v2 else "memory.oom_control"))
            if events.get("oom_kill", 0) > 0:
                found.append(
                    f"memory: the sandbox reached its limit of {_size(self.limits.memory_bytes)} and the kernel "
                    f"killed {events['oom_kill']} of its processes"
                )
        if "tasks" in self.enforced:
            refused = _keyed(self._controller_folder("pids") / "pids.events").get("max", 0)
            if refused > 0:
                found.append(
                    f"processes: the sandbox reached its limit of {self.limits.tasks} tasks (processes and threads); "
                    f"{refused} fork(s) or thread(s) refused"
                )
        return found

    def quiet(self, idle: bool) -> None:
        """Mark the group's CPU share idle (``True``: it runs only when nothing else on its CPUs wants to) or
        normal again.  Written only when it changes."""
        if self.idle_file is not None and idle != self.quieted and _write_bytes(self.idle_file, b"1" if idle else b"0"):
            self.quieted = idle

    def remove(self) -> None:
        """Remove the group (once its processes are gone; the kernel refuses otherwise, and it stays)."""
        for folder in {*self.folders.values(), self.folder}:
            with contextlib.suppress(OSError):
                folder.rmdir()
