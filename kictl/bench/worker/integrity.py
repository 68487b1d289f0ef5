"""Integrity checks: catching an implementation that games the benchmark (DESIGN §7).

Each check is recorded in the run as ``{result: passed|failed|skipped, detail}``
under its name; a failed check makes the run's status ``reward_hack``.

========================  ===========================================================
``inputsUnchanged``       every input is bit-identical after the calls to a copy taken before
``outputsNotAliasInputs`` no output shares memory with an input
``outputsFullyWritten``   no output element still holds the poison pattern (all bytes 0xFF)
                          the harness left in memory the call could reuse
``outputsFresh``          calls on different inputs did not return identical outputs
``timedOutputsCorrect``   a call picked at random among the timed ones returned correct outputs
``plainTensorOutputs``    outputs are ``torch.Tensor`` itself (no lazy or proxy subclass) on the run's device
``noThreadsLeft``         no thread started by a timed call is alive at its return, and the threads the
                          implementation keeps stay idle between its calls (read by the parent from the
                          OS, ``/proc/<pid>/task``, so raw ``_thread`` threads count too; on a GPU, no
                          thread more than when the timed calls began)
``streamOrdered``         (GPU) the outputs were complete once the calling stream reached the end
                          of the call: no work left running on another stream
``noProcessesLeft``       no process the implementation started is alive after its calls
                          (counted by the OS in the worker's sandbox)
``timerNotPatched``       the timer's functions and kictl's own are the objects they were
                          before the implementation was imported, so is what kictl's timer
                          and CUPTI collector instances hold (``watch_instance``), and no
                          timed call reached into the timer (its CUDA events re-recorded or
                          moved, CUPTI's collection switched off: ``cupti_attribution.timer_tampering``)
``samplesConsistent``     every sample the worker sent fits what kictl's parent saw: no sample
                          longer than the parent's wall time around the call, and the samples'
                          median not far below the parent's once the wire's own cost is taken off
``noWorkOutsideCalls``    the worker's processes used no CPU time while kictl held them idle
                          after the timed calls (work finishing after the clock stopped)
``wireIntact``            every message from the worker kept to the wire's schema and order
``aboveFloor``            the primary statistic is not below the workload's physical floor
========================  ===========================================================

The worker-side helpers here run in the implementation's process; the
parent-side ones (``poisoned_elements``, ``floor_check``) run in kictl.
"""

from __future__ import annotations

import contextlib
import ctypes
import struct
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kictl.bench import worker
from kictl.bench.wire.checks import CHECKS as CHECKS
from kictl.bench.wire.checks import FAILED as FAILED
from kictl.bench.wire.checks import PASSED as PASSED
from kictl.bench.wire.checks import POISON_BYTE as POISON_BYTE
from kictl.bench.wire.checks import SKIPPED as SKIPPED
from kictl.bench.wire.checks import Check as Check
from kictl.bench.wire.checks import os_threads as os_threads
from kictl.bench.wire.checks import poisoned_elements as poisoned_elements
from kictl.bench.wire.checks import result as result
from kictl.bench.wire.lazy import torch_module
from kictl.bench.worker import timing

#: NVIDIA's CUPTI bindings, when loaded (the CUPTI timer): every callable they hold is watched, so an
#: implementation that swaps the activity API's functions (flush, timestamps, callbacks) is named.
_FOREIGN_TIMER_MODULES = ("cupti.cupti", "cupti")


@dataclass(frozen=True)
class Baseline:
    """What the worker looked like before the implementation was imported."""

    threads: frozenset[int]
    objects: dict[str, Any]


