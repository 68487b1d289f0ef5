"""The wire between kictl and a worker: data only, never code (DESIGN §7, issue 10).

A frame is ``MAGIC``, a 4-byte big-endian header length, a JSON header and
then the raw bytes of the buffers the header declares::

    b"KIW1" | u32 len | {"type": "...", "body": {...}, "buffers": [n0, ...], "nonce": N} | bytes n0 | ...

Every request the parent sends carries a fresh random ``nonce`` and its answer must echo it (issue 27): an
answer written before its request was sent (a pre-answered call) cannot know it, and is a ``WireError``.
Before anything is allocated, a frame's header and buffers are capped by what the reader expects
(``HEADER_CAPS`` by message type; buffers only where the caller allows them, up to its limit).

The header is parsed strictly (no duplicate keys, no NaN or Infinity, no
integer beyond ±(2^53-1)), its size and the buffers' sizes are capped, and
every message type has a frozen dataclass whose fields are checked against
the body: a missing, unknown or mistyped member is a ``WireError``.  Strings
that come back from a worker are sanitised (lone surrogates and control
characters replaced, length capped) before kictl holds them.  Nothing a
worker sends is executed: the parent only ever decodes JSON and copies bytes.

Tensors travel as ``TensorData`` (dtype name, shape, one buffer of raw
bytes), so torch's pickling and its shared-memory file-descriptor server
thread never come into it.

A worker's large buffers (``SHARED_MIN`` bytes or more) may go through a
``SharedRegion`` instead of the pipe: memory kictl's parent made (a sealed
memfd) and shares with that worker alone.  The worker writes a buffer there
and the header names it ``[offset, length]`` in place of its size; the parent
checks the bounds and copies it out before it decodes anything, so what the
worker writes there afterwards is never read.  A 25 MB attention output
took 15-40 ms through the pipe (issue 16).

Its size (over 600 lines) is every message of one protocol with its caps: the protocol reads as one table,
and a frame's size is capped by its message type before anything is allocated, which needs them all in one place.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import json
import mmap
import os
import re
import select
import struct
import time
import types
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, Union

from kictl import dtypes

MAGIC = b"KIW1"
MAX_HEADER_BYTES = 4 << 20
#: The most bytes one frame's buffers may hold (a GEMM 4096x4096 float32 output is 64 MiB).
MAX_BUFFER_BYTES = 8 << 30
MAX_BUFFERS = 4096
#: A buffer larger than this is read into one preallocated bytearray rather than in chunks joined afterwards.
_LARGE = 1 << 20
#: The pipes' capacity kictl asks for (Linux ``F_SETPIPE_SZ``; 64 KiB by default): fewer wake-ups per output.
PIPE_BYTES = 1 << 20
#: A worker's buffer of at least this many bytes goes through its ``SharedRegion`` (when it has one and it fits).
SHARED_MIN = 1 << 20
#: The shared region's size: a sealed memfd, whose pages exist only once written (a worker's largest answer).
SHARED_BYTES = 1 << 30
MAX_STRING = 8000
#: The largest header each message type may have (bytes), checked before the header is read: a worker that
#: sends a 4 MiB header where a ``Pong`` is due holds none of the parent's memory.
HEADER_CAPS = {
    "pong": 4096,
    "probed": 4096,
    "loaded": 4096,
    "staged": 1 << 20,
    "armed": 1 << 20,
    "sample": 1 << 20,
    "finished": 1 << 20,
    "outputs": 1 << 20,
    "failed": 256 << 10,
    "harness_error": 256 << 10,
}
#: The nonce drawn per request (below 2^53: JSON's safe integers)
NONCE_LIMIT = 2**52
MAX_DEPTH = 16
SAFE_INT = 2**53 - 1
#: The records' tensor dtypes and each one's bytes per element (the most an output of a given shape can hold):
#: the one table, ``kictl.dtypes``, a leaf the sandbox holds (no pydantic)
DTYPES = frozenset(dtypes.NAMES)
DTYPE_BYTES = dtypes.BYTES
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class WireError(Exception):
    """A frame or message that breaks the wire's rules; the peer is not to be trusted further."""


