"""The worker process: runs one implementation (or the reference) on the workloads kictl sends.

``runner`` starts ``main`` in a fresh process (multiprocessing, spawn) and
talks to it over a pipe; the worker never sees the registry.  For each job
it builds the inputs (``inputs.materialize``) before importing the
implementation (so the implementation never runs while only a seed exists),
then:

* reference job: calls the reference on the inputs of each offset and sends
  the outputs back;
* implementation job: one call per correctness round on fresh tensors (on a
  GPU the round's values are copied into them on the calling stream behind
  a 2 ms device spin, so work that is not ordered on that stream reads
  garbage, and the outputs are copied on that stream right behind the call,
  so work left running on another stream is caught), then ``setup(...)`` if
  the module has one, then the timed calls (``timing``) on one set of
  tensors, one of them audited.  Integrity evidence goes back with the
  outputs; kictl judges it (``integrity``, ``correctness``).

Anything the implementation raises ends the job as ``compile_error`` (at
import) or ``runtime_error`` with the traceback's last lines, and the worker
exits; kictl starts a new one for the next workload.  stdout and stderr go
to a log file whose tail kictl reads when the worker dies without a word.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import importlib.util
import os
import secrets
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kictl.bench import environment, integrity, timing
from kictl.bench.inputs import InputPlan, materialize

TAIL_LINES = 25
STREAM_CHECK_SPIN_NS = 2_000_000


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


def _traceback_tail(folder: str | None = None) -> str:
    """The current exception's traceback from the implementation's first frame on.

    Frames of kictl's worker and of the import machinery are left out, and the
    scratch folder the sources were written to is cut from paths, so that the
    detail reads the same on every machine.
    """
    error = sys.exc_info()[1]
    if error is None:
        return ""
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
    if prefix:
        text = text.replace(prefix, "")
    return tail(text)


def _redirect(log_path: str) -> None:
    """stdout and stderr of this process (and of what it starts) into the log file."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def main(conn: Any, device: str, log_path: str) -> None:
    """Entry point of the worker process."""
    _redirect(log_path)
    faulthandler.enable()  # a crash in native code leaves its Python stack in the log
    with contextlib.suppress(OSError):
        os.setsid()  # its own process group, so that kictl can end it with what it started
    try:
        import torch

        timing.bind_originals()
        if device.startswith("cuda"):
            torch.cuda.set_device(torch.device(device))
            torch.cuda.init()  # type: ignore[no-untyped-call]
        env = environment.capture(device)
        baseline = integrity.take_baseline()
    except BaseException:
        conn.send(("harness_error", _traceback_tail()))
        return
    conn.send(("ready", env))
    Worker(conn, device, baseline).serve()


