"""CUDA's legacy inter-process memory handles, through the driver library (``libcuda``), for a timed call's outputs.

On a GPU a timed call's outputs lie in the worker's device memory.  The worker says where (``export``: the IPC
handle of the allocation that holds each output, the output's offset in it and the device's PCI bus id) and stops
itself; kictl's parent opens the handle in a context of its own on the same device and copies the bytes out
(``DeviceReader``) before it lets the worker go on (``judge.taken``).  So the parent reads what the call left in
device memory, not what the worker packs later, and nothing of the implementation's runs in between.

Only the driver API is used (``ctypes`` over ``libcuda.so.1``, which every CUDA machine has): the parent needs no
torch CUDA context, and the worker's own torch state is left alone.  ../shared/MEASURED.md showed a legacy handle
opened across kictl's sandbox (uid 65534, no capabilities, own PID namespace).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: ``CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS``: the flag ``cuIpcOpenMemHandle`` wants
_LAZY_PEER_ACCESS = 1
_HANDLE_BYTES = 64
_BUS_ID_BYTES = 64


class IpcError(RuntimeError):
    """A driver call failed; the message names it and CUDA's error."""


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * _HANDLE_BYTES)]


def handle_bytes(handle: _Handle) -> bytes:
    """A handle's 64 raw bytes (its field's own value would stop at the first NUL byte)."""
    return ctypes.string_at(ctypes.addressof(handle), _HANDLE_BYTES)


def handle_of(raw: bytes) -> _Handle:
    """The handle whose raw bytes are ``raw`` (64 of them, NUL bytes included)."""
    if len(raw) != _HANDLE_BYTES:
        raise IpcError("a malformed device memory handle")
    handle = _Handle()
    ctypes.memmove(ctypes.addressof(handle), raw, _HANDLE_BYTES)
    return handle


_lock = threading.Lock()
_driver: list[Any] = []


def _library() -> Any:
    """``libcuda.so.1``, loaded and initialised once (``IpcError`` where there is none)."""
    with _lock:
        if not _driver:
            try:
                lib = ctypes.CDLL("libcuda.so.1")
            except OSError as exc:
                raise IpcError(f"no CUDA driver library: {exc}") from None
            _check(lib, lib.cuInit(0), "cuInit")
            _driver.append(lib)
        return _driver[0]


def _name(lib: Any, code: int) -> str:
    text = ctypes.c_char_p()
    if lib.cuGetErrorName(code, ctypes.byref(text)) == 0 and text.value:
        return text.value.decode("ascii", "replace")
    return f"CUDA error {code}"


def _check(lib: Any, code: int, call: str) -> None:
    if code != 0:
        raise IpcError(f"{call}: {_name(lib, code)}")


def _symbol(lib: Any, name: str) -> Any:
    """The ``_v2`` form of a driver function where the library has one (the one CUDA's headers call)."""
    return getattr(lib, f"{name}_v2", None) or getattr(lib, name)


@dataclass(frozen=True, slots=True)
class Exported:
    """One device pointer as another process can find it: its allocation's IPC handle (hex), the pointer's offset
    in that allocation, and the PCI bus id of the device that holds it."""

    handle: str
    offset: int
    device: str