class PeerClosed(WireError):
    """The peer closed its end before a whole frame arrived."""


class WireTimeout(WireError):
    """No whole frame arrived before the deadline."""


def clean_text(text: str, limit: int = MAX_STRING) -> str:
    """``text`` as kictl may hold and print it: valid Unicode, no control characters, at most ``limit`` long.

    Lone surrogates (``\\ud800``) become U+FFFD, as do control characters other
    than tab and newline.
    """
    fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    fixed = _CONTROL.sub("\ufffd", fixed)
    if len(fixed) > limit:
        fixed = fixed[: limit - 1] + "\u2026"
    return fixed


# --------------------------------------------------------------------------- messages


@dataclass(frozen=True, slots=True)
class TensorData:
    """A tensor as data: dtype name, shape, raw little-endian bytes (C order)."""

    dtype: str
    shape: tuple[int, ...]
    data: bytes


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file of an implementation: its path, the sha256 hex the record gives, its bytes."""

    path: str
    sha256: str
    content: bytes


@dataclass(frozen=True, slots=True)
class InputSpec:
    """How to make one input in the worker (see ``inputs.InputSource``)."""

    name: str
    kind: str
    dtype: str
    shape: tuple[int, ...]
    seed: int | None = None
    values: bytes | None = None
    blob: bytes | None = None
    blob_key: str | None = None
    scalar: bool | int | float | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """Every input of one call, in ``run``'s order."""

    label: str
    inputs: tuple[InputSpec, ...]


@dataclass(frozen=True, slots=True)
class OutputSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str


def outputs_limit(outputs: typing.Sequence[OutputSpec]) -> int:
    """The most bytes an ``Outputs`` answer for ``outputs`` may carry: twice what they hold, plus 1 MiB (an
    output of a wrong shape is judged as one, not as a broken wire, unless it is far larger)."""
    total = 0
    for spec in outputs:
        count = 1
        for size in spec.shape:
            count *= max(0, size)
        total += count * DTYPE_BYTES.get(spec.dtype, 8)
    return 2 * total + (1 << 20)


class Message:
    """Base of every message; ``TYPE`` names it on the wire."""

    TYPE: ClassVar[str] = ""


# parent -> worker


@dataclass(frozen=True, slots=True)
class Ping(Message):
    TYPE: ClassVar[str] = "ping"


@dataclass(frozen=True, slots=True)
class Constant:
    """A definition's constant axis, by name."""

    name: str
    value: int


@dataclass(frozen=True, slots=True)
class Load(Message):
    """Import these sources (after checking each file's sha256) and find ``function`` in ``entry``."""

    TYPE: ClassVar[str] = "load"
    files: tuple[SourceFile, ...]
    entry: str
    function: str
    #: the definition's constant axes: ``run(...)`` and ``setup(...)`` get those they name as keyword-only
    #: parameters (an implementation that serves a whole family, told one definition from another: MoE's top_k)
    constants: tuple[Constant, ...] = ()


