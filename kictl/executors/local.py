"""``LocalPool``: one long-lived worker process per local device (``--devices``).

Each worker (``python -m kictl.executors.worker DEVICE``) opens its device
once and runs job after job, so a GPU's JIT caches stay warm for the whole
suite; one thread per worker reads its messages into one queue, which the
scheduler (``base.schedule``) drains as jobs finish.  Two entries may name the
same device (``cpu,cpu``: two CPU workers); on a GPU, one worker per device
is what keeps measurements apart.

``parse_devices`` turns ``--devices all|cuda:0,cuda:2|N`` into device names.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

from kictl import canon
from kictl.errors import EnvError, KictlError, UsageError
from kictl.executors.base import Executor, WorkerEvent
from kictl.executors.jobs import Job
from kictl.executors.seam import device_kind

#: Seconds a worker may take to open its device and report.
STARTUP_TIMEOUT_S = 300.0


def cuda_device_count() -> int:
    import torch  # GPU-only: imported when devices are counted (``--devices all``), never at start-up

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def parse_devices(text: str, device: str = "auto") -> list[str]:
    """Device names for ``--devices``: ``all`` (every CUDA GPU), ``N`` (N workers), or a comma list.

    ``N`` means the first N GPUs, or N CPU workers when ``--device cpu`` (or
    there is no GPU and ``--device auto``).  Every entry must be of one kind
    and agree with ``--device``.  Raises ``UsageError`` for bad text and
    ``EnvError`` for GPUs that are not there.
    """
    spec = text.strip().lower()
    wanted = device.strip().lower()
    if wanted != "auto":
        device_kind(wanted)
    if spec == "all":
        if wanted == "cpu":
            raise UsageError("--devices all means every GPU; use --devices N for N CPU workers")
        count = cuda_device_count()
        if count == 0:
            raise EnvError("--devices all: no CUDA GPU is available")
        return [f"cuda:{index}" for index in range(count)]
    if spec.isdigit():
        number = int(spec)
        if number < 1:
            raise UsageError("--devices N: N must be at least 1")
        if wanted == "cpu" or (wanted == "auto" and cuda_device_count() == 0):
            return ["cpu"] * number
        count = cuda_device_count()
        if number > count:
            raise EnvError(f"--devices {number}: there are {count} CUDA device(s)")
        return [f"cuda:{index}" for index in range(number)]
    names = [item.strip() for item in spec.split(",") if item.strip()]
    if not names:
        raise UsageError(f"--devices {text!r}: expected all, N, or a list such as cuda:0,cuda:2")
    names = ["cuda:0" if name == "cuda" else name for name in names]
    kinds = {device_kind(name) for name in names}
    if len(kinds) != 1:
        raise UsageError(f"--devices {text}: mix of CPU and GPU workers")
    if wanted != "auto" and kinds != {device_kind(wanted)}:
        raise UsageError(f"--devices {text} does not agree with --device {device}")
    gpus = [name for name in names if name != "cpu"]
    if len(set(gpus)) != len(gpus):
        raise UsageError(f"--devices {text}: a GPU is named twice (one worker per GPU keeps timings apart)")
    return names


def cpu_shares(workers: int) -> list[tuple[int, ...]]:
    """Disjoint CPU sets for ``workers`` CPU workers, from the last CPU down (CPU 0 takes interrupts).

    The bench pins its processes to the last CPUs it may use; without a share
    of its own every CPU worker would land on the same core.  Empty when
    there are fewer CPUs than workers (they then share, and say so by timing).
    """
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - Linux has it
        return []
    if workers < 2 or workers > len(allowed):
        return []
    size = len(allowed) // workers
    return [tuple(allowed[len(allowed) - (k + 1) * size : len(allowed) - k * size]) for k in range(workers)]


class _Worker:
    """One worker process and the thread that reads its messages."""

    def __init__(
        self,
        slot: str,
        device: str,
        log_dir: Path,
        events: queue.Queue[tuple[str, dict[str, Any]]],
        cpus: tuple[int, ...] = (),
    ):
        self.slot = slot
        self.device = device
        self.log_path = log_dir / f"{slot.replace(':', '_').replace('#', '_')}.log"
        self.log: IO[bytes] = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kictl.executors.worker", device, *([",".join(map(str, cpus))] if cpus else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
        )
        self.reader = threading.Thread(target=self._read, args=(events,), daemon=True)
        self.reader.start()

    def _read(self, events: queue.Queue[tuple[str, dict[str, Any]]]) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                message = canon.parse_json(line)
            except KictlError as exc:
                message = {"type": "device_error", "detail": f"unreadable message from the worker: {exc}"}
            if not isinstance(message, dict) or message.get("type") not in (
                "ready",
                "result",
                "job_error",
                "device_error",
            ):
                message = {"type": "device_error", "detail": "the worker sent something that is no message"}
            events.put((self.slot, message))
        code = self.process.wait()
        events.put((self.slot, {"type": "exited", "detail": f"the worker exited ({code}): {self.tail()}"}))

    def tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "no log"
        kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
        return " | ".join(kept) if kept else "no log"

    def send(self, text: str) -> bool:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(text.encode("utf-8") + b"\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            return False
        return True

    def stop(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            try:
                self.process.stdin.close()
            except OSError:
                pass
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


class LocalPool(Executor):
    """One long-lived worker process per entry of ``devices`` (``["cuda:0", "cuda:1"]``, ``["cpu", "cpu"]``)."""

    def __init__(self, devices: list[str], *, log_dir: Path | None = None) -> None:
        if not devices:
            raise UsageError("a local pool needs at least one device")
        super().__init__()
        self.devices = list(devices)
        self._scratch = tempfile.TemporaryDirectory(prefix="kictl-pool-") if log_dir is None else None
        self.log_dir: Path = Path(self._scratch.name) if self._scratch is not None else Path(str(log_dir))
        self._events: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
        self._workers: dict[str, _Worker] = {}

    @staticmethod
    def slot_names(devices: list[str]) -> list[str]:
        """``cuda:1`` for a GPU, ``cpu#0``, ``cpu#1`` for CPU workers."""
        counts: dict[str, int] = {}
        names = []
        for device in devices:
            number = counts.get(device, 0)
            counts[device] = number + 1
            names.append(f"{device}#{number}" if device == "cpu" or number else device)
        return names

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        shares = cpu_shares(self.devices.count("cpu"))
        for slot, device in zip(self.slot_names(self.devices), self.devices, strict=True):
            cpus = shares.pop(0) if device == "cpu" and shares else ()
            self._workers[slot] = _Worker(slot, device, self.log_dir, self._events, cpus)
        waiting = set(self._workers)
        while waiting:
            try:
                slot, message = self._events.get(timeout=STARTUP_TIMEOUT_S)
            except queue.Empty:
                for slot in waiting:
                    self.failed_at_start[slot] = f"no answer in {STARTUP_TIMEOUT_S:.0f} s"
                    self._workers.pop(slot).process.kill()
                break
            if slot not in waiting:
                continue
            waiting.discard(slot)
            if not self._started(slot, message, "the worker did not start"):
                self._workers.pop(slot).stop()
        self._require_a_worker("worker of the local pool")

    def submit(self, slot: str, job: Job, payload: str) -> None:
        if not self._workers[slot].send(payload):
            self._events.put((slot, {"type": "device_error", "detail": "the worker is gone (broken pipe)"}))

    def next_event(self) -> WorkerEvent:
        while True:
            slot, message = self._events.get()
            if slot not in self._environments:
                continue  # a worker already taken out of the pool
            kind = message["type"]
            if kind == "result" and isinstance(message.get("records"), list):
                return WorkerEvent(slot, "result", records=tuple(message["records"]))
            if kind == "job_error":
                return WorkerEvent(slot, "job_error", detail=str(message.get("detail", "")))
            self._retire(slot)
            return WorkerEvent(slot, "device_error", detail=str(message.get("detail", "")))

    def _retire(self, slot: str) -> None:
        self._environments.pop(slot, None)
        worker = self._workers.pop(slot, None)
        if worker is not None:
            worker.process.kill()
            worker.stop()

    def close(self) -> None:
        for worker in self._workers.values():
            worker.stop()
        self._workers.clear()
        self._environments.clear()
        if self._scratch is not None:
            self._scratch.cleanup()


__all__ = ["LocalPool", "parse_devices"]
