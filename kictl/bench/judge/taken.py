"""A timed call's outputs, taken by kictl's parent at the call's return (issue 40).

The worker answers a timed call with where its outputs lie (``wire.Sample.outputs``) and stops itself
(``SIGSTOP``, bound before the implementation was imported) the moment the answer is written.  The parent waits
until every thread of the worker is stopped (``/proc/<pid>/task/*/stat``), reads each output's bytes from the
worker's memory itself (``/proc/<pid>/mem``), and only then lets it go on (``SIGCONT``).  So nothing of the
implementation's runs between the call's return and the parent's reading: no hook on a later request (there
is no audit request), no ``gc`` callback, no signal handler, no replaced standard-library function of the
wire.  What the parent read is what the call returned.  A worker that does not stop, or whose memory the parent
cannot read, has its call's outputs judged missing (``timedOutputsCorrect``), never taken from the worker.

On a GPU the outputs lie in the worker's device memory: the answer names each one's allocation by its CUDA IPC
handle (``wire.cuda_ipc``), and the parent, while the worker is stopped, opens the handle in a driver context of
its own, copies the bytes to the host and closes it.  The worker's timer synchronised the device before the
answer, and a stopped process launches nothing, so what the parent copies is what the call left there.

The parent keeps what it read only for the calls it audits, until it compares them with the reference's outputs
(``judge.audits``: as they come, within a budget); each read is bounded by the definition's output sizes
(``wire.outputs_limit``).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kictl.bench import wire
from kictl.bench.wire import cuda_ipc
from kictl.bench.wire.lazy import torch_module

#: How long the parent waits for a worker to stop itself after a timed call's answer.
STOP_WAIT_S = 5.0


def stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped (``T``) or traced (``t``); False when it cannot tell."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat", "rb") as handle:
                text = handle.read()
        except OSError:
            continue  # a thread that ended
        state = text[text.rindex(b")") + 2 : text.rindex(b")") + 3]
        if state not in (b"T", b"t"):
            return False
    return True


def wait_stopped(pid: int, limit_s: float | None = None) -> bool:
    """Whether every thread of ``pid`` stopped within ``limit_s`` (``STOP_WAIT_S`` by default)."""
    deadline = time.monotonic() + (STOP_WAIT_S if limit_s is None else limit_s)
    pause = 0.00002
    while not stopped(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.002)
    return True


def _span(ref: wire.OutputRef, itemsize: int) -> int:
    """The bytes from an output's first element to past its last (0 for an empty one)."""
    if any(size == 0 for size in ref.shape):
        return 0
    if len(ref.stride) != len(ref.shape) or any(step < 0 for step in ref.stride):
        raise ValueError("strides that do not fit its shape")
    return (1 + sum((size - 1) * step for size, step in zip(ref.shape, ref.stride, strict=True))) * itemsize


def read_outputs(pid: int, refs: Sequence[wire.OutputRef], limit: int, on_gpu: bool = False) -> list[Any] | str:
    """The outputs ``refs`` describe, read from the stopped worker ``pid``'s memory (its host memory; on a GPU
    run, ``on_gpu``, its device memory through the IPC handles the refs name), as contiguous CPU tensors of the
    parent's own; or why they could not be read.  At most ``limit`` bytes are read in all."""
    torch = torch_module()

    planned: list[tuple[wire.OutputRef, Any, int, int]] = []
    total = 0
    for ref in refs:
        dtype = getattr(torch, ref.dtype, None) if ref.dtype in wire.DTYPE_BYTES else None
        if not isinstance(dtype, torch.dtype):
            return f"an output of dtype {ref.dtype!r}"
        itemsize = wire.DTYPE_BYTES[ref.dtype]
        try:
            span = _span(ref, itemsize)
        except ValueError as exc:
            return f"an output with {exc}"
        total += span
        if total > limit:
            return f"outputs spanning more than {limit} bytes of the worker's memory"
        planned.append((ref, dtype, itemsize, span))
    held = [ref for ref, _, _, span in planned if span]
    on_device = [ref for ref in held if ref.handle]
    if not on_gpu:
        return "an output said to lie in device memory on a CPU run" if on_device else _read_host(pid, planned)
    if len(on_device) != len(held) or len({ref.device for ref in on_device}) > 1:
        return "outputs that do not all lie in one GPU's memory"
    return _read_device(on_device[0].device, planned) if on_device else _read_host(pid, planned)


