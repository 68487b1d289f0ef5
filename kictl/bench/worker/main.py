"""The worker process: runs one implementation (or kictl's reference) as kictl's parent directs it.

``runner`` starts ``python -m kictl.bench.worker`` (inside ``sandbox``'s
bubblewrap unless told otherwise) with two pipe file descriptors: requests
come in on one, answers go out on the other, as ``wire`` frames (JSON and
raw bytes, never pickle).  stdout and stderr are a log file whose tail kictl
reads when the worker dies without a word.

The worker pins itself to the CPUs it is given, sets torch's thread count,
captures its environment and the timer's functions, and says ``Ready``
before any implementation is imported.  Then it answers, one at a time:

``Ping``       ``Pong`` (kictl measures the wire's own round trip before the import)
``Load``       checks each source file's sha256, writes the files into a fresh
               private folder (the sandbox's own ``/tmp``), imports the entry
``Reference``  one call on a plan's inputs, the outputs back (kictl's reference worker)
``Check``      one correctness round on fresh tensors, outputs and evidence back
``Arm``        the timed tensors, filled with the setup plan's values (never timed),
               ``setup(...)`` on them, and the timed input sets made ready
``Call``       copies one input set into the timed tensors in place (untimed),
               then one timed call; the sample goes back at once
``Audit``      the last timed call's outputs (GPU; on the CPU the answer to ``Call`` says where they lie
               and the worker stops itself until the parent has read them: ``judge.taken``)
``Finish``     the evidence gathered over the timed calls

The loop, the count of calls and which of them are audited live in kictl's
parent: nothing here knows more than the call it is serving.  Anything the
implementation raises (or makes kictl's code here raise) after ``Load`` is
its own failure: a ``Failed`` answer, and the worker exits.

Its size (over 600 lines) is deliberate: this is the code that runs inside the sandbox, next to the
implementation, and ``timerNotPatched`` watches kictl's functions module by module (``integrity._KICTL_MODULES``);
the worker's requests kept in one watched module keep what an implementation could reach countable.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import ctypes
import ctypes.util
import dataclasses
import faulthandler
import functools
import gc
import hashlib
import importlib.util
import inspect
import json
import math
import os
import resource
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from kictl.bench import wire
from kictl.bench.wire import cuda_ipc, regions
from kictl.bench.wire.lazy import torch_module
from kictl.bench.wire.tensors import materialize_plans
from kictl.bench.wire.values import _perturbed, _rolled, _same_bits
from kictl.bench.worker import environment, integrity, timing
from kictl.bench.worker.cupti_timer import CuptiCollector
from kictl.bench.worker.integrity import Check
from kictl.errors import EnvError

TAIL_LINES = 25
#: A folder: the worker runs under cProfile and writes ``worker-<pid>.prof`` there at every Finish (unsandboxed:
#: a sandboxed worker cannot write outside its private /tmp, and says nothing of it).
PROFILE_ENV = "KICTL_WORKER_PROFILE"
STREAM_CHECK_SPIN_NS = 2_000_000
_ALLOWED = frozenset(
    {
        wire.Ping.TYPE,
        wire.Probe.TYPE,
        wire.Load.TYPE,
        wire.Reference.TYPE,
        wire.Check.TYPE,
        wire.Arm.TYPE,
        wire.Stage.TYPE,
        wire.Call.TYPE,
        wire.Audit.TYPE,
        wire.Finish.TYPE,
        wire.Stop.TYPE,
        wire.Loop.TYPE,  # energy (issue 31)
    }
)


class Failure(Exception):
    """The implementation failed: ``status`` is compile_error or runtime_error."""

    def __init__(self, status: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class OutputStructureError(Exception):
    """The call returned something other than the definition's outputs."""


def tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of ``text``."""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def with_constants(function: Callable[..., Any], constants: Sequence[wire.Constant]) -> Callable[..., Any]:
    """``function`` with the definition's constant axes it names as keyword-only parameters bound (docs/bench.md,
    "Constants"): one implementation serves every definition of a family whose inputs do not say them (MoE's
    ``top_k``). A function that names none, or whose signature cannot be read, is called as it is."""
    try:
        parameters = inspect.signature(function).parameters
    except Exception:  # no signature (a builtin), or the implementation's own code raised reading it: its call's to own
        return function
    bound = {
        constant.name: constant.value
        for constant in constants
        if constant.name in parameters and parameters[constant.name].kind is inspect.Parameter.KEYWORD_ONLY
    }
    return functools.partial(function, **bound) if bound else function


def _traceback_tail(folder: str | None = None) -> str:
    """The current exception's traceback from the implementation's first frame on.

    Frames of kictl's worker and of the import machinery are left out, and the
    private folder the sources were written to is cut from paths, so that the
    detail reads the same on every machine.
    """
    error = sys.exc_info()[1]
    if error is None:
        return ""
    try:
        frames = traceback.extract_tb(error.__traceback__)
        prefix = f"{folder.rstrip('/')}/" if folder else None
        start = next((n for n, frame in enumerate(frames) if prefix and frame.filename.startswith(prefix)), None)
        if start is None:
            start = next((n + 1 for n, frame in reversed(list(enumerate(frames))) if frame.filename == __file__), 0)
        text = "".join(
            [
                "Traceback (most recent call last):\n" if frames[start:] else "",
                *traceback.format_list(frames[start:]),
                *traceback.format_exception_only(type(error), error),
            ]
        )
    except BaseException:  # an exception whose __str__ or __repr__ raises
        text = f"{type(error).__name__} (its message could not be read)"
    if prefix:
        text = text.replace(prefix, "")
    return tail(text)


def _note(notes: list[wire.Note], check: Check, detail: str) -> None:
    if not any(note.check == check.value and note.detail == detail for note in notes):
        notes.append(wire.Note(check=check.value, detail=detail))


def _tensor_ref(tensor: Any, exported: bool = False) -> wire.OutputRef:
    """Where a plain tensor lies (dtype, shape, strides, first element); ``exported``: with its allocation's CUDA
    IPC handle, for kictl's parent to open (``cuda_ipc.IpcError`` where it has none)."""
    dtype = str(tensor.dtype).removeprefix("torch.")
    address = tensor.data_ptr()
    if not exported:
        return wire.OutputRef(dtype, tuple(tensor.shape), tuple(tensor.stride()), address)
    found = cuda_ipc.export(address)
    return wire.OutputRef(
        dtype, tuple(tensor.shape), tuple(tensor.stride()), address, found.handle, found.offset, found.device
    )