class Worker:
    def __init__(self, conn: Any, device: str, baseline: integrity.Baseline) -> None:
        self.conn = conn
        self.device = device
        self.cuda = device.startswith("cuda")
        self.baseline = baseline
        self.module_key: str | None = None
        self.run: Callable[..., Any] | None = None
        self.setup: Callable[..., Any] | None = None
        self.folder: str | None = None

    # ----------------------------------------------------------------- loop

    def serve(self) -> None:
        while True:
            try:
                kind, job = self.conn.recv()
            except (EOFError, OSError):
                return
            if kind == "stop":
                return
            try:
                if job["role"] == "reference":
                    payload = self.reference_job(job)
                else:
                    payload = self.implementation_job(job)
            except Failure as exc:
                self.conn.send(("failed", {"status": exc.status, "detail": exc.detail}))
                return
            except BaseException:
                self.conn.send(("harness_error", _traceback_tail()))
                return
            self.conn.send(("result", payload))
            self.release()

    def progress(self, phase: str) -> None:
        self.conn.send(("progress", phase))

    def release(self) -> None:
        gc.collect()
        if self.cuda:
            import torch

            torch.cuda.synchronize()
            torch.cuda.empty_cache()

    # ----------------------------------------------------------------- loading

    def load(self, module: dict[str, str]) -> None:
        """Import the implementation once; raises ``Failure("compile_error")``."""
        key = f"{module['folder']}::{module['entry']}::{module['function']}"
        if self.module_key == key:
            return
        folder = Path(module["folder"])
        name = f"kictl_implementation_{secrets.token_hex(4)}"
        spec = importlib.util.spec_from_file_location(name, folder / module["entry"])
        if spec is None or spec.loader is None:
            raise Failure("compile_error", f"cannot load {module['entry']} as a Python module")
        loaded = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(folder))
        sys.modules[name] = loaded
        try:
            spec.loader.exec_module(loaded)
        except BaseException:
            raise Failure("compile_error", _traceback_tail(module["folder"])) from None
        run = getattr(loaded, module["function"], None)
        if not callable(run):
            raise Failure("compile_error", f"{module['entry']} defines no function {module['function']}(...)")
        setup = getattr(loaded, "setup", None)
        self.run, self.setup = run, setup if callable(setup) else None
        self.module_key = key
        self.folder = module["folder"]

    def call(self, function: Callable[..., Any], args: Sequence[Any]) -> Any:
        """One call of the implementation; raises ``Failure("runtime_error")``."""
        try:
            return function(*args)
        except BaseException:
            raise Failure("runtime_error", _traceback_tail(self.folder)) from None

    # ----------------------------------------------------------------- outputs

    @staticmethod
    def normalize(value: Any, names: Sequence[str]) -> list[Any]:
        """The outputs in ``names`` order: one tensor, a tuple/list in order, or a dict by name."""
        import torch

        if isinstance(value, torch.Tensor):
            items = [value]
        elif isinstance(value, dict):
            if set(value) != set(names):
                raise OutputStructureError(f"returned a dict with keys {sorted(value)}, expected {list(names)}")
            items = [value[name] for name in names]
        elif isinstance(value, (tuple, list)):
            items = list(value)
        else:
            raise OutputStructureError(f"returned {type(value).__name__}, expected {len(names)} tensor(s)")
        if len(items) != len(names):
            raise OutputStructureError(f"returned {len(items)} value(s), the definition has outputs {list(names)}")
        for name, item in zip(names, items, strict=True):
            if not isinstance(item, torch.Tensor):
                raise OutputStructureError(f"output {name} is {type(item).__name__}, not a tensor")
        return items

    def output_checks(self, outputs: Sequence[Any], names: Sequence[str], notes: dict[str, list[str]]) -> None:
        import torch

        for name, tensor in zip(names, outputs, strict=True):
            if type(tensor) is not torch.Tensor:
                _note(notes, "plainTensorOutputs", f"output {name} is a {type(tensor).__name__}")
            if tensor.device != torch.device(self.device):
                _note(notes, "plainTensorOutputs", f"output {name} is on {tensor.device}, the run is on {self.device}")

    @staticmethod
    def to_host(outputs: Sequence[Any]) -> list[PackedTensor]:
        import torch

        return [pack(t.detach().as_subclass(torch.Tensor)) for t in outputs]

    # ----------------------------------------------------------------- jobs

    def inputs(self, plan: InputPlan) -> list[Any]:
        return materialize(plan, self.device)

    def reference_job(self, job: dict[str, Any]) -> dict[str, Any]:
        plans: dict[int, InputPlan] = job["plans"]
        names = [name for name, _, _ in job["outputs"]]
        first = self.inputs(plans[job["offsets"][0]])
        self.load(job["module"])
        assert self.run is not None
        outputs: dict[int, list[Any]] = {}
        for offset in job["offsets"]:
            args = first if offset == job["offsets"][0] else self.inputs(plans[offset])
            self.progress(f"reference, inputs {offset}")
            value = self.call(self.run, args)
            try:
                outputs[offset] = self.to_host(self.normalize(value, names))
            except OutputStructureError as exc:
                raise Failure("runtime_error", f"the reference {exc}") from None
            del value, args
        return {"outputs": outputs}

    def implementation_job(self, job: dict[str, Any]) -> dict[str, Any]:
        import torch

        plans: dict[int, InputPlan] = job["plans"]
        options: dict[str, Any] = job["options"]
        expected: list[tuple[str, tuple[int, ...], str]] = job["outputs"]
        names = [name for name, _, _ in expected]
        input_names = list(plans[0].names)
        timed_args = self.inputs(plans[0])
        self.load(job["module"])
        assert self.run is not None
        notes: dict[str, list[str]] = {}
        skipped: dict[str, str] = {}
        rounds: dict[int, dict[str, Any]] = {}
        sizes = [
            int(torch.Size(shape).numel()) * torch.empty((), dtype=getattr(torch, dtype)).element_size()
            for _, shape, dtype in expected
        ]
        for offset in job["round_offsets"]:
            self.progress(f"correctness, inputs {offset}")
            rounds[offset] = self.correctness_call(plans[offset], input_names, names, sizes, notes)
        if not self.cuda:
            skipped["streamOrdered"] = "no CUDA streams on the CPU"

        setup_inside = bool(options["time_setup"])
        if self.setup is not None and not setup_inside:
            self.progress("setup")
            self.call(self.setup, timed_args)
        originals = [a.clone() if isinstance(a, torch.Tensor) else a for a in timed_args]
        run, setup = self.run, self.setup

        def timed_call() -> Any:
            if setup_inside and setup is not None:
                setup(*timed_args)
            return run(*timed_args)

        def snapshot(value: Any) -> Any:
            try:
                return [t.detach().as_subclass(torch.Tensor).clone() for t in self.normalize(value, names)]
            except OutputStructureError as exc:
                return str(exc)

        total = options["iterations"] * options["trials"]
        audit_index = secrets.randbelow(total) if total > 0 else -1
        self.progress("timing")
        before = integrity.thread_idents()
        try:
            if self.cuda:
                measured = timing.time_cuda(
                    timed_call,
                    device=self.device,
                    warmup=options["warmup"],
                    iterations=options["iterations"],
                    trials=options["trials"],
                    audit_index=audit_index,
                    snapshot=snapshot,
                    flush_bytes=options["flush_bytes"],
                    cuda_graph=options["cuda_graph"],
                    host_inclusive=setup_inside,
                )
            else:
                measured = timing.time_cpu(
                    timed_call,
                    warmup=options["warmup"],
                    iterations=options["iterations"],
                    trials=options["trials"],
                    audit_index=audit_index,
                    snapshot=snapshot,
                )
        except BaseException:
            raise Failure("runtime_error", _traceback_tail(self.folder)) from None
        if self.cuda:
            torch.cuda.synchronize()
        started = integrity.new_threads(before)
        if started:
            _note(notes, "noThreadsLeft", f"threads started while timed: {', '.join(started)}")
        changed = [
            name
            for name, now, then in zip(input_names, timed_args, originals, strict=True)
            if isinstance(now, torch.Tensor) and not _same_bits(now, then)
        ]
        if changed:
            _note(notes, "inputsUnchanged", f"timed calls changed {', '.join(changed)}")
        audit = measured.audit_outputs
        audit_error = audit if isinstance(audit, str) else None
        left = integrity.new_threads(self.baseline.threads)
        if left:
            _note(notes, "noThreadsLeft", f"threads alive after the calls: {', '.join(left)}")
        touched = integrity.patched(self.baseline)
        if touched:
            _note(notes, "timerNotPatched", f"replaced: {', '.join(touched)}")
        return {
            "rounds": rounds,
            "audit": None if audit is None or audit_error else self.to_host(audit),
            "audit_error": audit_error,
            "timing": {
                "samples": measured.samples_ns,
                "enqueued_ahead": measured.enqueued_ahead,
                "device_spin_ns": measured.device_spin_ns,
            },
            "notes": notes,
            "skipped": skipped,
        }

    def correctness_call(
        self,
        plan: InputPlan,
        input_names: Sequence[str],
        names: Sequence[str],
        sizes: Sequence[int],
        notes: dict[str, list[str]],
    ) -> dict[str, Any]:
        """One call on fresh tensors holding the round's inputs; its outputs and evidence."""
        import torch

        assert self.run is not None
        source = self.inputs(plan)
        before = integrity.thread_idents()
        if self.cuda:
            args = [torch.empty_like(a) if isinstance(a, torch.Tensor) else a for a in source]
            for arg in args:
                if isinstance(arg, torch.Tensor):
                    integrity.poison_in_place(arg)
            # last allocations before the call: the blocks its outputs will most likely get
            integrity.poison_allocator(self.device, sizes)
            sleep = getattr(torch.cuda, "_sleep", None)
            cycles = timing.spin_cycles_per_ns(self.device)
            torch.cuda.synchronize()
            if sleep is not None and cycles is not None:
                sleep(int(STREAM_CHECK_SPIN_NS * cycles))
            for arg, value in zip(args, source, strict=True):
                if isinstance(arg, torch.Tensor):
                    arg.copy_(value, non_blocking=True)
            value = self.call(self.run, args)
            try:
                outputs = self.normalize(value, names)
            except OutputStructureError as exc:
                torch.cuda.synchronize()
                return {"outputs": None, "error": str(exc)}
            on_stream = [t.detach().as_subclass(torch.Tensor).clone() for t in outputs]
            torch.cuda.synchronize()
            late = [name for name, a, b in zip(names, outputs, on_stream, strict=True) if not _same_bits(a, b)]
            if late:
                _note(
                    notes,
                    "streamOrdered",
                    f"outputs {', '.join(late)} changed after the calling stream finished the call",
                )
        else:
            args = [a.clone() if isinstance(a, torch.Tensor) else a for a in source]
            integrity.poison_allocator(self.device, sizes)
            value = self.call(self.run, args)
            try:
                outputs = self.normalize(value, names)
            except OutputStructureError as exc:
                return {"outputs": None, "error": str(exc)}
            on_stream = list(outputs)
        started = integrity.new_threads(before)
        if started:
            _note(notes, "noThreadsLeft", f"threads started by a call: {', '.join(started)}")
        changed = [
            name
            for name, now, then in zip(input_names, args, source, strict=True)
            if isinstance(now, torch.Tensor) and not _same_bits(now, then)
        ]
        if changed:
            _note(notes, "inputsUnchanged", f"a call changed {', '.join(changed)}")
        shared = integrity.aliasing(list(zip(names, outputs, strict=True)), list(zip(input_names, args, strict=True)))
        if shared:
            _note(notes, "outputsNotAliasInputs", *shared)
        self.output_checks(outputs, names, notes)
        host = self.to_host(on_stream)
        if not shared:
            for tensor in outputs:
                integrity.poison_in_place(tensor)
        return {"outputs": host, "error": None}


def _note(notes: dict[str, list[str]], check: str, *lines: str) -> None:
    """Add evidence against ``check``, once per distinct line."""
    found = notes.setdefault(check, [])
    found.extend(line for line in lines if line not in found)


PackedTensor = tuple[str, tuple[int, ...], bytes]


def pack(tensor: Any) -> PackedTensor:
    """A tensor as ``(dtype name, shape, raw bytes)``: plain data for the pipe.

    Tensors are not pickled as tensors: torch would pass them through shared
    memory and a file-descriptor server thread, which a small ``/dev/shm``
    breaks and which would look like a thread the implementation left behind.
    """
    import torch

    host = tensor.detach().to("cpu").contiguous()
    raw = host.reshape(-1).view(torch.uint8).numpy().tobytes() if host.numel() else b""
    return str(host.dtype).removeprefix("torch."), tuple(host.shape), raw


def unpack(packed: PackedTensor) -> Any:
    """The tensor ``pack`` described (on the CPU)."""
    import torch

    dtype_name, shape, raw = packed
    dtype = getattr(torch, dtype_name)
    if not raw:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape)


def _same_bits(a: Any, b: Any) -> bool:
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    return bool(torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8)))
