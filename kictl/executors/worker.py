"""The long-lived worker of one device: ``python -m kictl.executors.worker DEVICE``.

It opens the device once, reports the device's environment, then runs one
job at a time as the parent sends them, and answers each with one message.
The wire is JSON lines on a private copy of the original stdout (the worker's
own stdout and stderr go to stderr, so nothing a library prints can be taken
for a message); data only, never pickled objects.

Messages to the parent::

    {"type": "ready", "environment": {...}, "protocolContext": {...}}   # once, at start
    {"type": "result", "records": [...]}           # a job's records
    {"type": "job_error", "detail": "..."}         # the job cannot be judged; the worker goes on
    {"type": "device_error", "detail": "..."}      # the device cannot be used; the worker exits

Messages from the parent: a JobPayload's JSON, one a line; end of input stops it.

``handle`` is the same step for every executor (a Ray actor calls it too).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any, TextIO

from kictl.errors import EnvError, KictlError
from kictl.executors import seam
from kictl.executors.jobs import JobPayload


def ready(device: str) -> dict[str, Any]:
    """The ``ready`` message of a worker on ``device``, or a ``device_error`` one."""
    try:
        environment = seam.capture_environment(device)
        return {"type": "ready", "environment": environment, "protocolContext": seam.protocol_context(device)}
    except Exception as exc:  # a device that cannot be opened is a device failure, whatever raised
        return {"type": "device_error", "detail": _detail(exc)}


def handle(payload_text: str, device: str) -> dict[str, Any]:
    """Run one job's payload on ``device``: the message to send back."""
    try:
        payload = JobPayload.from_json(payload_text)
        records = seam.run_job(payload, device)
    except EnvError as exc:
        return {"type": "device_error", "detail": _detail(exc)}
    except KictlError as exc:
        return {"type": "job_error", "detail": _detail(exc)}
    except Exception as exc:  # kictl's own bug or a broken device: the job is retried elsewhere once
        return {"type": "device_error", "detail": f"{_detail(exc)}\n{traceback.format_exc(limit=5)}"}
    return {"type": "result", "records": records}


def _detail(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


def _send(channel: TextIO, message: dict[str, Any]) -> None:
    channel.write(json.dumps(message, allow_nan=False, separators=(",", ":")) + "\n")
    channel.flush()


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: python -m kictl.executors.worker DEVICE [CPU,CPU...]", file=sys.stderr)
        return 2
    device = argv[0]
    if len(argv) == 2:  # this worker's share of the CPUs: the bench pins its own workers inside it
        os.sched_setaffinity(0, {int(cpu) for cpu in argv[1].split(",")})
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    hello = ready(device)
    _send(channel, hello)
    if hello["type"] != "ready":
        return 3
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            answer = handle(line, device)
            _send(channel, answer)
            if answer["type"] == "device_error":
                return 3
        return 0
    finally:
        seam.close_workers()  # the bench workers its jobs kept (kictl.executors.seam.kept_workers)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