def _watched() -> dict[str, Any]:
    """The objects whose identity must not change: the timer's functions and kictl's own."""
    torch = torch_module()

    found: dict[str, Any] = {}
    for name in ("perf_counter_ns", "perf_counter", "monotonic_ns", "monotonic", "time"):
        found[f"time.{name}"] = getattr(time, name)
    found["torch.cuda.Event"] = torch.cuda.Event
    for name in ("elapsed_time", "record", "query", "synchronize"):
        found[f"torch.cuda.Event.{name}"] = getattr(torch.cuda.Event, name)
    base = getattr(torch._C, "_CudaEventBase", None)
    if base is not None:
        for name in ("elapsed_time", "record", "query", "synchronize"):
            if hasattr(base, name):
                found[f"torch._C._CudaEventBase.{name}"] = getattr(base, name)
    # what kictl's reader of CUPTI's buffers reads records with (cupti_records.RecordLayout, RecordReader)
    for name in ("unpack_from", "calcsize"):
        found[f"struct.{name}"] = getattr(struct, name)
    for name in ("string_at", "addressof", "byref", "c_char", "c_uint32", "c_void_p", "c_size_t", "CFUNCTYPE"):
        found[f"ctypes.{name}"] = getattr(ctypes, name)
    found["torch.cuda.synchronize"] = torch.cuda.synchronize
    found["torch.cuda.CUDAGraph.replay"] = torch.cuda.CUDAGraph.replay
    found["torch.cuda._sleep"] = getattr(torch.cuda, "_sleep", None)
    for name in ("equal", "empty", "clone"):
        found[f"torch.{name}"] = getattr(torch, name)
    # zero_: the timers' L2 flush and launch padding (a no-op zero_ would leave the cache warm and the phase fixed)
    for name in ("clone", "copy_", "to", "cpu", "fill_", "zero_", "view", "untyped_storage", "data_ptr"):
        found[f"torch.Tensor.{name}"] = getattr(torch.Tensor, name)

    for name, value in timing._ORIGINALS.items():
        found[f"kictl.bench.worker.timing._ORIGINALS[{name}]"] = value
    for module_name in _FOREIGN_TIMER_MODULES:
        module = sys.modules.get(module_name)
        if module is not None:
            for name, value in vars(module).items():
                if callable(value) and not name.startswith("__"):
                    found[f"{module_name}.{name}"] = value

    for module_name in worker.MODULES:
        module = sys.modules.get(module_name)
        if module is None:
            continue
        for name, value in vars(module).items():
            if callable(value) and getattr(value, "__module__", None) == module_name:
                found[f"{module_name}.{name}"] = value
                if isinstance(value, type):
                    for member, function in vars(value).items():
                        if callable(function):
                            found[f"{module_name}.{name}.{member}"] = function
    return found


class _AuditGuard:
    """kictl's audit hook, added before any implementation is imported: it refuses every later audit hook.

    Python calls the hooks already added with ``sys.addaudithook`` (also for the C API's
    ``PySys_AddAuditHook``) before it adds a new one, and a hook that raises a ``RuntimeError`` there keeps
    the new one out.  So an implementation cannot add a hook that would run inside kictl's own work (an audit
    event fires on every ``open``, ``import``, ``compile``, ``ctypes`` call...).  The attempt is counted but
    does not condemn the run: a refused hook never runs, and honest libraries try to add hooks (FlashInfer's
    stack did on the H200, 2026-12-02, and an honest FlashInfer rerun was judged ``reward_hack`` for it).
    """

    def __init__(self) -> None:
        self.refused = 0

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "sys.addaudithook":
            self.refused += 1
            raise RuntimeError("kictl's worker refuses audit hooks")


AUDIT_GUARD = _AuditGuard()
_guard_added = False


def guard_audit_hooks() -> None:
    """Add ``AUDIT_GUARD`` (once per process; a worker does it before anything of an implementation's runs)."""
    global _guard_added
    if not _guard_added:
        sys.addaudithook(AUDIT_GUARD)
        _guard_added = True