@dataclass(frozen=True, slots=True)
class Reference(Message):
    """Call the loaded function once on ``plan``'s inputs (random ones rolled by ``shift``), send the outputs back.

    Only kictl's own reference worker gets these.
    """

    TYPE: ClassVar[str] = "reference"
    plan: Plan
    outputs: tuple[OutputSpec, ...]
    shift: int
    #: a probe's seed: a few values of each random input swapped after the roll (0: none)
    perturb: int = 0
    #: the inputs the reference writes (docs/bench.md, "Inputs the reference writes"): their values after the call
    #: follow the outputs
    written: tuple[OutputSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class Check(Message):
    """One correctness round: a call on fresh tensors holding ``plan``'s inputs."""

    TYPE: ClassVar[str] = "check"
    plan: Plan
    outputs: tuple[OutputSpec, ...]
    #: the inputs the definition's reference writes (docs/bench.md, "Inputs the reference writes"): judged as
    #: outputs, not as inputs to keep
    written: tuple[OutputSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class Arm(Message):
    """Make the timed tensors (holding ``setup_plan``'s values), call ``setup``, make the timed input sets."""

    TYPE: ClassVar[str] = "arm"
    setup_plan: Plan
    timed_plans: tuple[Plan, ...]
    outputs: tuple[OutputSpec, ...]
    timer: str
    time_setup: bool
    flush_bytes: int
    #: the parent stages every timed call's values itself (``judge.staging``): in the worker's inputs region on
    #: the CPU, in its device memory through CUDA IPC on a GPU (``Armed.staged`` says where)
    parent_stages: bool = False
    #: the worker stops itself (``SIGSTOP``) once each timed call's answer is written, and says where the
    #: call's outputs lie (``Sample.outputs``): kictl's parent reads them there before anything of the
    #: implementation's can run again, then lets the worker go on (issue 40: the CPU's memory through
    #: ``/proc``, a GPU's through CUDA IPC handles)
    stop_at_return: bool = False
    #: the inputs the definition's reference writes (docs/bench.md, "Inputs the reference writes")
    written: tuple[OutputSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class Stage(Message):
    """Copy input set ``input_set`` into the timed tensors, in place, for the next ``Call`` (untimed).

    Random inputs are copied rolled by ``shift`` elements (flattened), so that every timed call's values are
    new even though the sets repeat.  A probe (``perturb`` > 0) repeats the previous call's set and shift
    with a few values of each random input swapped: a cache keyed on anything less than every value answers
    it with the previous call's outputs, and the probe's audit finds them wrong.
    """

    TYPE: ClassVar[str] = "stage"
    input_set: int
    shift: int
    perturb: int = 0


@dataclass(frozen=True, slots=True)
class Call(Message):
    """One timed call on the staged values.

    ``settle``: its sample is wanted now.  Otherwise a timer that settles calls in batches (CUPTI) may
    answer with the sample to come, in a later answer's ``settled``.
    """

    TYPE: ClassVar[str] = "call"
    settle: bool = True


@dataclass(frozen=True, slots=True)
class Audit(Message):
    """Send the outputs of the last timed call."""

    TYPE: ClassVar[str] = "audit"


@dataclass(frozen=True, slots=True)
class Finish(Message):
    """The timed calls are over: report the evidence gathered."""

    TYPE: ClassVar[str] = "finish"


@dataclass(frozen=True, slots=True)
class Stop(Message):
    TYPE: ClassVar[str] = "stop"


# energy (issue 31): kictl/bench/judge/energy_loop.py drives it


@dataclass(frozen=True, slots=True)
class Loop(Message):
    """``count`` calls of run() back to back on the staged values, one device synchronisation at the end;
    the last call's outputs are kept for an ``Audit``."""

    TYPE: ClassVar[str] = "loop"
    count: int


@dataclass(frozen=True, slots=True)
class Looped(Message):
    """The loop is over (the worker's own wall time of it is a claim; the parent times it itself).

    With ``Arm.stop_at_return`` it says where the last call's outputs lie, as a timed call's ``Sample`` does, and
    the worker stops itself once this is written: kictl's parent takes them there (the energy loop's audit)."""

    TYPE: ClassVar[str] = "looped"
    calls: int
    notes: tuple[Note, ...] = ()
    outputs: tuple[OutputRef, ...] = ()
    outputs_error: str | None = None


# worker -> parent


@dataclass(frozen=True, slots=True)
class Ready(Message):
    """The worker started: its environment (an ExecutionEnvironment spec) and how it was pinned."""

    TYPE: ClassVar[str] = "ready"
    environment: str  # JSON text of the spec, parsed strictly by the parent
    cpus: tuple[int, ...]
    threads: int
    #: timers beyond the plain ones this worker can run (``cupti_device_time`` once CUPTI attached)
    timers: tuple[str, ...] = ()
    #: why CUPTI could not attach, when it could not (shown to the user; the session falls back to events)
    cupti_error: str | None = None
    #: CUPTI attached but its dependency records (event records, waits, synchronisations) could not be
    #: collected: why. streamOrdered then judges by time alone (docs/bench.md, "Stream ordering")
    dependencies_error: str | None = None


@dataclass(frozen=True, slots=True)
class Pong(Message):
    TYPE: ClassVar[str] = "pong"


@dataclass(frozen=True, slots=True)
class Loaded(Message):
    TYPE: ClassVar[str] = "loaded"
    has_setup: bool


@dataclass(frozen=True, slots=True)
class Note(Message):
    """Evidence against one integrity check (``check`` is an ``integrity.Check`` value)."""

    TYPE: ClassVar[str] = "note"
    check: str
    detail: str


@dataclass(frozen=True, slots=True)
class Outputs(Message):
    """A call's outputs (``error`` instead when it returned something that is not the definition's outputs)."""

    TYPE: ClassVar[str] = "outputs"
    tensors: tuple[TensorData, ...]
    error: str | None
    notes: tuple[Note, ...]
    #: kictl's reference worker only: the inputs a correctness round's call of the reference changed
    written: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Staged(Message):
    TYPE: ClassVar[str] = "staged"
    notes: tuple[Note, ...] = ()


@dataclass(frozen=True, slots=True)
class Armed(Message):
    TYPE: ClassVar[str] = "armed"
    notes: tuple[Note, ...]
    #: GPU, ``Arm.stop_at_return``: where the timed tensor inputs lie in device memory, as the worker found them
    #: before setup() ran (kictl's parent names an output lying there itself, ``outputsNotAliasInputs``)
    inputs: tuple[OutputRef, ...] = ()
    #: GPU, ``Arm.parent_stages``: each random timed input by its place among the inputs, with its allocation's IPC
    #: handle, found before setup() ran: kictl's parent writes every timed call's values there itself
    staged: tuple[DeviceInput, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceInput:
    """One random timed input of a GPU run where kictl's parent stages it: its place among the call's inputs and
    where it lies in the worker's device memory (``OutputRef`` with its handle)."""

    position: int
    ref: OutputRef


@dataclass(frozen=True, slots=True)
class OutputRef:
    """Where one output of a timed call lies in the worker's memory: its dtype, shape, strides (in elements) and
    the address of its first element.  kictl's parent reads the bytes there itself.

    On a GPU (``handle`` set) the address is a device pointer: ``handle`` is the IPC handle (hex) of the device
    allocation that holds it, ``offset`` the first element's bytes from that allocation's start, and ``device``
    the PCI bus id of its GPU (``wire.cuda_ipc``)."""

    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    address: int
    handle: str = ""
    offset: int = 0
    device: str = ""


@dataclass(frozen=True, slots=True)
class Settled:
    """The sample of an earlier timed call, settled with a later one (the CUPTI timer flushes in batches).

    ``call`` numbers the ``Call`` requests since the last ``Arm`` from 1, warm-up calls included.
    """

    call: int
    ns: int
    events_ns: int | None = None
    kernels: int | None = None
    busy_ns: int | None = None


@dataclass(frozen=True, slots=True)
class Sample(Message):
    """One timed call: its time, as the worker's timer read it, and what was wrong with its outputs."""

    TYPE: ClassVar[str] = "sample"
    #: ``None``: the call's sample comes later, in a ``Settled`` of a later answer
    ns: int | None
    enqueued_ahead: bool | None
    notes: tuple[Note, ...]
    #: CUPTI timer: the CUDA events figure of the same call (the cross-check), the kernels, copies and
    #: memsets the call caused on any stream, and the device time they cover (the span less their gaps)
    events_ns: int | None = None
    kernels: int | None = None
    busy_ns: int | None = None
    #: earlier calls whose samples were settled with this one
    settled: tuple[Settled, ...] = ()
    #: ``Arm.stop_at_return``: where the call's outputs lie, or why they are not plain tensors on the run's device
    outputs: tuple[OutputRef, ...] = ()
    outputs_error: str | None = None


@dataclass(frozen=True, slots=True)
class Finished(Message):
    TYPE: ClassVar[str] = "finished"
    notes: tuple[Note, ...]
    device_spin_ns: int | None
    #: the calls whose samples were still to come, settled now
    settled: tuple[Settled, ...] = ()


@dataclass(frozen=True, slots=True)
class Failed(Message):
    """The implementation failed: ``status`` is compile_error or runtime_error."""

    TYPE: ClassVar[str] = "failed"
    status: str
    detail: str


@dataclass(frozen=True, slots=True)
class Probe(Message):
    """GPU, before any implementation is imported: put ``count`` known int32 values (0, 1, 2, ...) in device memory
    and say where they lie, as a timed call's outputs are said (``OutputRef``).  kictl's parent reads them there
    itself: a check of its own reading of a GPU worker's memory, which no implementation's code can touch."""

    TYPE: ClassVar[str] = "probe"
    count: int


@dataclass(frozen=True, slots=True)
class Probed(Message):
    """Where the probe's values lie, or why the worker could not say (its allocation has no IPC handle)."""

    TYPE: ClassVar[str] = "probed"
    outputs: tuple[OutputRef, ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class HarnessError(Message):
    """kictl's own code failed in the worker before any implementation was imported."""

    TYPE: ClassVar[str] = "harness_error"
    detail: str


MESSAGES: dict[str, type[Message]] = {
    cls.TYPE: cls
    for cls in (
        Ping,
        Probe,
        Probed,
        Load,
        Reference,
        Check,
        Arm,
        Stage,
        Call,
        Audit,
        Finish,
        Stop,
        Ready,
        Pong,
        Loaded,
        Outputs,
        Staged,
        Armed,
        Sample,
        Finished,
        Failed,
        HarnessError,
        Loop,  # energy (issue 31)
        Looped,
    )
}
STATUSES_FROM_WORKER = frozenset({"compile_error", "runtime_error"})


# --------------------------------------------------------------------------- encoding


def _encode_value(value: Any, buffers: list[bytes]) -> Any:
    if isinstance(value, bytes | memoryview):  # a memoryview of bytes (``worker.pack``): written from where it is
        buffers.append(value.cast("B") if isinstance(value, memoryview) else value)  # type: ignore[arg-type]
        return {"$buffer": len(buffers) - 1}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode_value(getattr(value, f.name), buffers) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_encode_value(item, buffers) for item in value]
    return value


def _frame_parts(message: Message, region: SharedRegion | None = None, nonce: int = 0) -> list[bytes]:
    """The frame of ``message`` in parts: magic, length and header, then each buffer as it is (no copy).

    With a ``region`` (a worker's), each buffer of ``SHARED_MIN`` bytes or more that fits is written there, and
    the header names it ``[offset, length]`` in place of its size.
    """
    buffers: list[bytes] = []
    body = _encode_value(message, buffers)
    entries: list[Any] = []
    inline: list[bytes] = []
    offset = 0
    for buffer in buffers:
        size = len(buffer)
        if region is not None and size >= SHARED_MIN and offset + size <= region.size:
            region.put(offset, buffer)
            entries.append([offset, size])
            offset += size
        else:
            entries.append(size)
            inline.append(buffer)
    header = json.dumps(
        {"type": message.TYPE, "body": body, "buffers": entries, "nonce": nonce},
        ensure_ascii=True,
        allow_nan=False,
        separators=(",", ":"),
    ).encode("ascii")
    return [MAGIC + struct.pack(">I", len(header)) + header, *inline]


def encode(message: Message) -> bytes:
    """The frame of ``message``."""
    return b"".join(_frame_parts(message))


class SharedRegion:
    """Memory shared by kictl's parent and one worker, for the worker's large buffers (module docstring).

    The parent makes it (``create``): a memfd of ``SHARED_BYTES``, sealed against shrinking and growing, so
    that a worker cannot make the parent's reads fault, mapped read-only on the parent's side.  The worker maps
    the descriptor it inherits (``attach``) for writing.
    """

    def __init__(self, fd: int, size: int, writable: bool) -> None:
        self.fd = fd
        self.size = size
        access = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        self.map = mmap.mmap(fd, size, mmap.MAP_SHARED, access)

    @classmethod
    def create(cls, label: str, size: int = SHARED_BYTES, parent_writes: bool = False) -> SharedRegion | None:
        """A new sealed region (parent's side), or ``None`` where memfds or seals are missing (not Linux).

        ``parent_writes``: mapped writable on the parent's side too (``staging``'s inputs region)."""
        try:
            fd = os.memfd_create(f"kictl-{label}", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        except (AttributeError, OSError):
            return None
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            return cls(fd, size, writable=parent_writes)
        except (AttributeError, OSError, ValueError):
            os.close(fd)
            return None

    @classmethod
    def attach(cls, fd: int) -> SharedRegion:
        """The worker's side of the region its parent made (the descriptor it was given)."""
        return cls(fd, os.fstat(fd).st_size, writable=True)

    def put(self, offset: int, data: bytes) -> None:
        self.map[offset : offset + len(data)] = data

    def take(self, offset: int, length: int) -> bytearray:
        """A copy of ``length`` bytes at ``offset`` (the caller checked the bounds)."""
        with memoryview(self.map) as whole, whole[offset : offset + length] as part:
            return bytearray(part)

    def close(self) -> None:
        """Unmap (unless tensors still view the mapping: it then goes with them) and close the descriptor."""
        try:
            self.map.close()
        except BufferError:
            pass
        os.close(self.fd)


# --------------------------------------------------------------------------- decoding


def _strict_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise WireError(f"duplicate member {clean_text(key, 80)!r}")
        found[key] = value
    return found


def _no_constant(name: str) -> Any:
    raise WireError(f"{name} is not allowed")


def _parse_header(raw: bytes) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
        value = json.loads(text, object_pairs_hook=_strict_pairs, parse_constant=_no_constant)
    except WireError:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise WireError(f"the header is not JSON: {clean_text(str(exc), 200)}") from None
    if not isinstance(value, dict) or set(value) != {"type", "body", "buffers", "nonce"}:
        raise WireError("the header must be an object with exactly type, body, buffers and nonce")
    if type(value["nonce"]) is not int or not 0 <= value["nonce"] < NONCE_LIMIT:
        raise WireError("the header's nonce is not a number the wire uses")
    return value


@functools.cache
def _hints(cls: Any) -> dict[str, Any]:
    """A message class's resolved field types, once (``typing.get_type_hints`` re-evaluates them per call)."""
    return typing.get_type_hints(cls)


@functools.cache
def _fields(cls: Any) -> dict[str, dataclasses.Field[Any]]:
    return {f.name: f for f in dataclasses.fields(cls)}


def _hint_of(cls: Any, name: str) -> Any:
    return _hints(cls)[name]


def _decode_value(hint: Any, value: Any, buffers: list[bytes], used: set[int], where: str, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise WireError(f"{where}: nested too deeply")
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _decode_value(option, value, buffers, used, where, depth)
            except WireError as exc:
                errors.append(str(exc))
        raise WireError(errors[0] if len(errors) == 1 else f"{where}: none of {options} fits")
    if hint is bytes:
        if type(value) is not dict or set(value) != {"$buffer"} or type(value["$buffer"]) is not int:
            raise WireError(f"{where}: a buffer reference is expected")
        index = value["$buffer"]
        if not 0 <= index < len(buffers) or index in used:
            raise WireError(f"{where}: buffer {index} does not exist or is used twice")
        used.add(index)
        return buffers[index]
    if hint is str:
        if type(value) is not str:
            raise WireError(f"{where}: a string is expected")
        return clean_text(value)
    if hint is bool:
        if type(value) is not bool:
            raise WireError(f"{where}: true or false is expected")
        return value
    if hint is int:
        if type(value) is not int or abs(value) > SAFE_INT:
            raise WireError(f"{where}: an integer within ±(2^53-1) is expected")
        return value
    if hint is float:
        if type(value) is int and abs(value) <= SAFE_INT:
            return float(value)
        if type(value) is not float:
            raise WireError(f"{where}: a number is expected")
        return value
    if origin is tuple:
        args = typing.get_args(hint)
        if type(value) is not list:
            raise WireError(f"{where}: a list is expected")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(
                _decode_value(args[0], item, buffers, used, f"{where}[{n}]", depth + 1) for n, item in enumerate(value)
            )
        raise WireError(f"{where}: unsupported tuple type")  # pragma: no cover - messages use tuple[X, ...] only
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if type(value) is not dict:
            raise WireError(f"{where}: an object is expected")
        fields = _fields(hint)
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise WireError(f"{where}: unknown member {clean_text(unknown[0], 80)!r}")
        members = {}
        for name, item in fields.items():
            if name not in value:
                if item.default is not dataclasses.MISSING:
                    continue
                raise WireError(f"{where}: member {name} is missing")
            members[name] = _decode_value(
                _hint_of(hint, name), value[name], buffers, used, f"{where}.{name}", depth + 1
            )
        return hint(**members)
    raise WireError(f"{where}: unsupported type {hint!r}")  # pragma: no cover


def decode(header: dict[str, Any], buffers: list[bytes], allowed: frozenset[str] | None = None) -> Message:
    """The message a parsed header and its buffers hold; raises ``WireError``."""
    kind = header["type"]
    if type(kind) is not str or kind not in MESSAGES:
        raise WireError(f"unknown message type {clean_text(str(kind), 80)!r}")
    if allowed is not None and kind not in allowed:
        raise WireError(f"a {kind} message was not expected here")
    used: set[int] = set()
    message = _decode_value(MESSAGES[kind], header["body"], buffers, used, kind, 0)
    if len(used) != len(buffers):
        raise WireError(f"{kind}: buffers sent but not referenced")
    assert isinstance(message, Message)
    return message


# --------------------------------------------------------------------------- file descriptors


def _read_exact(fd: int, count: int, deadline: float | None) -> bytes:
    if count > _LARGE:
        return _read_into(fd, count, deadline)
    chunks = []
    remaining = count
    while remaining:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise WireTimeout("no answer before the deadline")
        chunk = os.read(fd, min(remaining, 1 << 24))
        if not chunk:
            raise PeerClosed("the peer closed the wire")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _read_into(fd: int, count: int, deadline: float | None) -> bytes:
    """``count`` bytes read straight into one ``bytearray`` (a large buffer: no chunks joined, no copy).

    The ``bytearray`` stands for ``bytes`` (``unpack`` makes a tensor over it without copying it again).
    """
    data = bytearray(count)
    view = memoryview(data)
    got = 0
    while got < count:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise WireTimeout("no answer before the deadline")
        read = os.readv(fd, [view[got:]])
        if not read:
            raise PeerClosed("the peer closed the wire")
        got += read
    return data  # type: ignore[return-value]


def read_frame(
    fd: int,
    allowed: frozenset[str] | None = None,
    deadline: float | None = None,
    region: SharedRegion | None = None,
    *,
    nonce: int | None = None,
    max_buffer_bytes: int = MAX_BUFFER_BYTES,
) -> Message:
    """Read and decode one frame from ``fd``, waiting until ``deadline`` (``time.monotonic``) at most; buffers the
    header places in ``region`` are copied out of it first.

    ``nonce``: the answer must echo it (the parent's request's); ``max_buffer_bytes``: the most its buffers may
    hold (checked before any is read). Raises ``WireError``, ``PeerClosed`` or ``WireTimeout``.
    """
    message, echoed = read_frame_nonce(fd, allowed, deadline, region, max_buffer_bytes=max_buffer_bytes)
    if nonce is not None and echoed != nonce:
        raise WireError(
            f"a {message.TYPE} answer that does not echo its request's nonce (written before the request was sent)"
        )
    return message


def read_frame_nonce(
    fd: int,
    allowed: frozenset[str] | None = None,
    deadline: float | None = None,
    region: SharedRegion | None = None,
    *,
    max_buffer_bytes: int = MAX_BUFFER_BYTES,
) -> tuple[Message, int]:
    """``read_frame``'s message and the nonce its header carries (a worker reads its requests with this)."""
    prefix = _read_exact(fd, len(MAGIC) + 4, deadline)
    if prefix[: len(MAGIC)] != MAGIC:
        raise WireError("a frame does not start with the wire's magic bytes")
    (length,) = struct.unpack(">I", prefix[len(MAGIC) :])
    cap = MAX_HEADER_BYTES
    if allowed is not None and all(kind in HEADER_CAPS for kind in allowed):
        cap = max(HEADER_CAPS[kind] for kind in allowed)
    if length > cap:
        raise WireError(f"a header of {length} bytes is over the limit of {cap}")
    header = _parse_header(_read_exact(fd, length, deadline))
    entries = header["buffers"]
    if type(entries) is not list or len(entries) > MAX_BUFFERS:
        raise WireError("buffers must be a list of sizes")
    kind = header["type"]
    if type(kind) is str and kind in HEADER_CAPS and length > HEADER_CAPS[kind]:
        raise WireError(f"a {kind} header of {length} bytes is over its limit of {HEADER_CAPS[kind]}")
    if allowed is not None and kind not in allowed:
        raise WireError(f"a {clean_text(str(kind), 80)} message was not expected here")
    total = shared = 0
    for entry in entries:
        if type(entry) is int and entry >= 0:
            total += entry
        elif type(entry) is list and len(entry) == 2 and all(type(v) is int and v >= 0 for v in entry):
            if region is None:
                raise WireError("a buffer placed in shared memory, and this wire has none")
            if entry[0] + entry[1] > region.size:
                raise WireError(f"a buffer placed beyond the shared region's {region.size} bytes")
            total += entry[1]
            shared += entry[1]
        else:
            raise WireError("buffers must be a list of sizes")
    if region is not None and shared > region.size:
        # a writer places its buffers one after another: naming the same bytes many times would only make the
        # parent copy them (and hold the copies) many times over
        raise WireError(f"buffers of {shared} bytes placed in a shared region of {region.size}")
    limit = min(MAX_BUFFER_BYTES, max_buffer_bytes)
    if total > limit:
        raise WireError(f"buffers of {total} bytes are over the limit of {limit}")
    buffers: list[bytes] = []
    for entry in entries:
        if type(entry) is int:
            buffers.append(_read_exact(fd, entry, deadline))
        else:
            assert region is not None
            buffers.append(region.take(entry[0], entry[1]))  # type: ignore[arg-type]
    return decode(header, buffers, allowed), header["nonce"]


def write_frame(fd: int, message: Message, region: SharedRegion | None = None, nonce: int = 0) -> None:
    """Write ``message``'s frame to ``fd`` in full (blocking); a large buffer goes from where it is, or through
    ``region`` (a worker's answer). ``nonce``: the request's (the parent's fresh one, or the one a worker
    echoes)."""
    for part in _frame_parts(message, region, nonce):
        view = memoryview(part)
        while view:
            written = os.write(fd, view)
            view = view[written:]