def export(pointer: int) -> Exported:
    """The allocation that holds device ``pointer``, as an IPC handle another process can open."""
    lib = _library()
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    _check(
        lib,
        _symbol(lib, "cuMemGetAddressRange")(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(pointer)),
        "cuMemGetAddressRange",
    )
    handle = _Handle()
    _check(lib, lib.cuIpcGetMemHandle(ctypes.byref(handle), base), "cuIpcGetMemHandle")
    ordinal = ctypes.c_int()
    _check(
        lib,
        lib.cuPointerGetAttribute(ctypes.byref(ordinal), 9, ctypes.c_uint64(pointer)),  # DEVICE_ORDINAL
        "cuPointerGetAttribute",
    )
    device = ctypes.c_int()
    _check(lib, lib.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
    bus = ctypes.create_string_buffer(_BUS_ID_BYTES)
    _check(lib, lib.cuDeviceGetPCIBusId(bus, _BUS_ID_BYTES, device), "cuDeviceGetPCIBusId")
    return Exported(handle_bytes(handle).hex(), pointer - base.value, bus.value.decode("ascii", "replace"))


def ordinal(bus_id: str) -> int:
    """The device ordinal, in this process, of the GPU with PCI bus id ``bus_id`` (torch's ``cuda:N`` too)."""
    lib = _library()
    device = ctypes.c_int()
    _check(lib, lib.cuDeviceGetByPCIBusId(ctypes.byref(device), bus_id.encode("ascii")), "cuDeviceGetByPCIBusId")
    return device.value


_contexts: dict[str, ctypes.c_void_p] = {}


def _primary_context(bus_id: str) -> ctypes.c_void_p:
    """The primary context of the GPU with PCI bus id ``bus_id``, retained once per process (torch's, too)."""
    with _lock:
        context = _contexts.get(bus_id)
    if context is None:
        lib = _library()
        device = ctypes.c_int(ordinal(bus_id))
        context = ctypes.c_void_p()
        _check(lib, lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
        with _lock:
            context = _contexts.setdefault(bus_id, context)
    return context


#: every handle this process holds open, by (PCI bus id, handle hex): [pointer, bytes from it, holders].  CUDA opens
#: a handle once per context, and the parent's readers and stagers share the GPU's primary context: an output may
#: lie in the allocation of a timed input the stager holds open (the caching allocator packs small tensors)
_held: dict[tuple[str, str], list[int]] = {}
_held_lock = threading.Lock()


def _acquire(lib: Any, device: str, handle_hex: str) -> tuple[int, int]:
    """``handle_hex`` open in the current context (``device``'s primary one): its pointer and the bytes of its
    allocation from there; a handle held already is shared, and counted."""
    key = (device, handle_hex)
    held = _held.get(key)
    if held is not None:
        held[2] += 1
        return held[0], held[1]
    try:
        raw = bytes.fromhex(handle_hex)
    except ValueError:
        raw = b""
    if len(raw) != _HANDLE_BYTES:
        raise IpcError("a malformed device memory handle")
    pointer = ctypes.c_uint64()
    _check(
        lib,
        _symbol(lib, "cuIpcOpenMemHandle")(ctypes.byref(pointer), handle_of(raw), _LAZY_PEER_ACCESS),
        "cuIpcOpenMemHandle",
    )
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    code = _symbol(lib, "cuMemGetAddressRange")(ctypes.byref(base), ctypes.byref(size), pointer)
    if code != 0:
        lib.cuIpcCloseMemHandle(pointer)
        _check(lib, code, "cuMemGetAddressRange")
    span = size.value - (pointer.value - base.value)
    _held[key] = [pointer.value, span, 1]
    return pointer.value, span


def _release(lib: Any, device: str, handle_hex: str) -> None:
    """One holder of ``handle_hex`` done with it; the last one closes it (in the current context)."""
    held = _held.get((device, handle_hex))
    if held is None:
        return
    held[2] -= 1
    if held[2] <= 0:
        del _held[(device, handle_hex)]
        lib.cuIpcCloseMemHandle(ctypes.c_uint64(held[0]))


def _checked_span(offset: int, length: int, opened: tuple[int, int] | None = None) -> int:
    """The address of ``length`` bytes at ``offset`` in an opened allocation (its pointer and bytes from there);
    ``IpcError`` where the span is negative or does not lie inside it.  Without ``opened``, the sign check alone."""
    if offset < 0 or length < 0:
        raise IpcError("a malformed device memory handle")
    if opened is None:
        return 0
    pointer, size = opened
    if offset + length > size:
        raise IpcError(f"{length} bytes at offset {offset} lie outside the allocation the handle names")
    return pointer + offset


class _Current:
    """``device``'s primary context made current on this thread for a block of driver calls, then popped."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.lib = _library()

    def __enter__(self) -> Any:
        _check(self.lib, _symbol(self.lib, "cuCtxPushCurrent")(_primary_context(self.device)), "cuCtxPushCurrent")
        return self.lib

    def __exit__(self, *exc: object) -> None:
        popped = ctypes.c_void_p()
        _symbol(self.lib, "cuCtxPopCurrent")(ctypes.byref(popped))


class DeviceMapping:
    """Device memory another process exported, kept open in this process's primary context on that GPU until
    ``close``: kictl's parent writes the timed inputs there itself (``judge.staging.DeviceStager``).

    ``place`` opens each handle once and checks that the bytes asked for lie inside its allocation.  The exporting
    process must keep the allocation alive while it is open here (a worker keeps its timed tensors)."""

    def __init__(self, device: str) -> None:
        self.device = device
        self._opened: dict[str, tuple[int, int]] = {}

    def place(self, handle_hex: str, offset: int, length: int) -> int:
        """The address, in this process, of ``length`` bytes at ``offset`` in the allocation ``handle_hex`` names."""
        if handle_hex not in self._opened:
            _checked_span(offset, length)
            with _Current(self.device) as lib, _held_lock:
                self._opened[handle_hex] = _acquire(lib, self.device, handle_hex)
        return _checked_span(offset, length, self._opened[handle_hex])

    def close(self) -> None:
        """Every handle opened here let go (closed where nothing else of this process holds it)."""
        if not self._opened:
            return
        with _Current(self.device) as lib, _held_lock:
            for handle_hex in self._opened:
                _release(lib, self.device, handle_hex)
        self._opened.clear()


class DeviceReader:
    """kictl's parent's reading of device memory another process exported: a context of its own on each device
    (the device's primary context, retained), a handle opened, the bytes copied to the host, the handle closed."""

    def read(self, device: str, spans: Sequence[tuple[str, int, int]]) -> list[bytearray]:
        """The bytes of each ``(handle hex, offset, length)`` on the device with PCI bus id ``device``; ``IpcError``
        names the first that could not be read.  A handle named twice is opened once, and every handle opened is
        let go before this returns (one a stager holds stays open for it)."""
        opened: dict[str, tuple[int, int]] = {}
        with _Current(device) as lib, _held_lock:
            try:
                copied: list[bytearray] = []
                for handle_hex, offset, length in spans:
                    _checked_span(offset, length)
                    if handle_hex not in opened:
                        opened[handle_hex] = _acquire(lib, device, handle_hex)
                    address = _checked_span(offset, length, opened[handle_hex])
                    buffer = bytearray(length)
                    if length:
                        host = (ctypes.c_char * length).from_buffer(buffer)
                        source = ctypes.c_uint64(address)
                        _check(lib, _symbol(lib, "cuMemcpyDtoH")(host, source, ctypes.c_size_t(length)), "cuMemcpyDtoH")
                    copied.append(buffer)
                return copied
            finally:
                for handle_hex in opened:
                    _release(lib, device, handle_hex)


def available() -> bool:
    """Whether this process can use CUDA's driver library (``libcuda.so.1`` loads and ``cuInit`` succeeds)."""
    try:
        _library()
    except IpcError:
        return False
    return True