def foreign_hooks(own_profiler: bool = False) -> list[str]:
    """What of an implementation's could run inside kictl's own work in this process, active now.

    A trace or profile function (``sys``'s or ``threading``'s, or a ``sys.monitoring`` tool), a torch function
    or dispatch mode: each is called by the interpreter or torch in the middle of kictl's staging, audits,
    flush and checks.  (An audit hook never gets in: ``AUDIT_GUARD`` refuses it, so its attempt is no
    finding.)  ``own_profiler``: kictl's own cProfile is on
    (``worker.PROFILE_ENV``, unsandboxed diagnosis), so a profile function is expected.
    """
    found = []
    if sys.gettrace() is not None or getattr(threading, "gettrace", lambda: None)() is not None:
        found.append("a trace function (settrace)")
    if not own_profiler and (
        sys.getprofile() is not None or getattr(threading, "getprofile", lambda: None)() is not None
    ):
        found.append("a profile function (setprofile)")
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        tools = [tool for tool in range(6) if monitoring.get_tool(tool) is not None]
        if tools:
            found.append(f"a sys.monitoring tool ({', '.join(map(str, tools))})")
    torch = sys.modules.get("torch")
    if torch is not None:
        functions = getattr(torch._C, "_len_torch_function_stack", None)
        if functions is not None and functions() > 0:
            found.append("a torch function mode")
        dispatch = getattr(torch._C, "_len_torch_dispatch_stack", None)
        if dispatch is not None and dispatch() > 0:
            found.append("a torch dispatch mode")
    return found


def kictl_torch() -> Any:
    """A context in which kictl's own torch work runs with torch functions and Python dispatch disabled: no
    ``__torch_function__`` of a subclass or mode, and no Python dispatch mode, sees it."""
    torch = torch_module()

    stack = contextlib.ExitStack()
    stack.enter_context(torch._C.DisableTorchFunction())
    disable = getattr(torch._C, "_DisableTorchDispatch", None)
    if disable is not None:
        stack.enter_context(disable())
    return stack


def take_baseline() -> Baseline:
    """Threads and watched objects now (call before importing an implementation)."""
    return Baseline(threads=frozenset(thread.ident or 0 for thread in threading.enumerate()), objects=_watched())


def patched(baseline: Baseline) -> list[str]:
    """The watched names whose object changed since ``baseline``."""
    now = _watched()
    return sorted(name for name, value in baseline.objects.items() if now.get(name) is not value)


#: Attributes of kictl's timer and CUPTI collector that change as they work; every other attribute must stay
#: the object it was (and a container's contents the objects they were) from before the implementation ran.
_INSTANCE_STATE = frozenset(
    {
        "spin_ns",
        "host_ns",
        "padded",
        "last_end",
        "waiting",
        "settled",
        "sequence",
        "buffers",
        "error",
        "checked",
        "mismatch",
        "_pending",
        "_records",
        "_syncs",
        "_stream_flags",
        "started",
    }
)


#: What those attributes may hold, exactly (not a subclass: a list whose ``append`` runs code would be a hook that the
#: timer calls in its own window, e.g. ``padded.append`` after staging and before the flush).
_STATE_TYPES = (type(None), bool, int, str, list, dict)


@dataclass(frozen=True)
class InstanceWatch:
    """What one of kictl's objects held (``watch_instance``): attribute -> (object, a container's elements)."""

    label: str
    obj: Any
    members: dict[str, tuple[Any, tuple[Any, ...] | None]]


def _elements(value: Any) -> tuple[Any, ...] | None:
    if isinstance(value, dict):
        return tuple(item for pair in value.items() for item in pair)
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return None


