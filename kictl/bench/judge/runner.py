"""Worker processes, seen from kictl's parent: start, ask, wait with a deadline, end (DESIGN §7).

Each implementation (and kictl's own reference) runs in a worker process of
its own, ``python -m kictl.bench.worker``, inside the sandbox ``sandbox``
describes.  The parent talks to it over two pipes with ``wire`` frames and
nothing else: what comes back is parsed as data against the message types
the parent expects at that point, never unpickled or executed.

``request`` sends one message and waits for its answer until a deadline.
How a request can end, besides its answer:

* ``ImplementationFailed``: the worker said the implementation failed
  (``compile_error``, ``runtime_error``) and exits;
* ``WorkerGone``: the worker died (a segfault, ``os._exit``, an
  out-of-memory kill), went silent past the deadline (it is killed with its
  sandbox), or broke the wire (a frame that is not one, a message out of
  place: ``kind`` is ``protocol`` and the run fails ``wireIntact``).

The parent also reads what the OS says about the worker, which the worker
cannot forge: its CPU time (``/proc/<pid>/stat`` of every process in its
sandbox), its threads (``/proc/<pid>/task``) and the processes left in its
sandbox.

This module is over 600 lines because a worker's process is one object seen from one side: starting it in
its sandbox, its limits (memory, tasks, tmpfs, log, CPUs: issue 40), the deadline of each request and what
the OS says of it; split, each part would need the others' private state.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import resource
import secrets
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kictl.bench import wire
from kictl.bench.judge import cgroup, sandbox
from kictl.errors import EnvError
from kictl.families.gpus import normalize_product  # the worker holds no GPU table: the parent names its product

TIMEOUT = "timeout"
CRASHED = "crashed"
PROTOCOL = "protocol"
TAIL_LINES = 25
#: While the parent waits longer than this for an answer, it says so (when told to report progress).
HEARTBEAT_S = 10.0
#: How long a worker that timed out gets to write its stacks to its log before it is killed.
STACK_DUMP_WAIT_S = 0.5
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class _Log:
    """A worker's stdout and stderr: a pipe that a thread of the parent drains into the log file, up to
    ``cap`` bytes. Past it the parent closes its end (the worker's writes then fail) and ``exceeded`` is set:
    a worker cannot fill kictl's disk, nor make the parent read without end."""

    def __init__(self, path: Path, cap: int) -> None:
        self.path = path
        self.cap = cap
        self.exceeded = False
        read_end, self.write_end = os.pipe()
        self.thread = threading.Thread(target=self._drain, args=(read_end,), name="kictl-worker-log", daemon=True)
        self.thread.start()

    def _drain(self, fd: int) -> None:
        written = 0
        try:
            with open(self.path, "ab") as log:
                while True:
                    try:
                        data = os.read(fd, 65536)
                    except OSError:
                        return
                    if not data:
                        return
                    if written + len(data) > self.cap:
                        log.write(data[: self.cap - written])
                        self.exceeded = True
                        return
                    log.write(data)
                    log.flush()
                    written += len(data)
        except OSError:
            return
        finally:
            os.close(fd)

    def close_writer(self) -> None:
        """The parent's copy of the writing end, once the worker holds its own."""
        if self.write_end >= 0:
            with contextlib.suppress(OSError):
                os.close(self.write_end)
            self.write_end = -1

    def join(self, timeout: float) -> None:
        self.close_writer()
        self.thread.join(timeout)


class WorkerGone(Exception):
    """The worker cannot answer any more: ``kind`` is timeout, crashed or protocol."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


class ImplementationFailed(Exception):
    """The worker reported that the implementation failed (``status``: compile_error or runtime_error)."""

    def __init__(self, status: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True, slots=True)
class ProcessView:
    """What the OS shows of a worker's sandbox at one moment."""

    cpu_ticks: int
    threads: int
    processes: tuple[int, ...]
    #: time on a CPU of every live thread in the sandbox, in ns (``/proc/<pid>/task/<tid>/schedstat``)
    cpu_ns: int = 0


def log_tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last lines of a worker's log ('' when it wrote nothing), made printable."""
    try:
        with path.open("rb") as log:  # the tail alone: a worker's log may be as large as its cap
            log.seek(max(0, log.seek(0, os.SEEK_END) - 64 * 1024))
            data = log.read(64 * 1024)
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return wire.clean_text("\n".join(text.rstrip().splitlines()[-lines:]), 4000)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "the worker did not exit"
    if code < 0:
        try:
            return f"the worker was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"the worker was killed by signal {-code}"
    if code > 128:
        try:
            return f"the worker was killed by {signal.Signals(code - 128).name}"
        except ValueError:
            pass
    return f"the worker exited with status {code}"


def _proc_text(path: str) -> str:
    """A small ``/proc`` file's text (read on every timed call: no ``Path``, no buffered file). Raises ``OSError``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 65536).decode("ascii", errors="replace")
    finally:
        os.close(fd)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            text = _proc_text(f"/proc/{pid}/task/{task}/children")
        except OSError:
            continue
        found.extend(int(item) for item in text.split())
    return found


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (``/proc/<pid>/task/*/children``, recursively)."""
    found: list[int] = []
    queue = _children(pid)
    while queue:
        child = queue.pop()
        if child in found:
            continue
        found.append(child)
        queue.extend(_children(child))
    return found


def cpu_ns_live(pid: int) -> int:
    """Time on a CPU of the live threads of ``pid`` in ns (``schedstat``'s first field); 0 if unreadable."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for task in tasks:
        try:
            total += int(_proc_text(f"/proc/{pid}/task/{task}/schedstat").split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


def _cpu_list(text: str) -> set[int]:
    """``0-3,8`` as {0, 1, 2, 3, 8}."""
    found: set[int] = set()
    for part in text.strip().split(","):
        low, _, high = part.partition("-")
        with contextlib.suppress(ValueError):
            found.update(range(int(low), int(high or low) + 1))
    return found


def _cpu_text(cpus: set[int]) -> str:
    return ",".join(map(str, sorted(cpus)))


def cpu_ticks(pid: int) -> int:
    """utime + stime of process ``pid`` (all its threads) in clock ticks; 0 when it is gone."""
    try:
        text = _proc_text(f"/proc/{pid}/stat")
    except OSError:
        return 0
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


class WorkerProcess:
    """One worker for one implementation (or the reference) on one device."""

    def __init__(
        self,
        label: str,
        device: str,
        log_dir: Path,
        isolation: sandbox.Isolation,
        *,
        cpus: tuple[int, ...] = (),
        threads: int = 1,
        startup_timeout: float = 300.0,
        progress: Callable[[str], None] | None = None,
        cupti: bool = True,
        keep_freed_memory: bool = False,
        limits: cgroup.Limits | None = None,
    ) -> None:
        #: told what the parent waits for, every ``HEARTBEAT_S`` of a long wait (``kictl bench --timings``)
        self.progress = progress
        self.asked = ""
        self.label = label
        self.device = device
        self.log_dir = log_dir
        self.isolation = isolation
        self.cpus = cpus
        self.threads = threads
        #: whether the worker attaches CUPTI on a GPU (kictl's reference workers time nothing: they do not)
        self.cupti = cupti
        #: whether the worker's malloc keeps freed memory (``worker.keep_freed_memory``; kictl's reference workers)
        self.keep_freed_memory = keep_freed_memory
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.fd_to: int | None = None
        self.fd_from: int | None = None
        #: memory shared with the worker for its large answers (``None``: everything through the pipe)
        self.region: wire.SharedRegion | None = None
        #: memory the parent stages the timed inputs in (CPU; ``staging``)
        self.inputs: wire.SharedRegion | None = None
        #: the cgroup every process of the worker's sandbox is in, where one could be made (``cgroup``)
        self.group: cgroup.SandboxGroup | None = None
        #: what the worker's sandbox may hold (issue 40), and the limits it ran into (``breaches``), kept when its
        #: group goes; cleared when it starts again
        self.limits = limits or cgroup.Limits.default()
        self.breached: list[str] = []
        self._log: _Log | None = None
        self.environment: dict[str, Any] | None = None
        self.pinned: tuple[tuple[int, ...], int] | None = None
        self.timers: tuple[str, ...] = ()
        #: kictl's folder for this worker's private copies of the JIT caches (sandbox.cache_binds)
        self.scratch: Path | None = None
        self.cupti_error: str | None = None
        self.dependencies_error: str | None = None
        self.worker_pid: int | None = None
        self.baseline_threads = 0
        #: the worker's threads (host tids) when it was ready, before any implementation was imported: kictl's own
        self.baseline_tids: frozenset[int] = frozenset()
        self.starts = 0
        #: the wire's round trip, measured before any implementation was imported
        self.pings_ns: list[int] = []
        #: whether the implementation is imported in the running worker
        self.loaded = False
        self._stop_sent = False
        #: the nonce of the request sent last (``None`` before the first: ``Ready`` answers none)
        self.nonce: int | None = None
        #: the most bytes an ``Outputs`` answer may carry (the driver sets it from the definition's outputs)
        self.output_limit = wire.MAX_BUFFER_BYTES

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.label}.{self.starts}.log"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> dict[str, Any]:
        """Start the worker and wait until it is ready; returns its environment.

        Raises ``EnvError`` when it cannot start (no device, a broken torch, a sandbox that fails).
        """
        self.spawn()
        return self.wait_ready()

    def spawn(self) -> None:
        """Start the worker's process without waiting for it (``wait_ready`` waits): workers start in parallel."""
        self.stop()
        self.starts += 1
        self.environment = None
        self.loaded = False
        self.nonce = None
        self.pings_ns = []
        self.log_dir.mkdir(parents=True, exist_ok=True)
        to_read, to_write = os.pipe()
        from_read, from_write = os.pipe()
        for fd in (to_write, from_write):  # room for a large output in fewer wake-ups (Linux; best effort)
            with contextlib.suppress(OSError, AttributeError):
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, wire.PIPE_BYTES)
        # the worker's large answers (outputs) come through memory shared with it alone (wire.SharedRegion)
        self.region = wire.SharedRegion.create(self.label)
        shared = [] if self.region is None else ["--fd-shared", str(self.region.fd)]
        # on the CPU the timed inputs live in memory the parent writes (kictl.bench.judge.staging)
        if self.device == "cpu":
            self.inputs = wire.SharedRegion.create(f"{self.label}-inputs", parent_writes=True)
        if self.inputs is not None:
            shared += ["--fd-inputs", str(self.inputs.fd)]
        self.scratch = self.log_dir.parent / f"scratch-{self.label}-{self.starts}"
        self.scratch.mkdir(parents=True, exist_ok=True)
        command, executable, inherited = sandbox.worker_command(
            self.isolation,
            cuda=self.device.startswith("cuda"),
            scratch=self.scratch,
            tmpfs_bytes=self.limits.tmpfs_bytes,
        )
        self.breached = []
        # every process the sandbox will hold joins one cgroup before bubblewrap runs (kictl.bench.judge.cgroup),
        # which holds its limits (memory, tasks)
        self.group = cgroup.SandboxGroup.create(f"{self.label}-{self.starts}", self.limits)
        if self.group is not None:
            command, executable = self.group.wrap(command, executable), None
        command += [
            "--fd-in",
            str(to_read),
            "--fd-out",
            str(from_write),
            "--device",
            self.device,
            "--cpus",
            ",".join(map(str, self.cpus)),
            "--threads",
            str(self.threads),
            *([] if self.cupti else ["--no-cupti"]),
            *(["--keep-freed-memory"] if self.keep_freed_memory else []),
            *shared,
        ]
        self._log = log = _Log(self.log_path, self.limits.log_bytes)
        try:
            self.process = subprocess.Popen(
                command,
                executable=executable,
                stdin=subprocess.DEVNULL,
                stdout=log.write_end,
                stderr=log.write_end,
                pass_fds=(
                    to_read,
                    from_write,
                    *inherited,
                    *(region.fd for region in (self.region, self.inputs) if region is not None),
                ),
                env=sandbox.worker_environment(self.isolation, self.threads),
                cwd="/",
                start_new_session=True,
            )
        except OSError as exc:
            for fd in (to_read, to_write, from_read, from_write, *inherited):
                os.close(fd)
            self._close_region()
            log.join(1.0)
            raise EnvError(f"cannot start the benchmark worker for {self.label}: {exc}") from exc
        log.close_writer()
        for fd in inherited:
            os.close(fd)
        os.close(to_read)
        os.close(from_write)
        self.fd_to, self.fd_from = to_write, from_read

    def wait_ready(self) -> dict[str, Any]:
        """Wait for a spawned worker's ``Ready``; returns its environment. Raises ``EnvError``."""
        if self.environment is not None and self.alive:
            return self.environment
        try:
            self.asked = "Ready (the worker's start: sandbox, Python, torch, the device)"
            ready = self._read(
                time.monotonic() + self.startup_timeout, frozenset({wire.Ready.TYPE}), self.startup_timeout
            )
            assert isinstance(ready, wire.Ready)
            env = json.loads(ready.environment)
            if not isinstance(env, dict):
                raise WorkerGone(PROTOCOL, "the worker's environment is not an object")
            hardware = env.get("hardware")
            if isinstance(hardware, dict) and isinstance(hardware.get("product"), str) and self.device != "cpu":
                hardware["product"] = normalize_product(hardware["product"])
        except (WorkerGone, ImplementationFailed, ValueError) as exc:
            self.stop()
            detail = getattr(exc, "detail", str(exc))
            raise EnvError(
                f"the benchmark worker for {self.label} did not start on {self.device}",
                details=[line for line in detail.splitlines()[-10:] if line],
            ) from None
        self.environment = env
        self.pinned = (ready.cpus, ready.threads)
        self.timers = ready.timers
        self.cupti_error = ready.cupti_error
        self.dependencies_error = ready.dependencies_error
        self.worker_pid = self._find_worker_pid()
        if self.group is not None and (self.worker_pid is None or not self.group.joined(self.worker_pid)):
            self.group.remove()  # the join failed here (a hierarchy that refuses it): /proc's counters instead
            self.group = None
        if (self.group is None or "memory" not in self.group.enforced) and self.device == "cpu":
            self._rlimit_memory()
        self._pin_sandbox_helpers(ready.cpus)
        self.baseline_threads = self.view().threads
        self.baseline_tids = frozenset(self.thread_times())
        return env

    def _pin_sandbox_helpers(self, cpus: tuple[int, ...]) -> None:
        """bubblewrap's own processes (outside and inside the namespace) on the worker's CPUs: they wake when
        the worker stops itself at each CPU call's return and goes on (``SIGCHLD``, ``judge.taken``), and
        that work is the sandbox's, counted on the CPUs it was given."""
        if not self.isolation.sandboxed or not cpus or self.process is None:
            return
        for pid in (self.process.pid, *descendants(self.process.pid)):
            if pid != self.worker_pid:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(pid, cpus)

    def _find_worker_pid(self) -> int | None:
        """The Python worker's host pid: the process itself, or the deepest one in a fresh sandbox."""
        assert self.process is not None
        if not self.isolation.sandboxed:
            return self.process.pid
        chain = [self.process.pid]
        while True:
            children = _children(chain[-1])
            if len(children) != 1:
                break
            chain.append(children[0])
        return chain[-1] if len(chain) > 1 else None

    def _rlimit_memory(self) -> None:
        """Where no cgroup holds the memory limit: ``RLIMIT_DATA`` (private writable memory, the heap and every
        tensor's) on every process of the sandbox, before the implementation is imported (CPU workers only: a
        CUDA driver's reservations would count)."""
        assert self.process is not None
        for pid in (self.process.pid, *descendants(self.process.pid)):
            with contextlib.suppress(OSError, ValueError):
                resource.prlimit(pid, resource.RLIMIT_DATA, (self.limits.memory_bytes, self.limits.memory_bytes))

    def breaches(self) -> list[str]:
        """The limits the worker's sandbox ran into (``resource_limit``): memory and tasks as its cgroup counted
        them, its ``/tmp`` full, its log past its cap; kept from before it was stopped."""
        found = list(self.breached)
        if self.group is not None:
            found += [item for item in self.group.breaches() if item not in found]
        if self._log is not None and self._log.exceeded:
            text = f"log: the worker wrote more than its limit of {cgroup._size(self.limits.log_bytes)}"
            if text not in found:
                found.append(text)
        if self.isolation.sandboxed and self.worker_pid is not None:
            for folder in ("/tmp", "/dev/shm"):
                with contextlib.suppress(OSError):
                    tmp = os.statvfs(f"/proc/{self.worker_pid}/root{folder}")
                    if (tmp.f_blocks - tmp.f_bfree) * tmp.f_frsize >= self.limits.tmpfs_bytes - cgroup.MIB:
                        text = (
                            f"tmpfs: the worker's {folder} is full at its limit of "
                            f"{cgroup._size(self.limits.tmpfs_bytes)}"
                        )
                        if text not in found:
                            found.append(text)
        return found

    def pin_sandbox(self, cpus: tuple[int, ...]) -> None:
        """Pin bubblewrap's own processes of the sandbox to ``cpus`` too (the worker pins its threads at ``Arm``):
        they wake at the worker's stops and signals, and their CPU time is the sandbox's, counted per CPU."""
        if self.process is None or not cpus:
            return
        for pid in (self.process.pid, *descendants(self.process.pid)):
            if pid == self.worker_pid:
                continue
            with contextlib.suppress(OSError):
                for task in os.listdir(f"/proc/{pid}/task"):
                    with contextlib.suppress(OSError, ValueError):
                        os.sched_setaffinity(int(task), set(cpus))

    def cpu_ns_per_cpu(self) -> dict[int, int] | None:
        """The sandbox's CPU time per CPU (``cgroup.SandboxGroup.cpu_ns_per_cpu``), ``None`` where none is kept."""
        return self.group.cpu_ns_per_cpu() if self.group is not None else None

    def quiet(self, idle: bool) -> None:
        """While another worker's call is timed, this one's CPU share is idle (``cgroup.SandboxGroup.quiet``)."""
        if self.group is not None:
            self.group.quiet(idle)

    def cpus_outside(self, given: tuple[int, ...]) -> str | None:
        """A thread of the worker allowed on a CPU it was not given (its affinity, from ``/proc``), or ``None``.
        Other processes of the sandbox are ``noProcessesLeft``'s; the CPU time of any, exited ones included, is
        counted per CPU where the cgroup keeps it (``cpu_ns_per_cpu``)."""
        if self.worker_pid is None or not given:
            return None
        wanted = set(given)
        try:
            tasks = os.listdir(f"/proc/{self.worker_pid}/task")
        except OSError:
            return None
        for task in tasks:
            try:
                text = _proc_text(f"/proc/{self.worker_pid}/task/{task}/status")
            except OSError:
                continue
            start = text.find("Cpus_allowed_list:")
            if start < 0:
                continue
            allowed = _cpu_list(text[start + len("Cpus_allowed_list:") :].split("\n", 1)[0])
            if allowed - wanted:
                return (
                    f"a thread of the worker was allowed on CPU(s) {_cpu_text(allowed)}; "
                    f"it was given {_cpu_text(wanted)}"
                )
        return None

    def view(self) -> ProcessView:
        """CPU time, threads of the worker, and the other processes in its sandbox, as the OS shows them."""
        if self.process is None:
            return ProcessView(0, 0, ())
        root = self.process.pid
        tree = [root, *descendants(root)]
        ticks = sum(cpu_ticks(pid) for pid in tree)
        live_ns = sum(cpu_ns_live(pid) for pid in tree)
        threads = 0
        if self.worker_pid is not None:
            with contextlib.suppress(OSError):
                threads = len(os.listdir(f"/proc/{self.worker_pid}/task"))
        others = tuple(pid for pid in tree[1:] if pid != self.worker_pid and not self._is_sandbox_init(pid))
        return ProcessView(ticks, threads, others, live_ns)

    def process_count(self) -> int:
        """Processes in the worker's sandbox besides the worker and bubblewrap's own (``/proc`` only, no CPU
        reads): another process there could do a call's work unseen by the worker's thread count."""
        if self.process is None:
            return 0
        return sum(
            1 for pid in descendants(self.process.pid) if pid != self.worker_pid and not self._is_sandbox_init(pid)
        )

    #: the parent takes each CPU timed call's outputs from this process's memory at the call's return
    #: (``judge.taken``): a real process always offers that
    takes_outputs = True

    def thread_count(self) -> int:
        """The worker's thread count (``/proc/<pid>/task``): one directory listing, for every timed call."""
        if self.worker_pid is None:
            return 0
        try:
            return len(os.listdir(f"/proc/{self.worker_pid}/task"))
        except OSError:
            return 0

    def thread_times(self) -> dict[int, int]:
        """Time on a CPU of each live thread of the worker, by its host tid, in ns (``/proc/<pid>/task/<tid>/
        schedstat``, which the worker cannot forge); empty when it cannot be read."""
        if self.worker_pid is None:
            return {}
        try:
            tasks = os.listdir(f"/proc/{self.worker_pid}/task")
        except OSError:
            return {}
        found = {}
        for task in tasks:
            try:
                found[int(task)] = int(_proc_text(f"/proc/{self.worker_pid}/task/{task}/schedstat").split()[0])
            except (OSError, ValueError, IndexError):
                continue  # a thread that ended
        return found

    def cpu_ns(self) -> int:
        """Time on a CPU of everything that ran in the worker's sandbox, in ns: its cgroup's counter (processes
        that have exited included), else every live thread's (``/proc``)."""
        if self.process is None:
            return 0
        if self.group is not None:
            used = self.group.cpu_ns()
            if used >= 0:
                return used
        root = self.process.pid
        return sum(cpu_ns_live(pid) for pid in (root, *descendants(root)))

    def _is_sandbox_init(self, pid: int) -> bool:
        """bubblewrap's own process inside the namespace (the worker's parent)."""
        if not self.isolation.sandboxed or self.worker_pid is None:
            return False
        try:
            text = Path(f"/proc/{self.worker_pid}/stat").read_text()
        except OSError:
            return False
        return int(text[text.rindex(")") + 2 :].split()[1]) == pid

    def request(self, message: wire.Message, timeout: float, expect: frozenset[str]) -> wire.Message:
        """Send ``message``, return the answer (one of the ``expect`` types) within ``timeout`` seconds.

        Raises ``ImplementationFailed`` or ``WorkerGone`` (the worker is then stopped).
        """
        self.send(message)
        return self.receive(timeout, expect)

    def send(self, message: wire.Message) -> None:
        """Send ``message`` without waiting for its answer (``receive`` waits): the worker gets on with it
        while the parent does something else.  Raises ``WorkerGone``."""
        if not self.alive or self.fd_to is None:
            self.start()
        assert self.fd_to is not None
        self.asked = message.TYPE
        # a fresh nonce per request: its answer must echo it, so no answer can be written before it was asked
        self.nonce = 1 + secrets.randbelow(wire.NONCE_LIMIT - 1)
        try:
            wire.write_frame(self.fd_to, message, nonce=self.nonce)
        except OSError as exc:
            raise self._gone(CRASHED, f"cannot send to the worker: {exc.strerror}") from None

    def receive(self, timeout: float, expect: frozenset[str]) -> wire.Message:
        """The answer to the request ``send`` sent, within ``timeout`` seconds from now.

        Raises ``ImplementationFailed`` or ``WorkerGone`` (the worker is then stopped).
        """
        if self.fd_from is None:
            raise WorkerGone(CRASHED, "the worker is not running")
        return self._read(time.monotonic() + timeout, expect | {wire.Failed.TYPE, wire.HarnessError.TYPE}, timeout)

    def _await(self, deadline: float) -> None:
        """Wait until the worker's answer starts to arrive or ``deadline`` passes, saying every
        ``HEARTBEAT_S`` what is awaited (so that a stall shows where it is)."""
        if self.progress is None or self.fd_from is None:
            return
        began = time.monotonic()
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or select.select([self.fd_from], [], [], min(left, HEARTBEAT_S))[0]:
                return
            self.progress(
                f"{self.label}: still waiting for the answer to {self.asked or 'a request'} "
                f"({time.monotonic() - began:.0f} s; the limit is {deadline - began:.0f} s)"
            )

    def _read(self, deadline: float, expect: frozenset[str], timeout: float | None = None) -> wire.Message:
        assert self.fd_from is not None
        try:
            self._await(deadline)
            # only outputs carry buffers, and no more than the definition's outputs could need (output_limit)
            most = self.output_limit if wire.Outputs.TYPE in expect else 0
            answer = wire.read_frame(
                self.fd_from, expect, deadline, self.region, nonce=self.nonce, max_buffer_bytes=most
            )
        except wire.WireTimeout:
            limit = f"{timeout:g} s" if timeout is not None else "the deadline"
            asked = f" to {self.asked}" if self.asked else ""
            raise self._gone(TIMEOUT, f"no answer within {limit}{asked}; the worker was stopped") from None
        except wire.PeerClosed:
            raise self._gone(CRASHED, "") from None
        except wire.WireError as exc:
            raise self._gone(PROTOCOL, f"the worker broke the wire protocol: {exc}") from None
        if isinstance(answer, wire.Failed):
            self.stop()
            status = answer.status if answer.status in wire.STATUSES_FROM_WORKER else "runtime_error"
            raise ImplementationFailed(status, answer.detail)
        if isinstance(answer, wire.HarnessError):
            self.stop()
            raise WorkerGone(CRASHED, f"kictl's worker failed before the implementation ran: {answer.detail}")
        return answer

    def _gone(self, kind: str, detail: str) -> WorkerGone:
        code = None
        if kind == TIMEOUT:
            self._dump_stacks()
        if self.process is not None:
            if kind == CRASHED:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=5)
            code = self.process.poll()
        self.kill()
        if kind == CRASHED:
            detail = "; ".join(part for part in (detail, _describe_exit(code)) if part)
        logged = log_tail(self.log_path)
        return WorkerGone(kind, f"{detail}\n{logged}".strip())

    def _dump_stacks(self) -> None:
        """Ask a silent worker where it is: its Python stacks go to its log (faulthandler on ``SIGUSR1``),
        whose tail the timeout's detail shows.  Diagnostic text only; nothing is judged by it."""
        if self.process is None or self.process.poll() is not None:
            return
        pid = self.worker_pid or self._find_worker_pid()
        if pid is None:
            return
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGUSR1)
            time.sleep(STACK_DUMP_WAIT_S)

    def _close_region(self) -> None:
        if self.inputs is not None:
            with contextlib.suppress(OSError, BufferError, ValueError):
                self.inputs.close()
            self.inputs = None
        if self.region is not None:
            with contextlib.suppress(OSError, BufferError):
                self.region.close()
            self.region = None

    def kill(self) -> None:
        """End the worker, its sandbox and what it started (its process group)."""
        if self.process is None:
            return
        pid = self.process.pid
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        self.breached = self.breaches()  # before its group and its /tmp go
        if self._log is not None:
            self._log.join(1.0)
        if self.group is not None:
            # whatever is left in the group (an unsandboxed worker's daemon that left its process group)
            for left in self.group.pids():
                with contextlib.suppress(OSError):
                    os.kill(left, signal.SIGKILL)
            deadline = time.monotonic() + 2
            while self.group.pids() and time.monotonic() < deadline:
                time.sleep(0.01)
            self.group.remove()
            self.group = None
        for fd in (self.fd_to, self.fd_from):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._close_region()
        self.fd_to = self.fd_from = None
        self.process = None
        self.worker_pid = None
        self._stop_sent = False

    def stop(self) -> None:
        """Ask the worker to finish, then make sure it has (and drop its private cache copies)."""
        self.ask_to_stop()
        self._stop()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def ask_to_stop(self) -> None:
        """Send ``Stop`` without waiting for the worker to end (``stop`` waits): several workers end together.

        A worker that never said ``Ready`` is still starting and would read nothing: it is killed now.
        """
        if self.process is None or self.process.poll() is not None:
            return
        if self.environment is None:
            self.kill()
            return
        if self.fd_to is not None and not self._stop_sent:
            with contextlib.suppress(OSError):
                wire.write_frame(self.fd_to, wire.Stop())
            self._stop_sent = True

    def _stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None and self._stop_sent:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
        self.kill()
