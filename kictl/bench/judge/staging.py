"""Inputs staged by kictl's parent (CPU, issue 27): the timed tensors live in memory the parent writes itself.

On the CPU each worker gets a second shared region at its start (``--fd-inputs``, a sealed memfd that both
sides map writable).  At ``Arm`` the worker places each random input of the timed tensors in it, at the offsets
``layout`` gives both sides, as a tensor over that memory, and runs ``setup()`` on them.  From then on the
parent stages every timed call's values itself (``Stager.stage``: an input set, rolled, and for a probe a few
values swapped), between an answer and the next request, while the worker's only thread of kictl's waits for
that request and nothing of the implementation's runs in kictl's code: there is no staging request for an
implementation's hook, mode or thread to do work in.  The tensors' version counters never move (the parent
writes their bytes, not torch), so a cache keyed on them, on their pointers or on their identity answers every
call like the first, which the audits find.  After an audited call and the last one, the parent compares what
is in the region with what it wrote (``Stager.changed``: ``inputsUnchanged`` judged on what the parent read).

Index tensors (a plan's structure, never restaged) stay in the worker's own memory, as ``setup()`` may plan on
them.

On a GPU (``DeviceStager``) the same holds in device memory.  The worker makes only the setup values, and says
before ``setup()`` runs where each random timed input lies (``wire.Armed.staged``: its allocation's CUDA IPC
handle).  The parent opens those handles in its own context on the GPU (``wire.cuda_ipc.DeviceMapping``), draws
the timed sets there itself with the seeds the worker never sees (on the GPU, as kictl's reference worker draws
them, so both hold the same values), and copies each call's values in, device to device, then flushes the L2
(the copies leave the values there) and waits for both before it sends the request.  The worker's own kictl
code never holds a timed set, and no request stages one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from kictl.bench import wire
from kictl.bench.judge.taken import _span
from kictl.bench.wire import cuda_ipc
from kictl.bench.wire.lazy import torch_module
from kictl.bench.wire.regions import view
from kictl.bench.wire.tensors import materialize_plans, torch_dtype
from kictl.bench.wire.values import _perturbed, _rolled, _same_bits

_SETS: dict[tuple[Any, ...], tuple[Sequence[wire.Plan], list[list[Any]]]] = {}


def _changed(
    names: Sequence[str], views: Sequence[Any], written: Sequence[Any], calls_write: Sequence[int] = ()
) -> list[str]:
    """The inputs whose bytes where the parent staged them (``views``) differ from what it wrote (``written``),
    but for those the definition's reference writes (``calls_write``, by position)."""
    return [
        name
        for k, (name, target, value) in enumerate(zip(names, views, written, strict=True))
        if k not in calls_write and target is not None and value is not None and not _same_bits(target, value)
    ]


def _read_back(views: Sequence[Any], calls_write: Sequence[int]) -> list[Any]:
    """The parent's own copy of the inputs a call writes (``calls_write``), as they are where it staged them, on the
    CPU (an audited call's values, judged as its outputs are)."""
    found = []
    for k in calls_write:
        view = views[k]
        if view is None:
            raise StagingError("the parent did not stage an input that the reference writes")
        found.append(view.detach().to("cpu", copy=True))
    return found


class StagingError(RuntimeError):
    """The worker did not say where its timed inputs lie, or said it so that the parent cannot write there."""


def parent_sets(plans: Sequence[wire.Plan], device: str = "cpu") -> list[list[Any]]:
    """The timed input sets, made in the parent on ``device`` (once per workload: every driver shares them)."""
    key = (device, *(id(plan) for plan in plans))
    found = _SETS.get(key)
    if found is None or any(a is not b for a, b in zip(found[0], plans, strict=True)):
        _SETS.clear()  # one workload's sets at a time
        found = (list(plans), materialize_plans(list(plans), device))
        _SETS[key] = found
    return found[1]


def _write(
    views: Sequence[Any], sets: Sequence[Sequence[Any]], index: int, shift: int, perturb: int, written: list[Any]
) -> None:
    """Input set ``index`` (random inputs rolled by ``shift``, ``perturb``'s pairs swapped) copied into the views the
    parent writes (``None``: an input it does not; with none, no set is read), each value kept in ``written``."""
    for k, target in enumerate(views):
        if target is None:
            continue
        value = _perturbed(_rolled(sets[index][k], shift, k), perturb)
        target.copy_(value)
        written[k] = value


class Stager:
    """The parent's side: writes each timed call's values into a worker's inputs region, and reads them back."""

    def __init__(
        self,
        region: wire.SharedRegion,
        plans: Sequence[wire.Plan],
        offsets: Sequence[int | None],
        specs: Sequence[wire.InputSpec],
    ) -> None:
        self.sets = parent_sets(plans)
        self.names = [spec.name for spec in specs]
        self.views = [
            None if offset is None else view(region.map, offset, spec)
            for offset, spec in zip(offsets, specs, strict=True)
        ]
        #: what the parent wrote for the call staged last, per input (``None`` where it writes nothing)
        self.written: list[Any] = [None] * len(self.views)
        #: the inputs the definition's reference writes, by position (docs/bench.md, "Inputs the reference writes")
        self.calls_write: tuple[int, ...] = ()

    def stage(self, index: int, shift: int, perturb: int = 0) -> None:
        """Input set ``index``, random inputs rolled by ``shift`` and, for a probe, ``perturb``'s pairs swapped."""
        _write(self.views, self.sets, index, shift, perturb, self.written)

    def changed(self) -> list[str]:
        """The inputs whose bytes in the region differ from what the parent wrote for the last call (but those the
        reference writes)."""
        return _changed(self.names, self.views, self.written, self.calls_write)

    def read_back(self) -> list[Any]:
        """The inputs the reference writes, as the last call left them in the region (``_read_back``)."""
        return _read_back(self.views, self.calls_write)