def _placed(data: Any, ref: wire.OutputRef, dtype: Any, itemsize: int, span: int) -> Any:
    """The bytes of one output (``span`` of them, from its first element) as a tensor of its shape."""
    placed = data.view(dtype).as_strided(ref.shape, ref.stride)
    dense = placed.is_contiguous() and placed.numel() * itemsize == span
    return placed if dense else placed.contiguous()


def _read_host(pid: int, planned: Sequence[tuple[wire.OutputRef, Any, int, int]]) -> list[Any] | str:
    torch = torch_module()

    tensors: list[Any] = []
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    except OSError as exc:
        return f"kictl's parent could not read the worker's memory ({exc.strerror})"
    try:
        for ref, dtype, itemsize, span in planned:
            if span == 0:
                tensors.append(torch.empty(ref.shape, dtype=dtype))
                continue
            data = torch.empty(span, dtype=torch.uint8)  # read into directly: no second copy
            view = data.numpy().data  # a writable memoryview of the tensor's memory
            done = 0
            while done < span:
                try:
                    got = os.preadv(fd, [view[done:]], ref.address + done)
                except OSError as exc:
                    return f"kictl's parent could not read an output at {ref.address:#x} ({exc.strerror})"
                if got <= 0:
                    return f"kictl's parent could not read an output at {ref.address:#x}"
                done += got
            tensors.append(_placed(data, ref, dtype, itemsize, span))
    finally:
        os.close(fd)
    return tensors


_readers: list[cuda_ipc.DeviceReader] = []


def _read_device(device: str, planned: Sequence[tuple[wire.OutputRef, Any, int, int]]) -> list[Any] | str:
    """The outputs in the stopped worker's device memory, copied to the host through their allocations' IPC
    handles (``wire.cuda_ipc``) in a context of the parent's own."""
    torch = torch_module()

    if not _readers:
        _readers.append(cuda_ipc.DeviceReader())
    spans = [(ref.handle, ref.offset, span) for ref, _, _, span in planned if span]
    try:
        copied = iter(_readers[0].read(device, spans))
    except cuda_ipc.IpcError as exc:
        return f"kictl's parent could not read an output in device memory ({exc})"
    tensors = []
    for ref, dtype, itemsize, span in planned:
        if span == 0:
            tensors.append(torch.empty(ref.shape, dtype=dtype))
            continue
        data = torch.frombuffer(next(copied), dtype=torch.uint8)
        tensors.append(_placed(data, ref, dtype, itemsize, span))
    return tensors


def mapped(pid: int, inode: int) -> list[tuple[int, int]]:
    """The address ranges at which ``pid`` maps the file of ``inode`` (``/proc/<pid>/maps``).

    Read as bytes and searched for the inode, parsing only the lines that hold it: the map of a worker with torch
    loaded is about 50 KB, read at every timed call's return (issue 44: 0.8 ms of the parent's CPU a call as text).
    """
    try:
        with open(f"/proc/{pid}/maps", "rb") as handle:
            text = handle.read()
    except OSError:
        return []
    needle = b" " + str(inode).encode() + b" "
    ranges = []
    at = text.find(needle)
    while at >= 0:
        start_of_line = text.rfind(b"\n", 0, at) + 1
        end_of_line = text.find(b"\n", at)
        fields = text[start_of_line : end_of_line if end_of_line >= 0 else len(text)].split(maxsplit=5)
        if len(fields) >= 5 and fields[4] == str(inode).encode():
            start, _, end = fields[0].partition(b"-")
            try:
                ranges.append((int(start, 16), int(end, 16)))
            except ValueError:
                return []
        at = text.find(needle, at + len(needle))
    return ranges


def ranges(refs: Sequence[wire.OutputRef]) -> list[tuple[int, int]]:
    """The address ranges ``refs`` cover (the bytes from each one's first element to past its last)."""
    found = []
    for ref in refs:
        try:
            span = _span(ref, wire.DTYPE_BYTES.get(ref.dtype, 1))
        except ValueError:
            continue
        if span:
            found.append((ref.address, ref.address + span))
    return found