def watch_instance(label: str, obj: Any, earlier: InstanceWatch | None = None) -> InstanceWatch:
    """The attributes of ``obj`` now; with ``earlier`` (of the same object), its members keep their first objects.

    The module watch (``patched``) sees functions replaced in modules; an implementation that finds kictl's
    timer in its callers' frames can instead replace what the *instance* holds (its clock, its events'
    ``elapsed_time``, its flush buffer, its CUPTI flush). ``instance_changes`` names those.
    """
    members: dict[str, tuple[Any, tuple[Any, ...] | None]] = {"__class__": (type(obj), None)}
    for name, value in vars(obj).items():
        if name not in _INSTANCE_STATE:
            members[name] = (value, _elements(value))
    if earlier is not None and earlier.obj is obj:
        members.update(earlier.members)
    return InstanceWatch(label, obj, members)


def instance_changes(watch: InstanceWatch, current: Any) -> list[str]:
    """The attributes of ``current`` that are not what ``watch`` saw (``label.name``); empty: none changed."""
    if current is not watch.obj:
        return [f"{watch.label} (another object)"]
    now = vars(current)
    changed = []
    for name, (value, elements) in watch.members.items():
        if name == "__class__":
            if type(current) is not value:
                changed.append(f"{watch.label}.__class__")
        elif name not in now or now[name] is not value:
            changed.append(f"{watch.label}.{name}")
        elif elements is not None:
            after = _elements(now[name])
            same = after is not None and len(after) == len(elements)
            if not same or any(a is not b for a, b in zip(after or (), elements, strict=True)):
                changed.append(f"{watch.label}.{name}")
    changed.extend(
        f"{watch.label}.{name} (added)" for name in now if name not in watch.members and name not in _INSTANCE_STATE
    )
    changed.extend(
        f"{watch.label}.{name} (a {type(now[name]).__name__})"
        for name in sorted(_INSTANCE_STATE & now.keys())
        if type(now[name]) not in _STATE_TYPES
    )
    return changed


def new_threads(before: Iterable[int]) -> list[str]:
    """Names of live threads that were not in ``before``."""
    known = set(before)
    return sorted(
        thread.name for thread in threading.enumerate() if (thread.ident or 0) not in known and thread.is_alive()
    )


def thread_idents() -> frozenset[int]:
    return frozenset(thread.ident or 0 for thread in threading.enumerate())


# --------------------------------------------------------------------------- memory


def _span(tensor: Any) -> tuple[str, int, int] | None:
    storage = tensor.untyped_storage()
    start = storage.data_ptr()
    size = storage.nbytes()
    if size == 0:
        return None
    return str(tensor.device), start, start + size


def aliasing(outputs: Sequence[tuple[str, Any]], inputs: Sequence[tuple[str, Any]]) -> list[str]:
    """``"output <o> shares memory with input <i>"`` for every overlap of storages."""
    torch = torch_module()

    found = []
    spans = [(name, _span(value)) for name, value in inputs if isinstance(value, torch.Tensor)]
    for out_name, value in outputs:
        if not isinstance(value, torch.Tensor):
            continue
        mine = _span(value)
        if mine is None:
            continue
        for in_name, theirs in spans:
            if theirs is not None and theirs[0] == mine[0] and mine[1] < theirs[2] and theirs[1] < mine[2]:
                found.append(f"output {out_name} shares memory with input {in_name}")
    return found


def poison_allocator(device: str, sizes: Iterable[int]) -> None:
    """Leave freed device blocks of these byte sizes filled with 0xFF for the next allocations to reuse.

    On CUDA the caching allocator hands a freed block of the right size to
    the next ``torch.empty``; on the CPU a freed heap chunk is often reused
    too, though not always.
    """
    torch = torch_module()

    blocks = [torch.empty(size, dtype=torch.uint8, device=device) for size in sizes if size > 0]
    for block in blocks:
        block.fill_(POISON_BYTE)
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    del blocks


def poison_in_place(tensor: Any) -> None:
    """Overwrite a returned output with 0xFF bytes, so that a later call reusing it must rewrite it."""
    torch = torch_module()

    if isinstance(tensor, torch.Tensor) and tensor.is_contiguous() and tensor.numel() > 0:
        tensor.view(-1).view(torch.uint8).fill_(POISON_BYTE)
