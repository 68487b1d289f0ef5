"""The integrity checks' names and outcomes, as both sides of the wire use them (DESIGN §7).

The worker names a check in its evidence (``wire.Note``); kictl's parent judges each one and records it in the
run as ``{result: passed|failed|skipped, detail}``.  What each check catches is in ``kictl.bench.worker.integrity``
and docs/bench.md.  The poison (``POISON_BYTE``) is laid by the worker in memory a call's outputs may get and
looked for by the parent (``poisoned_elements``); the thread count (``os_threads``) is read by both.
"""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Any

from kictl.bench.wire.lazy import torch_module

PASSED = "passed"
FAILED = "failed"
SKIPPED = "skipped"
POISON_BYTE = 0xFF


class Check(StrEnum):
    """Every integrity check, by the name a run records it under: the one list, used everywhere."""

    INPUTS_UNCHANGED = "inputsUnchanged"
    OUTPUTS_NOT_ALIAS_INPUTS = "outputsNotAliasInputs"
    OUTPUTS_FULLY_WRITTEN = "outputsFullyWritten"
    OUTPUTS_FRESH = "outputsFresh"
    TIMED_OUTPUTS_CORRECT = "timedOutputsCorrect"
    PLAIN_TENSOR_OUTPUTS = "plainTensorOutputs"
    NO_THREADS_LEFT = "noThreadsLeft"
    NO_PROCESSES_LEFT = "noProcessesLeft"
    STREAM_ORDERED = "streamOrdered"
    TIMER_NOT_PATCHED = "timerNotPatched"
    SAMPLES_CONSISTENT = "samplesConsistent"
    NO_WORK_OUTSIDE_CALLS = "noWorkOutsideCalls"
    WIRE_INTACT = "wireIntact"
    ABOVE_FLOOR = "aboveFloor"


CHECKS: tuple[str, ...] = tuple(check.value for check in Check)


_SIGNED_BY_SIZE = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def poisoned_elements(output: Any, reference: Any) -> int:
    """Elements of a floating-point ``output`` whose bytes are all 0xFF where ``reference`` is no NaN."""
    torch = torch_module()

    if not isinstance(output, torch.Tensor) or not output.is_floating_point() or output.numel() == 0:
        return 0
    flat = output.detach().contiguous().reshape(-1)
    as_int = _SIGNED_BY_SIZE.get(flat.element_size())
    if as_int is not None:  # all bytes 0xFF <=> the element read as a signed integer of its size is -1
        poisoned = flat.view(getattr(torch, as_int)) == -1
    else:
        as_bytes = flat.view(torch.uint8).reshape(flat.numel(), flat.element_size())
        poisoned = (as_bytes == POISON_BYTE).all(dim=1)
    count = int(torch.count_nonzero(poisoned))  # a bool tensor's sum() is 2.7x slower (it counts in int64)
    if count and isinstance(reference, torch.Tensor) and reference.shape == output.shape:
        if reference.is_floating_point():  # looked at only when there is something to forgive: NaN is slow
            count = int(torch.count_nonzero(poisoned & ~torch.isnan(reference.reshape(-1))))
    return count


def result(outcome: str, detail: str | None = None) -> dict[str, str]:
    """One check's entry as the run records it."""
    entry = {"result": outcome}
    if detail:
        entry["detail"] = detail
    return entry


def os_threads(pid: int | str = "self") -> int:
    """How many threads the OS lists for process ``pid`` (``/proc/<pid>/task``); 0 when it cannot tell."""
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0
