"""Reading CUPTI's activity buffers: the record layouts of the loaded libcupti and a direct reader.

``RecordLayout`` and ``record_layouts`` find where each field kictl needs sits in each kind of record;
``RecordReader`` and ``DirectRecords`` read the records with ``struct`` (cross-checked against
cupti-python's own objects for the first ``CROSS_CHECKED_RECORDS`` of each kind).
"""

from __future__ import annotations

import ctypes
import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from kictl.bench.worker.cupti_model import (
    BLOCKING,
    BUFFER_BYTES,
    CONTEXT_SYNCHRONIZE,
    EVENT_SYNCHRONIZE,
    NON_BLOCKING,
    NULL_STREAM,
    STREAM_SYNCHRONIZE,
    STREAM_WAIT_EVENT,
)
from kictl.errors import EnvError


def _import_cupti() -> Any:
    """``cupti.cupti`` of ``cupti-python`` (raises ``EnvError`` when it or its libcupti is missing)."""
    try:
        from cupti import cupti  # an optional dependency (cupti-python, the ``gpu`` extra), GPU-only
    except Exception as exc:  # ImportError, or a missing libcupti behind it
        raise EnvError(f"CUPTI is not available: {type(exc).__name__}: {exc}") from exc
    return cupti


#: cupti.ActivitySynchronizationType member -> Synchronization.kind
_SYNCHRONIZATION_TYPES = {
    "STREAM_WAIT_EVENT": STREAM_WAIT_EVENT,
    "STREAM_SYNCHRONIZE": STREAM_SYNCHRONIZE,
    "EVENT_SYNCHRONIZE": EVENT_SYNCHRONIZE,
    "CONTEXT_SYNCHRONIZE": CONTEXT_SYNCHRONIZE,
}
#: cupti.ActivityStreamFlag member -> Dependencies.stream_flags value
_STREAM_FLAGS = {"FLAG_DEFAULT": BLOCKING, "FLAG_NON_BLOCKING": NON_BLOCKING, "FLAG_NULL": NULL_STREAM}
_DEPENDENCY_KINDS = ("CUDA_EVENT", "SYNCHRONIZATION", "STREAM")


#: Records of each kind whose fields the direct reader also reads with numpy, field by field; one difference and
#: every later record is read with numpy instead.
CROSS_CHECKED_RECORDS = 8
_CUPTI_SUCCESS = 0
#: what kictl reads of each kind of record (name -> required); a kind whose layout lacks a required field is read
#: through cupti-python's classes
_FIELDS: dict[str, dict[str, bool]] = {
    "kernel": {"start": True, "end": True, "stream_id": True, "name": True, "correlation_id": True, "graph_id": False},
    "memcpy": {"start": True, "end": True, "stream_id": True, "correlation_id": True, "graph_id": False},
    "memset": {"start": True, "end": True, "stream_id": True, "correlation_id": True, "graph_id": False},
    "cuda_event": {"correlation_id": True, "stream_id": True, "event_id": True, "cuda_event_sync_id": False},
    "synchronization": {
        "type": True,
        "correlation_id": True,
        "stream_id": True,
        "cuda_event_id": False,
        "cuda_event_sync_id": False,
        "start": False,
        "end": False,
    },
    "stream": {"stream_id": True, "flag": True},
}
#: activity kind (cupti.ActivityKind member) -> the record layout it uses
_KIND_LAYOUTS = {
    "CONCURRENT_KERNEL": "kernel",
    "KERNEL": "kernel",
    "MEMCPY": "memcpy",
    "MEMSET": "memset",
    "CUDA_EVENT": "cuda_event",
    "SYNCHRONIZATION": "synchronization",
    "STREAM": "stream",
}
_STRUCT_CODES = {
    ("u", 1): "B",
    ("u", 2): "H",
    ("u", 4): "I",
    ("u", 8): "Q",
    ("i", 1): "b",
    ("i", 2): "h",
    ("i", 4): "i",
    ("i", 8): "q",
}
#: ctypes callbacks handed to CUPTI stay alive as long as the process: CUPTI may call them until it exits
_KEEP_ALIVE: list[Any] = []