# --------------------------------------------------------------------------- tensors on the wire


def pack(tensor: Any) -> wire.TensorData:
    """A plain tensor as data: dtype name, shape and raw bytes, copied to the host.

    A GPU tensor is copied into pinned host memory (torch keeps such blocks for reuse), faster than into
    pageable memory; the frame then writes that copy's bytes from where they are (a view: 25 MB of an attention
    output took 2-3 ms to copy again into ``bytes``, call AR).
    """
    torch = torch_module()

    source = tensor.detach()
    dtype, shape = str(source.dtype).removeprefix("torch."), tuple(source.shape)
    if not source.numel():
        return wire.TensorData(dtype=dtype, shape=shape, data=b"")
    if source.device.type == "cpu":
        # the tensor itself (it may change before the frame is written: the copy is taken now)
        raw: Any = source.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    else:
        host = torch.empty(source.shape, dtype=source.dtype, pin_memory=True)  # a copy of kictl's own
        host.copy_(source)
        raw = memoryview(host.reshape(-1).view(torch.uint8).numpy()).cast("B")
    return wire.TensorData(dtype=dtype, shape=shape, data=raw)


def unpack(packed: wire.TensorData) -> Any:
    """The tensor ``pack`` described (on the CPU); raises ``wire.WireError`` when the bytes do not fit."""
    torch = torch_module()

    if packed.dtype not in wire.DTYPES:
        raise wire.WireError(f"unknown dtype {packed.dtype!r}")
    if any(size < 0 for size in packed.shape) or len(packed.shape) > 16:
        raise wire.WireError(f"impossible shape {list(packed.shape)}")
    dtype = getattr(torch, packed.dtype)
    itemsize = torch.empty((), dtype=dtype).element_size()
    if math.prod(packed.shape) * itemsize != len(packed.data):
        raise wire.WireError(f"{len(packed.data)} bytes do not hold a {packed.dtype} tensor of {list(packed.shape)}")
    if not packed.data:
        return torch.empty(packed.shape, dtype=dtype)
    # a large buffer arrives as a bytearray of its own (wire._read_into): the tensor is made over it, uncopied
    given: object = packed.data
    data = given if isinstance(given, bytearray) else bytearray(packed.data)
    return torch.frombuffer(data, dtype=torch.uint8).view(dtype).reshape(packed.shape)


# ``_same_bits``, ``_rolled``, ``_perturbed`` and ``PROBE_PAIRS`` live in ``kictl.bench.wire.values`` (the
# parent's staging uses them too, and imports no worker code).


def normalize(value: Any, names: Sequence[str]) -> list[Any]:
    """The outputs in ``names`` order: one tensor, a tuple/list in order, or a dict by name.

    Only exact builtin types are looked into (no method of the
    implementation's objects is called), and each output must be exactly
    ``torch.Tensor``.  Raises ``OutputStructureError``.
    """
    torch = torch_module()

    kind = type(value)
    if kind is torch.Tensor:
        items = [value]
    elif kind is dict:
        keys = list(dict.keys(value))
        if any(type(key) is not str for key in keys) or set(keys) != set(names):
            raise OutputStructureError(f"returned a dict with keys {sorted(map(repr, keys))}, expected {list(names)}")
        items = [dict.__getitem__(value, name) for name in names]
    elif kind is tuple or kind is list:
        items = [value[n] for n in range(len(value))] if kind is list else list(tuple.__iter__(value))
    else:
        raise OutputStructureError(f"returned a {kind.__name__}, expected {len(names)} torch.Tensor(s)")
    if len(items) != len(names):
        raise OutputStructureError(f"returned {len(items)} value(s), the definition has outputs {list(names)}")
    for name, item in zip(names, items, strict=True):
        if type(item) is not torch.Tensor:
            raise OutputStructureError(f"output {name} is a {type(item).__name__}, not exactly a torch.Tensor")
    return items


# --------------------------------------------------------------------------- the worker