class _DeviceSpan:
    """``length`` bytes of device memory at ``address``, as torch takes memory it did not allocate."""

    def __init__(self, address: int, length: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (length,),
            "typestr": "|u1",
            "data": (address, False),
            "strides": None,
            "version": 2,
        }


class DeviceStager:
    """The parent's side on a GPU: writes each timed call's values into a worker's timed tensors, in its device
    memory, through the IPC handles the worker gave at ``Arm`` (``wire.Armed.staged``); and reads them back."""

    def __init__(
        self,
        staged: Sequence[wire.DeviceInput],
        plans: Sequence[wire.Plan],
        specs: Sequence[wire.InputSpec],
        flush_bytes: int = 0,
    ) -> None:
        torch = torch_module()

        expected = {k for k, spec in enumerate(specs) if spec.kind == "random" and math.prod(spec.shape) > 0}
        given = [item.position for item in staged]
        if sorted(given) != sorted(expected):
            missing = sorted(expected - set(given))
            said = ", ".join(specs[k].name for k in missing) if missing else "inputs that are not the timed ones"
            raise StagingError(f"the worker's answer to Arm did not say where its timed inputs lie ({said})")
        devices = {item.ref.device for item in staged}
        if len(devices) > 1:
            raise StagingError("the timed inputs do not all lie in one GPU's memory")
        self.names = [spec.name for spec in specs]
        self.views: list[Any] = [None] * len(specs)
        #: what the parent wrote for the call staged last, per input (``None`` where it writes nothing)
        self.written: list[Any] = [None] * len(specs)
        #: the inputs the definition's reference writes, by position (docs/bench.md, "Inputs the reference writes")
        self.calls_write: tuple[int, ...] = ()
        self.mapping = cuda_ipc.DeviceMapping(devices.pop() if devices else "")
        self.device = ""
        self.sets: list[list[Any]] = []
        #: the parent's own L2 flush after each staging (``flush_bytes``, as the worker's timer flushes)
        self.flush: Any = None
        if not staged:
            return
        self.device = f"cuda:{cuda_ipc.ordinal(self.mapping.device)}"
        torch.cuda.init()
        if flush_bytes > 0:
            self.flush = torch.empty(flush_bytes, dtype=torch.uint8, device=self.device)
        try:
            for item in staged:
                spec, ref = specs[item.position], item.ref
                if ref.dtype != spec.dtype or tuple(ref.shape) != tuple(spec.shape) or not ref.handle:
                    raise StagingError(f"the worker placed {spec.name} as a tensor that is not the one asked for")
                itemsize = wire.DTYPE_BYTES.get(ref.dtype, 1)
                try:
                    span = _span(ref, itemsize)
                except ValueError as exc:
                    raise StagingError(f"{spec.name} with {exc}") from None
                address = self.mapping.place(ref.handle, ref.offset, span)
                raw = torch.as_tensor(_DeviceSpan(address, span), device=self.device)
                self.views[item.position] = raw.view(torch_dtype(ref.dtype)).as_strided(ref.shape, ref.stride)
            self.sets = parent_sets(plans, self.device)
        except BaseException:
            self.close()
            raise

    def stage(self, index: int, shift: int, perturb: int = 0) -> None:
        """Input set ``index``, random inputs rolled by ``shift`` and, for a probe, ``perturb``'s pairs swapped,
        copied into the worker's timed tensors; done on the device before this returns."""
        torch = torch_module()

        _write(self.views, self.sets, index, shift, perturb, self.written)
        if self.flush is not None:
            # the copies leave the staged values in the GPU's L2, which every context shares: evicted here, by the
            # parent, so a worker that skips its own flush before the call does not find them there
            self.flush.zero_()
        if self.device:
            torch.cuda.synchronize(self.device)

    def changed(self) -> list[str]:
        """The inputs whose bytes in the worker's device memory differ from what the parent wrote last (but those
        the reference writes)."""
        return _changed(self.names, self.views, self.written, self.calls_write)

    def read_back(self) -> list[Any]:
        """The inputs the reference writes, as the last call left them in the worker's device memory, copied to the
        host (``_read_back``; the worker's timer synchronised the device before its answer)."""
        return _read_back(self.views, self.calls_write)

    def close(self) -> None:
        """Let go of the worker's memory (the handles closed where nothing else of the parent's holds them)."""
        torch = torch_module()

        if self.device:
            torch.cuda.synchronize(self.device)
        self.views = [None] * len(self.views)
        self.written = [None] * len(self.written)
        self.flush = None
        self.mapping.close()