@dataclass(frozen=True)
class RecordLayout:
    """Where kictl's fields lie in one kind of CUPTI record (from cupti-python's numpy dtype for it)."""

    layout: str
    size: int
    names: tuple[str, ...]
    format: str
    #: cupti-python's numpy dtype of the record, which numpy reads for the cross-check
    dtype: Any

    def fields(self, memory: Any) -> tuple[int, ...]:
        """kictl's fields of the record in ``memory`` (a buffer of ``size`` bytes), as integers, in ``names``
        order (the kernel's name as the address of its C string)."""
        return struct.unpack_from(self.format, memory)

    def fields_with_numpy(self, memory: Any) -> tuple[int, ...]:
        """The same fields as numpy reads them with cupti-python's dtype (the slow way, and the cross-check)."""
        import numpy as np  # GPU-only (CUPTI's records): the commands that import the worker's modules skip numpy

        row = np.frombuffer(memory, self.dtype, count=1)[0]
        return tuple(int(row[name]) for name in self.names)

    def record(self, kind: int, fields: Sequence[int]) -> Any:
        """An object with kictl's fields, the kernel's name read from the C string its record points to."""
        value = SimpleNamespace(kind=kind, **dict(zip(self.names, fields, strict=True)))
        pointer = getattr(value, "name", None)
        if pointer is not None:
            value.name = ctypes.string_at(pointer).decode("utf-8", "replace") if pointer else ""
        return value


def record_layouts(cupti: Any) -> tuple[dict[int, RecordLayout], str | None]:
    """Per activity kind, the layout of its records as this cupti-python describes them; and what is missing.

    The layout of each kind is the numpy dtype cupti-python declares for the newest version of that record
    (``activity_kernel10_dtype`` for CUPTI 13's kernels), which cupti-python's own classes read the records
    with.  A kind whose dtype or required fields are not there is left out of the map, and the second value
    says which.
    """
    versions: dict[str, tuple[int, str]] = {}
    for attribute in dir(cupti):
        found = re.fullmatch(r"activity_([a-z_]+?)(\d*)_dtype", attribute)
        if found and found.group(1) in _FIELDS:
            number = int(found.group(2) or 0)
            if number >= versions.get(found.group(1), (-1, ""))[0]:
                versions[found.group(1)] = (number, attribute)
    layouts: dict[int, RecordLayout] = {}
    missing: list[str] = []
    for kind_name, layout in _KIND_LAYOUTS.items():
        kind = getattr(cupti.ActivityKind, kind_name, None)
        if kind is None or layout not in versions:
            missing.append(f"{kind_name} ({layout})")
            continue
        number, attribute = versions[layout]
        dtype = getattr(cupti, attribute)
        fields = dtype.fields or {}
        chosen: list[tuple[int, str, str]] = []
        complete = True
        for name, required in _FIELDS[layout].items():
            entry = fields.get(name)
            code = _STRUCT_CODES.get((entry[0].kind, entry[0].itemsize)) if entry is not None else None
            if entry is None or code is None:
                complete = complete and not required
                continue
            chosen.append((int(entry[1]), name, code))
        if not complete:
            missing.append(f"{kind_name} ({attribute})")
            continue
        chosen.sort()
        parts, position = ["<"], 0
        for offset, _, code in chosen:
            if offset < position:
                complete = False
                break
            parts.append(f"{offset - position}x{code}" if offset > position else code)
            position = offset + struct_size(code)
        if not complete or position > dtype.itemsize:
            missing.append(f"{kind_name} ({attribute}: overlapping fields)")
            continue
        layouts[int(kind)] = RecordLayout(
            layout, int(dtype.itemsize), tuple(name for _, name, _ in chosen), "".join(parts), dtype
        )
    return layouts, ", ".join(missing) or None


def struct_size(code: str) -> int:
    return struct.calcsize("<" + code)


class RecordReader:
    """Reads CUPTI records at their addresses with ``layouts``, cross-checked by numpy.

    The first ``CROSS_CHECKED_RECORDS`` records of each kind are also read by numpy with cupti-python's dtype
    (as cupti-python's own classes read them) and compared field by field; on any difference that record
    and every later one are read by numpy, and ``mismatch`` says what differed.
    """

    def __init__(self, layouts: dict[int, RecordLayout]) -> None:
        self.layouts = layouts
        self.checked: dict[int, int] = {}
        self.mismatch: str | None = None

    def read(self, address: int) -> Any:
        """The record at ``address`` as an object with kictl's fields (``None``: a kind kictl does not read)."""
        kind = ctypes.c_uint32.from_address(address).value
        layout = self.layouts.get(kind)
        if layout is None:
            return None
        memory = (ctypes.c_char * layout.size).from_address(address)
        if self.mismatch is not None:
            return layout.record(kind, layout.fields_with_numpy(memory))
        fields = layout.fields(memory)
        done = self.checked.get(kind, 0)
        if done < CROSS_CHECKED_RECORDS:  # before any pointer in the record is followed
            self.checked[kind] = done + 1
            theirs = layout.fields_with_numpy(memory)
            for name, mine, other in zip(layout.names, fields, theirs, strict=True):
                if mine != other:
                    self.mismatch = f"{layout.layout} record field {name}: read {mine!r}, numpy reads {other!r}"
                    return layout.record(kind, theirs)
        return layout.record(kind, fields)


