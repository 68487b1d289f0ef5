"""Worker processes with a timeout: the kictl side of ``worker.py`` (DESIGN §7: isolation).

Each implementation runs in a process of its own, started with
multiprocessing's ``spawn`` (a fresh interpreter: no state of kictl's, no
CUDA context inherited).  A job is sent over a pipe and its answer awaited
for at most the job's timeout.  A worker that raises reports it and exits;
one that dies (a segfault, ``os._exit``, an out-of-memory kill) closes the
pipe; one that hangs is killed with its whole process group when the time is
up.  Each case becomes an ``Outcome``; kictl itself survives all three, and
the next job starts a fresh worker.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kictl.bench import worker
from kictl.errors import EnvError

RESULT = "result"
FAILED = "failed"
TIMEOUT = "timeout"
CRASHED = "crashed"
HARNESS_ERROR = "harness_error"


@dataclass
class Outcome:
    """How a job ended: ``kind`` is result, failed, timeout, crashed or harness_error."""

    kind: str
    payload: Any = None
    detail: str | None = None


def log_tail(path: Path, lines: int = worker.TAIL_LINES) -> str:
    """The last lines of a worker's log ('' when it wrote nothing)."""
    try:
        data = path.read_bytes()[-64 * 1024 :]
    except OSError:
        return ""
    return worker.tail(data.decode("utf-8", errors="replace"), lines)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "the worker did not exit"
    if code < 0:
        try:
            return f"the worker was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"the worker was killed by signal {-code}"
    return f"the worker exited with status {code}"


class WorkerProcess:
    """One worker for one implementation (or the reference) on one device."""

    def __init__(self, label: str, device: str, log_dir: Path, *, startup_timeout: float = 300.0) -> None:
        self.label = label
        self.device = device
        self.log_dir = log_dir
        self.startup_timeout = startup_timeout
        self.process: Any = None
        self.conn: Any = None
        self.environment: dict[str, Any] | None = None
        self.starts = 0

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.label}.{self.starts}.log"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def start(self) -> dict[str, Any]:
        """Start the worker and wait until it is ready; returns its environment.

        Raises ``EnvError`` when it cannot start (no device, a broken torch).
        """
        self.stop()
        self.starts += 1
        self.log_dir.mkdir(parents=True, exist_ok=True)
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe(duplex=True)
        process = context.Process(
            target=worker.main, args=(theirs, self.device, str(self.log_path)), name=f"kictl-bench-{self.label}"
        )
        process.start()
        theirs.close()
        self.process, self.conn = process, ours
        answer = self._wait(self.startup_timeout, None)
        if answer.kind != RESULT or not isinstance(answer.payload, dict):
            self.stop()
            raise EnvError(
                f"the benchmark worker for {self.label} did not start on {self.device}",
                details=[line for line in (answer.detail or "").splitlines()[-10:] if line],
            )
        self.environment = answer.payload
        return answer.payload

    def run(self, job: dict[str, Any], timeout: float, on_progress: Callable[[str], None] | None = None) -> Outcome:
        """Send one job and wait at most ``timeout`` seconds for its answer."""
        if not self.alive:
            self.start()
        try:
            self.conn.send(("job", job))
        except (OSError, ValueError) as exc:
            self.stop()
            return Outcome(CRASHED, detail=f"cannot send the job to the worker: {exc}")
        outcome = self._wait(timeout, on_progress)
        if outcome.kind != RESULT:
            self.stop()
        return outcome

    def _wait(self, timeout: float, on_progress: Callable[[str], None] | None) -> Outcome:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                message = f"no answer within {timeout:g} s; the worker was stopped"
                logged = log_tail(self.log_path)
                return Outcome(TIMEOUT, detail=f"{message}\n{logged}".strip())
            try:
                ready = self.conn.poll(min(remaining, 0.5))
            except (OSError, EOFError):
                ready = True
            if not ready:
                if not self.process.is_alive():
                    return self._crashed()
                continue
            try:
                kind, payload = self.conn.recv()
            except (EOFError, OSError):
                return self._crashed()
            if kind == "progress":
                if on_progress is not None:
                    on_progress(str(payload))
                continue
            if kind in ("ready", "result"):
                return Outcome(RESULT, payload)
            if kind == "failed":
                return Outcome(FAILED, payload, detail=str(payload.get("detail", "")))
            return Outcome(HARNESS_ERROR, detail=f"{payload}\n{log_tail(self.log_path)}".strip())

    def _crashed(self) -> Outcome:
        self.process.join(timeout=10)
        code = self.process.exitcode
        self.kill()
        logged = log_tail(self.log_path)
        return Outcome(CRASHED, detail=f"{_describe_exit(code)}\n{logged}".strip())

    def kill(self) -> None:
        """End the worker and what it started (its process group)."""
        if self.process is None:
            return
        pid = self.process.pid
        if pid is not None and self.process.is_alive():
            with contextlib.suppress(OSError):
                if os.getpgid(pid) == pid:
                    os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                self.process.kill()
        self.process.join(timeout=10)

    def stop(self) -> None:
        """Ask the worker to finish, then make sure it has."""
        if self.process is None:
            return
        if self.process.is_alive() and self.conn is not None:
            with contextlib.suppress(OSError, ValueError, BrokenPipeError):
                self.conn.send(("stop", None))
            self.process.join(timeout=5)
        self.kill()
        with contextlib.suppress(OSError):
            self.conn.close()
        self.process, self.conn = None, None