def aliased(refs: Sequence[wire.OutputRef], ranges: Sequence[tuple[int, int]]) -> list[int]:
    """The outputs (by position) whose bytes lie, even partly, in one of ``ranges``."""
    found = []
    for n, ref in enumerate(refs):
        itemsize = wire.DTYPE_BYTES.get(ref.dtype, 1)
        try:
            span = _span(ref, itemsize)
        except ValueError:
            continue
        if span and any(ref.address < end and start < ref.address + span for start, end in ranges):
            found.append(n)
    return found


def probe_problem(pid: int | None, answer: wire.Probed, count: int) -> str | None:
    """What is wrong with the parent's reading of a GPU worker's probe (``wire.Probe``: ``count`` int32 values
    0, 1, 2, ... that the worker put in device memory before any import), or ``None`` when it read them there."""
    torch = torch_module()

    if answer.error is not None:
        return answer.error
    if pid is None:
        return "the worker's process is not known"
    if len(answer.outputs) != 1 or not answer.outputs[0].handle:
        return "the worker did not name the probe's device memory"
    found = read_outputs(pid, answer.outputs, 4 * count, on_gpu=True)
    if isinstance(found, str):
        return found
    if not torch.equal(found[0], torch.arange(count, dtype=torch.int32)):
        return "it read other values than the worker wrote"
    return None


@dataclass(frozen=True, slots=True)
class Taken:
    """What the parent found at a CPU call's return."""

    #: the outputs as the parent read them (``read``), ``None`` when none were to be read, or why they
    #: could not be taken (the call then counts as having returned wrong outputs)
    outputs: list[Any] | str | None
    #: the outputs (by position) that lie in the timed inputs' memory
    aliased: tuple[int, ...] = ()
    #: the worker did not stop at the return (a broken protocol)
    unstopped: bool = False


UNSTOPPED = "the worker did not stop at the call's return, so its outputs could not be taken there"


def take(
    pid: int | None,
    answer: wire.Sample,
    read: bool,
    limit: int,
    inputs_inode: int | None = None,
    while_stopped: Callable[[], object] | None = None,
    on_gpu: bool = False,
    inputs_ranges: Sequence[tuple[int, int]] = (),
) -> Taken:
    """At a call's return: wait for the worker to stop itself, read its outputs if ``read`` (from its device
    memory on a GPU run, ``on_gpu``), let it go on.

    With ``inputs_inode`` (the inputs region's memfd) an output lying in that region is named too: the
    parent's own observation of ``outputsNotAliasInputs``; on a GPU, one lying in ``inputs_ranges`` (where the
    worker said the timed tensors lie before ``setup()`` ran).  ``while_stopped`` is called while the worker is
    stopped (the parent reads its threads' CPU time there: ``loop.RunDriver._threads_at_return``).
    """
    if pid is None:
        return Taken("kictl's parent does not know the worker's process", unstopped=True)
    if not wait_stopped(pid):
        try:
            os.kill(pid, signal.SIGSTOP)  # stopped now all the same, so that the run goes on to its verdict
        except OSError:
            pass
        wait_stopped(pid, 1.0)
        _resume(pid)
        return Taken(UNSTOPPED, unstopped=True)
    try:
        if while_stopped is not None:
            while_stopped()
        hit: tuple[int, ...] = ()
        if inputs_inode is not None and answer.outputs:
            hit = tuple(aliased(answer.outputs, mapped(pid, inputs_inode)))
        elif inputs_ranges and answer.outputs:
            hit = tuple(aliased(answer.outputs, inputs_ranges))
        if not read:
            return Taken(None, hit)
        if answer.outputs_error is not None:
            return Taken(answer.outputs_error, hit)
        if not answer.outputs:
            return Taken("the worker did not say where the call's outputs lie", hit)
        return Taken(read_outputs(pid, answer.outputs, limit, on_gpu), hit)
    finally:
        _resume(pid)


def _resume(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except OSError:
        pass