class Worker:
    def __init__(
        self,
        fd_in: int,
        fd_out: int,
        device: str,
        baseline: integrity.Baseline,
        collector: Any = None,
        cpus: Sequence[int] = (),
    ) -> None:
        self.collector = collector
        #: kictl's timer (from Arm) and CUPTI collector as they were before the implementation ran
        self.watches: dict[str, integrity.InstanceWatch] = {}
        if collector is not None:
            self.watches["collector"] = integrity.watch_instance("collector", collector)
            # kictl's own reader of CUPTI's buffers, where it attached: what it hands records to, and the layouts
            # it reads them with, are kictl's as they were before the implementation was imported
            direct = getattr(collector, "direct", None)
            if direct is not None:
                self.watches["cupti_reader"] = integrity.watch_instance("cupti_reader", direct)
                self.watches["record_reader"] = integrity.watch_instance("record_reader", direct.reader)
        #: the CPUs the timed calls run on (``_pin``); every thread is pinned there by ``Arm``
        self.cpus = tuple(cpus)
        self.fd_in = fd_in
        self.fd_out = fd_out
        self.device = device
        self.cuda = device.startswith("cuda")
        self.baseline = baseline
        self.run: Callable[..., Any] | None = None
        self.setup: Callable[..., Any] | None = None
        self.folder: str | None = None
        self.timed_args: list[Any] = []
        self.sets: list[list[Any]] = []
        self.current_set = -1
        self.names: list[str] = []
        self.input_names: list[str] = []
        #: the timed inputs the definition's reference writes (their positions): judged as outputs
        self.written: list[int] = []
        self.expected: list[wire.OutputSpec] = []
        self.timer: Any = None
        self.rolled: list[bool] = []
        self.current_shift = 0
        self.current_perturb = 0
        #: the plan the reference's inputs were last made for, and those inputs (a label alone names no plan:
        #: every workload has an "input set 0")
        self.reference_plan: wire.Plan | None = None
        self.reference_inputs: list[Any] = []
        self.time_setup = False
        self.last: list[Any] | str | None = None
        #: (profiler, file) when ``PROFILE_ENV`` asks for one (``main``)
        self.profile: tuple[Any, str] | None = None
        #: memory shared with the parent, through which large answers go (``wire.SharedRegion``)
        self.region: wire.SharedRegion | None = None
        #: memory the parent writes the timed inputs into (CPU; ``staging``), and whether it does for this run
        self.input_region: wire.SharedRegion | None = None
        self.parent_stages = False
        self.stop_at_return = False
        #: the probe's values (``wire.Probe``), kept while the parent reads them
        self.probed: Any = None
        #: the nonce of the request being answered (the answer echoes it)
        self.nonce = 0
        #: notes for the next answer that can carry them (``hook_notes``)
        self.pending: list[wire.Note] = []
        #: kictl's checks of the last timed call, run once its answer is sent (CPU: ``call_timed``)
        self.deferred: Callable[[], None] | None = None

    def send(self, message: wire.Message) -> None:
        if self.run is not None and not isinstance(message, wire.Failed | wire.HarnessError):
            self.hook_notes("sending its answer")
        if self.pending and hasattr(message, "notes"):
            known = set(message.notes)
            extra = tuple(note for note in self.pending if note not in known)
            message = dataclasses.replace(message, notes=(*message.notes, *extra))  # type: ignore[type-var]
            self.pending = []
        wire.write_frame(self.fd_out, message, self.region, self.nonce)

    def hook_notes(self, when: str) -> None:
        """Refuse the run when a hook of the implementation's is active now (``integrity.foreign_hooks``): it
        would run inside kictl's own work in this process (staging, audits, the flush, the checks)."""
        for hook in integrity.foreign_hooks(own_profiler=self.profile is not None):
            _note(self.pending, Check.TIMER_NOT_PATCHED, f"{hook}, seen when kictl's worker was {when}")

    def serve(self) -> None:
        while True:
            try:
                request, self.nonce = wire.read_frame_nonce(self.fd_in, _ALLOWED)
            except wire.PeerClosed:
                return
            except wire.WireError as exc:
                self.send(wire.HarnessError(detail=f"kictl sent a request the worker cannot read: {exc}"))
                return
            if isinstance(request, wire.Stop):
                return
            if isinstance(request, wire.Finish):
                self.dump_profile()  # what ran so far, in case the worker is killed before it stops
            if self.run is not None:
                self.hook_notes(f"given a {request.TYPE} request")
            try:
                answer = self.answer(request)
            except Failure as exc:
                self.send(wire.Failed(status=exc.status, detail=exc.detail))
                return
            except BaseException:
                detail = _traceback_tail(self.folder)
                if self.run is None and not isinstance(request, wire.Load):
                    self.send(wire.HarnessError(detail=detail))
                else:
                    self.send(wire.Failed(status="runtime_error", detail=detail))
                return
            self.send(answer)
            if self.stop_at_return and isinstance(answer, (wire.Sample, wire.Looped)):
                # the call's outputs are where the answer says: this process stops now, before anything of the
                # implementation's can run again, and kictl's parent reads them there, then lets it go on
                timing.original("raise_signal")(timing.original("SIGSTOP"))
            if self.deferred is not None:
                # kictl's checks of a CPU call, after its answer (the parent's clock has stopped): their notes
                # go with the next answer; a failure here is the answer to the next request
                deferred, self.deferred = self.deferred, None
                try:
                    deferred()
                except BaseException:
                    failed = _traceback_tail(self.folder)
                    try:
                        request, self.nonce = wire.read_frame_nonce(self.fd_in, _ALLOWED)
                    except wire.WireError:
                        return
                    self.send(wire.Failed(status="runtime_error", detail=failed))
                    return

    def dump_profile(self) -> None:
        """Write the profile so far (``PROFILE_ENV``); dumping stops the profiler, so it starts again."""
        if self.profile is None:
            return
        profiler, path = self.profile
        with contextlib.suppress(OSError):  # a sandboxed worker cannot write outside its /tmp
            profiler.dump_stats(path)
        profiler.enable()

    def answer(self, request: wire.Message) -> wire.Message:
        if isinstance(request, wire.Ping):
            return wire.Pong()
        if isinstance(request, wire.Probe):
            return self.probe(request.count)
        if isinstance(request, wire.Load):
            return self.load(request)
        if self.run is None:
            raise Failure("runtime_error", f"kictl asked for {request.TYPE} before loading an implementation")
        if isinstance(request, wire.Reference):
            return self.reference(request)
        if isinstance(request, wire.Check):
            return self.check(request)
        if isinstance(request, wire.Arm):
            return self.arm(request)
        if isinstance(request, wire.Stage):
            return self.stage(request)
        if isinstance(request, wire.Call):
            return self.call_timed(request.settle)
        if isinstance(request, wire.Audit):
            return self.audit()
        if isinstance(request, wire.Finish):
            return self.finish()
        if isinstance(request, wire.Loop):  # energy (issue 31)
            return self.loop(request.count)
        raise Failure("runtime_error", f"unexpected request {request.TYPE}")  # pragma: no cover

    # ----------------------------------------------------------------- loading

    def load(self, request: wire.Load) -> wire.Message:
        """Check the sources' digests, write them into a private folder, import the entry point."""
        folder = tempfile.mkdtemp(prefix="kictl-sources-")
        for source in request.files:
            path = PurePosixPath(source.path)
            if path.is_absolute() or ".." in path.parts or not path.parts:
                raise Failure("compile_error", f"source path {source.path!r} is not inside the implementation")
            if hashlib.sha256(source.content).hexdigest() != source.sha256:
                raise Failure("compile_error", f"{source.path}: its bytes do not have the record's sha256")
            target = Path(folder, *path.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.content)
            target.chmod(0o444)
        name = f"kictl_implementation_{os.getpid()}"
        spec = importlib.util.spec_from_file_location(name, Path(folder, request.entry))
        if spec is None or spec.loader is None:
            raise Failure("compile_error", f"cannot load {request.entry} as a Python module")
        loaded = importlib.util.module_from_spec(spec)
        sys.path.insert(0, folder)
        sys.modules[name] = loaded
        self.folder = folder
        try:
            spec.loader.exec_module(loaded)
        except BaseException:
            raise Failure("compile_error", _traceback_tail(folder)) from None
        run = getattr(loaded, request.function, None)
        if not callable(run):
            raise Failure("compile_error", f"{request.entry} defines no function {request.function}(...)")
        setup = getattr(loaded, "setup", None)
        self.run, self.setup = with_constants(run, request.constants), None
        if callable(setup):
            self.setup = with_constants(setup, request.constants)
        # what the imports made lives as long as the worker: the collections after each run (finish) need not
        # walk it again (torch's and FlashInfer's objects: 0.1-0.2 s a collection)
        gc.collect()
        gc.freeze()
        return wire.Loaded(has_setup=self.setup is not None)

    def call(self, function: Callable[..., Any], args: Sequence[Any]) -> Any:
        """One call of the implementation; raises ``Failure("runtime_error")``."""
        try:
            return function(*args)
        except BaseException:
            raise Failure("runtime_error", _traceback_tail(self.folder)) from None

    def inputs(self, plan: wire.Plan) -> list[Any]:
        return materialize_plans([plan], self.device)[0]

    def output_notes(self, outputs: Sequence[Any], notes: list[wire.Note], where: str) -> None:
        """Shape, dtype and device of every output against the definition's."""
        torch = torch_module()

        for spec, tensor in zip(self.expected, outputs, strict=True):
            if tensor.device != torch.device(self.device):
                _note(notes, Check.PLAIN_TENSOR_OUTPUTS, f"{where}: output {spec.name} is on {tensor.device}")
            if tuple(tensor.shape) != spec.shape or str(tensor.dtype).removeprefix("torch.") != spec.dtype:
                _note(
                    notes,
                    Check.PLAIN_TENSOR_OUTPUTS,
                    f"{where}: output {spec.name} is {str(tensor.dtype).removeprefix('torch.')} "
                    f"{list(tensor.shape)}, the definition says {spec.dtype} {list(spec.shape)}",
                )

    # ----------------------------------------------------------------- reference and correctness

    def reference(self, request: wire.Reference) -> wire.Message:
        assert self.run is not None
        names = [spec.name for spec in request.outputs]
        if request.plan != self.reference_plan:  # the whole plan: its seeds, index values and blobs
            self.reference_plan, self.reference_inputs = None, []
            self.reference_inputs = self.inputs(request.plan)
            self.reference_plan = request.plan
        made = self.reference_inputs
        rolled = [spec.kind == "random" for spec in request.plan.inputs]
        args = [
            _perturbed(_rolled(value, request.shift, k), request.perturb) if roll else value
            for k, (value, roll) in enumerate(zip(made, rolled, strict=True))
        ]
        torch = torch_module()
        input_names = [spec.name for spec in request.plan.inputs]
        declared = _positions(input_names, request.written)
        for k in declared:  # the call writes them: the inputs this worker keeps for its next calls stay as made
            if isinstance(args[k], torch.Tensor):
                args[k] = args[k].clone()
        kept: list[Any] = []
        if not request.shift and not request.perturb:  # a correctness round's call: does the reference write?
            tensors = [arg for arg in args if isinstance(arg, torch.Tensor)]
            if sum(t.numel() * t.element_size() for t in tensors) <= REFERENCE_WRITES_CHECK_BYTES:
                kept = [arg.clone() if isinstance(arg, torch.Tensor) else None for arg in args]
        value = self.call(self.run, args)
        written = tuple(
            spec.name
            for spec, arg, then in zip(request.plan.inputs, args, kept, strict=False)
            if then is not None and not _same_bits(arg, then)
        )
        if set(written) - {input_names[k] for k in declared}:
            # an input kictl did not know the reference writes: the inputs kept for the next calls may hold what
            # the call wrote, so they are made again; the session judges the workload again with it named
            self.reference_plan, self.reference_inputs = None, []
        try:
            outputs = normalize(value, names)
        except OutputStructureError as exc:
            raise Failure("runtime_error", f"the reference {exc}") from None
        packed = tuple(pack(t) for t in [*outputs, *(args[k] for k in declared)])
        if self.cuda:
            # kictl's reference workers (this request is theirs alone) run several at once beside the
            # implementations' workers, and a reference may take many times its inputs in temporaries (a 6 GiB
            # float32 copy of an FP8 MoE's weights): the blocks torch's allocator keeps go back to the GPU after
            # each call, so an idle reference worker holds its inputs and nothing more
            del value, outputs, args, kept
            torch.cuda.empty_cache()
        return wire.Outputs(tensors=packed, error=None, notes=(), written=written)

    def check(self, request: wire.Check) -> wire.Message:
        """One call on fresh tensors holding the round's inputs; its outputs and evidence."""
        torch = torch_module()

        assert self.run is not None
        self.expected = list(request.outputs)
        names = [spec.name for spec in request.outputs]
        input_names = [spec.name for spec in request.plan.inputs]
        written = _positions(input_names, request.written)
        notes: list[wire.Note] = []
        # kictl's own preparation of the round: no function or dispatch mode an earlier call left sees it (one
        # left on the stack would otherwise run kictl's tensor work through the implementation's Python)
        with integrity.kictl_torch():
            sizes = [
                int(torch.Size(spec.shape).numel()) * torch.empty((), dtype=getattr(torch, spec.dtype)).element_size()
                for spec in request.outputs
            ]
            source = self.inputs(request.plan)
        if self.cuda:
            with integrity.kictl_torch():
                args = [torch.empty_like(a) if isinstance(a, torch.Tensor) else a for a in source]
                for arg in args:
                    if isinstance(arg, torch.Tensor):
                        integrity.poison_in_place(arg)
                integrity.poison_allocator(self.device, sizes)
            sleep = timing.original("sleep")
            cycles = timing.spin_cycles_per_ns(self.device)
            torch.cuda.synchronize()
            if sleep is not None and cycles is not None:
                sleep(int(STREAM_CHECK_SPIN_NS * cycles))
            for arg, value in zip(args, source, strict=True):
                if isinstance(arg, torch.Tensor):
                    arg.copy_(value, non_blocking=True)
            value = self.call(self.run, args)
            try:
                outputs = normalize(value, names)
            except OutputStructureError as exc:
                torch.cuda.synchronize()
                return wire.Outputs(tensors=(), error=str(exc), notes=tuple(notes))
            on_stream = [t.detach().clone() for t in [*outputs, *(args[k] for k in written)]]
            torch.cuda.synchronize()
            late = [
                name
                for name, a, b in zip(
                    [*names, *(input_names[k] for k in written)],
                    [*outputs, *(args[k] for k in written)],
                    on_stream,
                    strict=True,
                )
                if not _same_bits(a, b)
            ]
            if late:
                _note(
                    notes,
                    Check.STREAM_ORDERED,
                    f"outputs {', '.join(late)} changed after the calling stream finished the call",
                )
        else:
            with integrity.kictl_torch():
                args = [a.clone() if isinstance(a, torch.Tensor) else a for a in source]
                integrity.poison_allocator(self.device, sizes)
            value = self.call(self.run, args)
            try:
                outputs = normalize(value, names)
            except OutputStructureError as exc:
                return wire.Outputs(tensors=(), error=str(exc), notes=tuple(notes))
            on_stream = [*outputs, *(args[k] for k in written)]
        self.hook_notes("back from a correctness call")
        with integrity.kictl_torch():  # kictl's own checks: no function or dispatch mode of the call's sees them
            changed = [
                name
                for k, (name, now, then) in enumerate(zip(input_names, args, source, strict=True))
                if k not in written and isinstance(now, torch.Tensor) and not _same_bits(now, then)
            ]
            if changed:
                _note(notes, Check.INPUTS_UNCHANGED, f"a call changed {', '.join(changed)}")
            shared = integrity.aliasing(
                list(zip(names, outputs, strict=True)), list(zip(input_names, args, strict=True))
            )
            for line in shared:
                _note(notes, Check.OUTPUTS_NOT_ALIAS_INPUTS, line)
            self.output_notes(outputs, notes, "a correctness call")
            host = tuple(pack(t) for t in on_stream)
            if not shared:
                for tensor in outputs:
                    integrity.poison_in_place(tensor)
        return wire.Outputs(tensors=host, error=None, notes=tuple(notes))

    # ----------------------------------------------------------------- timed calls

    def arm(self, request: wire.Arm) -> wire.Message:
        """Timed tensors holding the setup plan's values, setup() on them, the timed input sets ready."""
        torch = torch_module()

        self.expected = list(request.outputs)
        self.names = [spec.name for spec in request.outputs]
        self.input_names = [spec.name for spec in request.setup_plan.inputs]
        self.written = _positions(self.input_names, request.written)
        self.stop_at_return = request.stop_at_return
        self.rolled = [spec.kind == "random" for spec in request.setup_plan.inputs]

        # the parent stages the timed values itself (judge.staging: in the inputs region on the CPU, in the timed
        # tensors' device memory on a GPU), and never sends their plans: only the setup values here
        self.parent_stages = request.parent_stages and (self.cuda or self.input_region is not None)
        plans = [request.setup_plan] if self.parent_stages else [request.setup_plan, *request.timed_plans]
        self.timed_args, *self.sets = materialize_plans(plans, self.device)
        self.current_set = -1
        if self.parent_stages and not self.cuda:
            assert self.input_region is not None
            offsets = regions.layout(request.setup_plan, self.input_region.size)
            if offsets is None:
                raise Failure("runtime_error", "kictl asked for inputs staged in a region they do not fit")
            for k, (offset, spec) in enumerate(zip(offsets, request.setup_plan.inputs, strict=True)):
                if offset is not None and type(self.timed_args[k]) is torch.Tensor:
                    shared = regions.view(self.input_region.map, offset, spec)
                    shared.copy_(self.timed_args[k])
                    self.timed_args[k] = shared
        self.time_setup = request.time_setup
        pin_all(self.cpus)  # from here on (setup(), warm-up, timed calls) on the timed calls' CPUs only
        notes: list[wire.Note] = []
        # where the timed tensors lie, found before setup() runs: kictl's parent names an output lying there
        inputs = self.input_refs() if self.cuda and self.stop_at_return else ()
        staged = self.staged_refs() if self.cuda and self.parent_stages else ()
        if self.setup is not None and not request.time_setup:
            self.call(self.setup, self.timed_args)
        if self.cuda:
            torch.cuda.synchronize()
        self.timer = None  # the last run's timer (its buffers) goes before this run's is made
        self.timer = timing.make_timer(request.timer, self.device, request.flush_bytes, self.collector)
        before = integrity.watch_instance("timer", self.timer)
        if not self.parent_stages:
            self.copy_set(0, 0)
        try:
            self.timer.prepare(self.timed_call)
        except BaseException:
            raise Failure("runtime_error", _traceback_tail(self.folder)) from None
        # what prepare() made (a graph) is watched as it is now; what was there before, as it was before
        self.watches["timer"] = integrity.watch_instance("timer", self.timer, before)
        return wire.Armed(notes=tuple(notes), inputs=inputs, staged=staged)

    def probe(self, count: int) -> wire.Message:
        """``count`` known values in device memory and where they lie (``wire.Probe``; before any import)."""
        torch = torch_module()

        if not self.cuda or self.run is not None or not 0 < count <= 1 << 20:
            raise Failure("runtime_error", "kictl asked for a probe of device memory it cannot make")
        self.probed = torch.arange(count, dtype=torch.int32, device=self.device)
        torch.cuda.synchronize(self.device)
        try:
            return wire.Probed(outputs=(_tensor_ref(self.probed, exported=True),))
        except cuda_ipc.IpcError as exc:
            return wire.Probed(error=wire.clean_text(str(exc), 300))

    def input_refs(self) -> tuple[wire.OutputRef, ...]:
        """Where each timed tensor input lies in device memory (its dtype, shape, strides, first element)."""
        torch = torch_module()

        refs = []
        with integrity.kictl_torch():
            for tensor in self.timed_args:
                if type(tensor) is torch.Tensor and tensor.numel():
                    refs.append(_tensor_ref(tensor))
        return tuple(refs)

    def staged_refs(self) -> tuple[wire.DeviceInput, ...]:
        """Where each random timed input lies in device memory, with its allocation's IPC handle: kictl's parent
        writes every timed call's values there (``judge.staging.DeviceStager``)."""
        torch = torch_module()

        refs = []
        with integrity.kictl_torch():
            for k, (tensor, roll) in enumerate(zip(self.timed_args, self.rolled, strict=True)):
                if not roll or type(tensor) is not torch.Tensor or not tensor.numel():
                    continue
                try:
                    refs.append(wire.DeviceInput(k, _tensor_ref(tensor, exported=True)))
                except cuda_ipc.IpcError as exc:
                    raise Failure(
                        "runtime_error", f"kictl could not export its timed input {self.input_names[k]}: {exc}"
                    ) from None
        return tuple(refs)

    def instance_changes(self) -> list[str]:
        """What an implementation replaced on kictl's timer or CUPTI collector (``timerNotPatched``)."""
        direct = getattr(self.collector, "direct", None)
        current = {
            "timer": self.timer,
            "collector": self.collector,
            "cupti_reader": direct,
            "record_reader": getattr(direct, "reader", None),
        }
        return [name for key, watch in self.watches.items() for name in integrity.instance_changes(watch, current[key])]

    def set_values(self, index: int, shift: int, perturb: int = 0) -> list[Any]:
        return [
            _perturbed(_rolled(value, shift, k), perturb) if roll else value
            for k, (value, roll) in enumerate(zip(self.sets[index], self.rolled, strict=True))
        ]

    def copy_set(self, index: int, shift: int, perturb: int = 0) -> None:
        """Input set ``index`` (random inputs rolled by ``shift``, a few values swapped by ``perturb``) into the
        timed tensors, in place, untimed."""
        torch = torch_module()

        # only the random inputs differ between sets: index tensors are left alone (their version counter too),
        # so that a plan() made on them in setup() stays valid
        for target, value, roll in zip(
            self.timed_args, self.set_values(index, shift, perturb), self.rolled, strict=True
        ):
            if roll and type(target) is torch.Tensor:
                # a probe writes through .data, which leaves the tensor's _version as the last call left it:
                # the probe then looks, to a cache keyed on (pointer, _version), like the last call again
                (target.data if perturb else target).copy_(value)
        if self.cuda:
            timing.original("synchronize")(self.device)
        self.current_set, self.current_shift, self.current_perturb = index, shift, perturb

    def timed_call(self) -> Any:
        assert self.run is not None
        if self.time_setup and self.setup is not None:
            self.setup(*self.timed_args)
        return self.run(*self.timed_args)

    def stage(self, request: wire.Stage) -> wire.Message:
        if self.parent_stages or not 0 <= request.input_set < len(self.sets) or self.timer is None:
            raise Failure("runtime_error", f"kictl asked for input set {request.input_set} before arming")
        self.last = None
        with integrity.kictl_torch():
            self.copy_set(request.input_set, request.shift, request.perturb)
        return wire.Staged()

    def call_timed(self, settle: bool = True) -> wire.Message:
        if self.timer is None:
            raise Failure("runtime_error", "kictl asked for a timed call before arming")
        self.last = None
        timer = self.timer
        try:
            # only the CUPTI timer settles calls in batches; its figure then comes with a later answer's
            sample = timer.measure(self.timed_call, settle) if self.batched else timer.measure(self.timed_call)
        except BaseException:
            raise Failure("runtime_error", _traceback_tail(self.folder)) from None
        if not self.cuda:
            # on the CPU the figure is the parent's clock around this request: the answer goes at once, and
            # kictl's checks of the call run after it, their notes going with the next answer (``serve``)
            self.last = None
            self.deferred = lambda: self.pending.extend(self.call_notes(sample))
            refs, error = self.output_refs(sample.outputs) if self.stop_at_return else ((), None)
            return wire.Sample(
                ns=sample.ns, enqueued_ahead=sample.enqueued_ahead, notes=(), outputs=refs, outputs_error=error
            )
        notes = self.call_notes(sample)
        earlier = self.settled(notes)
        if sample.ns is not None:
            self.figure_notes(sample, notes)
        # where the outputs lie in device memory (the timer synchronised the device): kictl's parent reads them
        # there through their IPC handles while this process is stopped (``serve``)
        refs, error = self.output_refs(sample.outputs) if self.stop_at_return else ((), None)
        return wire.Sample(
            ns=sample.ns,
            enqueued_ahead=sample.enqueued_ahead,
            notes=tuple(notes),
            events_ns=sample.events_ns,
            kernels=sample.kernels,
            busy_ns=sample.busy_ns,
            settled=earlier,
            outputs=refs,
            outputs_error=error,
        )

    def output_refs(self, value: Any) -> tuple[tuple[wire.OutputRef, ...], str | None]:
        """Where a call's outputs lie, for kictl's parent to read them there itself while this process is stopped
        (``Arm.stop_at_return``); or why it cannot (not plain tensors on the run's device in the definition's
        order, or device memory that has no IPC handle)."""
        torch = torch_module()

        try:
            outputs = normalize(value, self.names)
        except OutputStructureError as exc:
            return (), wire.clean_text(str(exc), 300)
        refs = []
        where = "CUDA" if self.cuda else "CPU"
        with integrity.kictl_torch():
            for name, tensor in zip(self.names, outputs, strict=True):
                if type(tensor) is not torch.Tensor or tensor.device.type != ("cuda" if self.cuda else "cpu"):
                    return (), f"returned output {name}, which is not a plain {where} tensor"
                try:
                    refs.append(_tensor_ref(tensor, exported=self.cuda and tensor.numel() > 0))
                except cuda_ipc.IpcError as exc:
                    return (), wire.clean_text(f"returned output {name} in device memory with no IPC handle ({exc})")
        return tuple(refs), None

    def call_notes(self, sample: timing.Measured) -> list[wire.Note]:
        """kictl's checks of a timed call's outputs and of its own objects (``self.last`` set)."""
        notes: list[wire.Note] = []
        self.hook_notes("back from a timed call")
        try:
            self.last = normalize(sample.outputs, self.names)
        except OutputStructureError as exc:
            self.last = str(exc)
            _note(notes, Check.PLAIN_TENSOR_OUTPUTS, f"a timed call {exc}")
        else:
            with integrity.kictl_torch():
                self.output_notes(self.last, notes, "a timed call")
        replaced = self.instance_changes()
        if replaced:  # the same words as finish() says them, so that the run's detail names them once
            _note(notes, Check.TIMER_NOT_PATCHED, f"replaced: {', '.join(replaced)}")
        return notes

    @property
    def batched(self) -> bool:
        return isinstance(self.timer, timing.CuptiTimer)

    def settled(self, notes: list[wire.Note], everything: bool = False) -> tuple[wire.Settled, ...]:
        """The earlier calls the timer has settled since the last answer (``everything``: settle the rest now),
        their checks' findings added to ``notes``."""
        if not self.batched:
            return ()
        timer = self.timer
        figures = timer.take_settled()
        if everything:  # at the end of a run: what ran since the last call's window (its audit) is the harness's
            figures += timer.settle(harness_after=True)
        for _, figure in figures:
            self.figure_notes(figure, notes)
        return tuple(
            wire.Settled(
                call=number, ns=figure.ns, events_ns=figure.events_ns, kernels=figure.kernels, busy_ns=figure.busy_ns
            )
            for number, figure in figures
        )

    def figure_notes(self, sample: timing.Measured, notes: list[wire.Note]) -> None:
        """What the timer found about a call's device work (CUPTI: once its figure is settled)."""
        if sample.unordered:
            _note(
                notes,
                Check.STREAM_ORDERED,
                f"{sample.unordered} kernel(s), copies or memsets of a timed call were not ordered on the calling "
                "stream (work on another stream that the calling stream did not wait for, or that started before "
                "the call's inputs were ready on it, or that ended after the call's end)",
            )
        for reason in sample.tampered:
            _note(notes, Check.TIMER_NOT_PATCHED, f"a timed call: {reason}")
        if sample.outside:
            _note(
                notes,
                Check.NO_WORK_OUTSIDE_CALLS,
                f"{sample.outside} kernel(s), copies or memsets ran outside the timed call's window on the device",
            )

    def loop(self, count: int) -> wire.Message:
        """Energy (issue 31): ``count`` calls back to back on the staged values, through the timer's own call
        (a graph timer replays its graph), then one synchronisation; the last call's outputs kept for an audit.
        The parent reads the energy counter and its own clock around this request."""
        if self.timer is None or count <= 0:
            raise Failure("runtime_error", "kictl asked for a loop before arming")
        self.last = None
        timer = self.timer
        step: Callable[[], Any] = self.timed_call
        if isinstance(timer, timing.CudaGraphTimer):  # a replay of the graph captured from one call

            def step() -> Any:
                return timer._timed(self.timed_call)

        outputs: Any = None
        try:
            for _ in range(count):
                outputs = step()
            if self.cuda:
                timing.original("synchronize")(self.device)
        except BaseException:
            raise Failure("runtime_error", _traceback_tail(self.folder)) from None
        notes: list[wire.Note] = []
        try:
            self.last = normalize(outputs, self.names)
        except OutputStructureError as exc:
            self.last = str(exc)
            _note(notes, Check.PLAIN_TENSOR_OUTPUTS, f"a loop call {exc}")
        else:
            self.output_notes(self.last, notes, "a loop call")
        # where the last call's outputs lie: kictl's parent takes them there while this process is stopped
        refs, error = self.output_refs(outputs) if self.stop_at_return else ((), None)
        return wire.Looped(calls=count, notes=tuple(notes), outputs=refs, outputs_error=error)

    def audit(self) -> wire.Message:
        if isinstance(self.last, str):
            return wire.Outputs(tensors=(), error=self.last, notes=())
        if self.last is None:
            raise Failure("runtime_error", "kictl asked for an audit before a timed call")
        with integrity.kictl_torch():
            after = [self.timed_args[k] for k in self.written]  # staged before the call, written by it
            return wire.Outputs(tensors=tuple(pack(t) for t in [*self.last, *after]), error=None, notes=())

    def finish(self) -> wire.Message:
        with integrity.kictl_torch():
            return self._finish()

    def _finish(self) -> wire.Message:
        torch = torch_module()

        notes: list[wire.Note] = []
        # the waiting calls first: what the checks below run on the device is after every call's window
        settled = self.settled(notes, everything=True) if self.timer is not None else ()
        if self.cuda:
            torch.cuda.synchronize()
        if self.current_set >= 0:
            changed = [
                spec
                for k, (spec, now, then) in enumerate(
                    zip(
                        self.input_names,
                        self.timed_args,
                        self.set_values(self.current_set, self.current_shift, self.current_perturb),
                        strict=True,
                    )
                )
                if k not in self.written and isinstance(now, torch.Tensor) and not _same_bits(now, then)
            ]
            if changed:
                _note(notes, Check.INPUTS_UNCHANGED, f"timed calls changed {', '.join(changed)}")
        # modules and kictl's instances noted apart: the instances' words then match a timed call's note
        for touched in (integrity.patched(self.baseline), self.instance_changes()):
            if touched:
                _note(notes, Check.TIMER_NOT_PATCHED, f"replaced: {', '.join(touched)}")
        spin = self.timer.spin_ns if self.timer is not None else None
        self.last = None
        gc.collect()
        return wire.Finished(notes=tuple(notes), device_spin_ns=spin, settled=settled)