class DirectRecords:
    """CUPTI's activity buffers read without cupti-python's per-record objects (``CuptiCollector`` uses it).

    cupti-python turns every record of a completed buffer into an object whose fields are numpy views, and
    reading a field costs tens of microseconds: on the H200 that was most of the harness's time per timed
    call (``benchmarks/cupti_call_cost.py``).  This registers kictl's own buffer callbacks with libcupti
    through ``ctypes``, walks each buffer with ``cuptiActivityGetNextRecord`` and reads kictl's fields at the
    offsets cupti-python's numpy dtypes give (``record_layouts``), cross-checked by ``RecordReader``.
    """

    def __init__(
        self,
        cupti: Any,
        layouts: dict[int, RecordLayout],
        deliver: Callable[[list[Any]], None],
        lib: Any = None,
    ) -> None:
        #: libcupti through ctypes (``lib`` replaces it in the tests of the buffer walk)
        self.lib = lib if lib is not None else _libcupti(cupti)
        self.lib.cuptiActivityGetNextRecord.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.POINTER(ctypes.c_void_p),
        ]
        self.lib.cuptiActivityGetNextRecord.restype = ctypes.c_int
        self.lib.cuptiActivityGetNumDroppedRecords.argtypes = [
            ctypes.c_void_p,
            ctypes.c_uint32,
            ctypes.POINTER(ctypes.c_size_t),
        ]
        self.lib.cuptiActivityGetNumDroppedRecords.restype = ctypes.c_int
        #: what cuptiActivityGetNextRecord returns at the end of a buffer
        self.end_of_buffer = int(getattr(getattr(cupti, "Result", None), "ERROR_MAX_LIMIT_REACHED", 12))
        self.reader = RecordReader(layouts)
        self.deliver = deliver
        self.buffer_bytes = BUFFER_BYTES
        self.buffers: dict[int, Any] = {}
        #: why records were lost (a buffer not walked to its end, records CUPTI dropped): ``drain_all`` refuses
        self.error: str | None = None
        requested = ctypes.CFUNCTYPE(
            None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)
        )
        completed = ctypes.CFUNCTYPE(
            None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t
        )
        self._requested_c = requested(self._requested)
        self._completed_c = completed(self._completed)
        _KEEP_ALIVE.append((self._requested_c, self._completed_c, self.buffers))

    def register(self) -> None:
        status = self.lib.cuptiActivityRegisterCallbacks(self._requested_c, self._completed_c)
        if status != _CUPTI_SUCCESS:
            raise EnvError(f"CUPTI refused kictl's buffer callbacks (status {status})")

    def _requested(self, buffer: Any, size: Any, records: Any) -> None:
        memory = (ctypes.c_uint8 * self.buffer_bytes)()
        address = ctypes.addressof(memory)
        self.buffers[address] = memory
        buffer[0] = address
        size[0] = self.buffer_bytes
        records[0] = 0

    def _completed(self, context: Any, stream: int, buffer: int | None, size: int, valid: int) -> None:
        try:
            records: list[Any] = []
            if buffer and valid:
                record = ctypes.c_void_p(None)
                while True:
                    status = self.lib.cuptiActivityGetNextRecord(buffer, valid, ctypes.byref(record))
                    if status != _CUPTI_SUCCESS or record.value is None:
                        break
                    read = self.reader.read(record.value)
                    if read is not None:
                        records.append(read)
                if status not in (_CUPTI_SUCCESS, self.end_of_buffer):
                    self.error = f"a buffer of CUPTI's records could not be read to its end (status {status})"
            dropped = ctypes.c_size_t(0)
            if self.lib.cuptiActivityGetNumDroppedRecords(context, stream, ctypes.byref(dropped)) == _CUPTI_SUCCESS:
                if dropped.value:
                    self.error = f"CUPTI dropped {dropped.value} record(s)"
            self.deliver(records)
        except Exception as exc:  # an exception must not cross into CUPTI's C frames: it is reported instead
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            if buffer:
                self.buffers.pop(buffer, None)


def _libcupti(cupti: Any) -> Any:
    """The libcupti that cupti-python loaded (the same handle, through ``ctypes``)."""
    cupti.get_timestamp()  # makes cupti-python load its libcupti, if it has not yet
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        paths = {line.split()[-1] for line in maps if "libcupti.so" in line and line.split()[-1].startswith("/")}
    if len(paths) != 1:
        raise EnvError(f"the libcupti that cupti-python loaded could not be found ({len(paths)} candidates)")
    return ctypes.CDLL(paths.pop())