# --------------------------------------------------------------------------- entry point


def _pin(cpus: Sequence[int], threads: int) -> tuple[tuple[int, ...], int]:
    """The CPUs this worker's timed calls run on (those asked for that it may use) and torch's thread count.

    The pin itself comes with ``Arm`` (``pin_all``): until then the worker's start (CUDA context, CUPTI),
    the import, the correctness rounds and ``setup()`` may use any CPU the parent may, so that several
    workers do not queue on the one CPU they take turns on for the timed calls.
    """
    torch = torch_module()

    allowed: set[int] = set()
    with contextlib.suppress(OSError, AttributeError):
        allowed = set(os.sched_getaffinity(0))
    target = sorted(set(cpus) & allowed) if allowed else list(cpus)
    if not target:
        target = sorted(allowed)
    torch.set_num_threads(max(1, threads))
    # the thread pool's threads start now, before the baseline the thread count is judged against
    torch.randn(256, 256).matmul(torch.randn(256, 256)).sum()
    return tuple(target), torch.get_num_threads()


def pin_all(cpus: Sequence[int]) -> None:
    """Pin every thread of this process to ``cpus`` (before the warm-up and the timed calls)."""
    if not cpus:
        return
    wanted = set(cpus)
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError, ValueError):
                os.sched_setaffinity(int(task), wanted)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: ``python -m kictl.bench.worker --fd-in N --fd-out M --device D``."""
    parser = argparse.ArgumentParser(prog="kictl-bench-worker")
    parser.add_argument("--fd-in", type=int, required=True)
    parser.add_argument("--fd-out", type=int, required=True)
    parser.add_argument("--device", required=True)
    parser.add_argument("--cpus", default="")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-cupti", action="store_true", help="time nothing: kictl's reference worker")
    parser.add_argument(
        "--keep-freed-memory", action="store_true", help="malloc keeps what is freed (kictl's reference worker)"
    )
    parser.add_argument("--fd-shared", type=int, default=-1, help="the parent's shared region (wire.SharedRegion)")
    parser.add_argument("--fd-inputs", type=int, default=-1, help="the region the parent stages inputs in (CPU)")
    args = parser.parse_args(argv)
    faulthandler.enable()  # a crash in native code leaves its Python stack in the log
    with contextlib.suppress(AttributeError, ValueError, RuntimeError):  # and so does a timeout (runner._gone)
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    with contextlib.suppress(OSError):
        os.setsid()  # its own session and process group (bubblewrap's --new-session does the same)
    fd_in, fd_out = args.fd_in, args.fd_out
    integrity.guard_audit_hooks()  # before anything of an implementation's can add one
    _cap_files()
    if args.keep_freed_memory:
        keep_freed_memory()
    try:
        torch = torch_module()

        wanted = [int(item) for item in args.cpus.split(",") if item]
        cpus, threads = _pin(wanted, args.threads)
        timing.bind_originals()
        collector: Any = None
        cupti_error: str | None = None
        if args.device.startswith("cuda"):
            torch.cuda.set_device(torch.device(args.device))
            torch.cuda.init()
            # CUPTI attaches before anything of the implementation's is imported: its callbacks are kictl's
            if args.no_cupti:
                cupti_error = "not attached: this worker times nothing"
            else:
                collector, cupti_error = _attach_cupti()
            # the context, its threads and cuBLAS's handle exist before the thread count kictl judges against
            probe = torch.randn(64, 64, device=args.device)
            (probe @ probe).sum().item()
            if collector is not None:
                collector.drain()
        env = environment.capture(args.device)
        baseline = integrity.take_baseline()
    except BaseException:
        wire.write_frame(fd_out, wire.HarnessError(detail=_traceback_tail()))
        return
    timers = (timing.CuptiTimer.name,) if collector is not None else ()
    dependencies_error = None
    if collector is not None and not collector.dependencies_available:
        dependencies_error = wire.clean_text(str(collector.dependencies_error or "unknown reason"), 300)
    ready = wire.Ready(
        environment=json.dumps(env),
        cpus=cpus,
        threads=threads,
        timers=timers,
        cupti_error=cupti_error,
        dependencies_error=dependencies_error,
    )
    wire.write_frame(fd_out, ready)
    worker = Worker(fd_in, fd_out, args.device, baseline, collector, cpus)
    if args.fd_shared >= 0:
        try:
            worker.region = wire.SharedRegion.attach(args.fd_shared)
        except (OSError, ValueError):  # its answers then all go through the pipe
            worker.region = None
    if args.fd_inputs >= 0:
        try:
            worker.input_region = wire.SharedRegion.attach(args.fd_inputs)
        except (OSError, ValueError):  # the worker then stages its inputs itself (the parent is told nothing)
            worker.input_region = None
    profile_to = os.environ.get(PROFILE_ENV)
    if not profile_to:
        worker.serve()
        return
    # a developer's diagnosis (docs/bench.md, "Where a session's time goes"): the worker's own functions under
    # cProfile, which slows every Python call it makes; never for figures anyone keeps
    worker.profile = (cProfile.Profile(), os.path.join(profile_to, f"worker-{os.getpid()}.prof"))
    worker.profile[0].runcall(worker.serve)
    worker.dump_profile()


#: The largest file a worker (and what it starts) may write: its log (stdout and stderr) among them, so a worker
#: cannot fill kictl's disk; past it the write fails (SIGXFSZ ends the worker, a runtime_error of its own).
MAX_FILE_BYTES = 1 << 30


def _cap_files() -> None:
    """Cap the size of every file the worker writes, soft and hard (no capability raises it again)."""
    with contextlib.suppress(OSError, ValueError):
        _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        cap = MAX_FILE_BYTES if hard == resource.RLIM_INFINITY else min(hard, MAX_FILE_BYTES)
        resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))


#: glibc's ``mallopt`` parameters (malloc.h): how many allocations may be ``mmap``s, and how much free memory at
#: the heap's top is kept rather than given back to the kernel (an ``int``: at most 2 GiB)
_M_MMAP_MAX = -4
_M_TRIM_THRESHOLD = -1
_KEPT_FREE_BYTES = (1 << 31) - 1


#: the most input bytes a reference call copies to see whether the reference writes an input (``reference``), in
#: the correctness rounds' calls; a reference with larger inputs is not looked at, and a write of its would show as
#: every implementation's ``inputsUnchanged`` instead
REFERENCE_WRITES_CHECK_BYTES = 1 << 30


def _positions(input_names: Sequence[str], written: Sequence[wire.OutputSpec]) -> list[int]:
    """Where the inputs the definition's reference writes are among the call's arguments."""
    found = [input_names.index(spec.name) for spec in written if spec.name in input_names]
    if len(found) != len(written):
        raise Failure("runtime_error", "kictl named a written input that the definition does not have")
    return found


def keep_freed_memory() -> bool:
    """Make glibc's malloc keep freed memory for the next allocation; whether it could (glibc only).

    A large reference on the CPU allocates and frees tensors of hundreds of MB block after block: glibc serves
    each with a fresh ``mmap`` and unmaps it on free, so the kernel faults in and zeroes every page again, which
    took half the reference's time (the 1,117-query prefill: 52 s a call, 26 s of it in the kernel; 35 s with
    this). Only kictl's reference workers ask for it: they time nothing, and an implementation's worker keeps
    the allocator its author would see.
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt): the allocator stays as it is
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, _KEPT_FREE_BYTES))


def _attach_cupti() -> tuple[Any, str | None]:
    """A started CUPTI collector, or None and why not (``cupti-python`` missing, CUPTI refused to attach)."""
    try:
        collector = CuptiCollector()
        collector.start()
    except EnvError as exc:
        return None, wire.clean_text(str(exc), 300)
    return collector, None
