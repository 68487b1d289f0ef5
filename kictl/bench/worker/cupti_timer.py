"""The CUPTI timer's collector: CUPTI's activity API bound to the worker (docs/bench.md, "Timers").

``CuptiCollector`` enables the activity kinds before the implementation is imported, reads CUPTI's clock and
drains the buffers; ``kictl.bench.worker.cupti_attribution`` turns what it drains into one figure per timed call.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from typing import Any

from kictl.bench.worker.cupti_model import (
    BUFFER_BYTES,
    KERNEL,
    MEMCPY,
    MEMSET,
    Dependencies,
    DeviceActivity,
    EventRecord,
    Synchronization,
)
from kictl.bench.worker.cupti_records import (
    _DEPENDENCY_KINDS,
    _STREAM_FLAGS,
    _SYNCHRONIZATION_TYPES,
    DirectRecords,
    _import_cupti,
    record_layouts,
)
from kictl.errors import EnvError


class CuptiCollector:
    """CUPTI activity collection for kernels, copies and memsets of this process, and what orders them.

    Create it before the implementation is imported (its callbacks are then
    kictl's); ``start()`` enables the activity kinds, ``now()`` reads CUPTI's
    clock, ``drain()`` flushes the buffers and returns what completed since
    the last drain (``drain_all()``: with the dependency records drained with
    it), ``stop()`` disables collection.

    The dependency kinds (event records, synchronisations, stream creation) are
    enabled together or not at all: ``dependencies_available`` says whether they
    are collected and ``dependencies_error`` why not.

    Raises ``EnvError`` when ``cupti-python`` is not installed or CUPTI refuses
    to attach (another profiler holds it, or the driver is too old).
    ``module`` replaces ``cupti.cupti`` (for tests of the record conversion).
    """

    def __init__(self, module: Any = None, buffer_bytes: int = BUFFER_BYTES) -> None:
        cupti: Any = module if module is not None else _import_cupti()
        self._cupti: Any = cupti
        #: the size of each buffer CUPTI asks for (benchmarks/cupti_call_cost.py steps compares sizes)
        self.buffer_bytes = buffer_bytes
        kinds = cupti.ActivityKind
        self._work_kinds: dict[Any, str] = {
            kinds.CONCURRENT_KERNEL: KERNEL,
            kinds.KERNEL: KERNEL,
            kinds.MEMCPY: MEMCPY,
            kinds.MEMSET: MEMSET,
        }
        self._lock = threading.Lock()
        self._pending: list[DeviceActivity] = []
        self._records: list[EventRecord] = []
        self._syncs: list[Synchronization] = []
        #: stream id -> flag, over the whole session (a stream is created once)
        self._stream_flags: dict[int, str] = {}
        self._kinds: list[Any] = [
            cupti.ActivityKind.CONCURRENT_KERNEL,
            cupti.ActivityKind.MEMCPY,
            cupti.ActivityKind.MEMSET,
        ]
        self._get_timestamp = cupti.get_timestamp
        self._flush_all = cupti.activity_flush_all
        #: records read from CUPTI's buffers by kictl (``DirectRecords``) rather than by cupti-python's objects
        self.direct_allowed = module is None
        self.direct: DirectRecords | None = None
        self.direct_error: str | None = None
        self.started = False
        self.dependencies_available = False
        self.dependencies_error: str | None = None
        self._dependency_kinds: list[Any] = []
        self._sync_types: dict[int, str] = {}
        self._flag_names: dict[int, str] = {}
        self._flag_mask = 0xFFFF
        try:
            self._dependency_kinds = [getattr(cupti.ActivityKind, name) for name in _DEPENDENCY_KINDS]
            sync_type, flag = cupti.ActivitySynchronizationType, cupti.ActivityStreamFlag
            self._sync_types = {int(getattr(sync_type, name)): kind for name, kind in _SYNCHRONIZATION_TYPES.items()}
            self._flag_names = {int(getattr(flag, name)): value for name, value in _STREAM_FLAGS.items()}
            self._flag_mask = int(getattr(flag, "MASK", 0xFFFF))
        except AttributeError as exc:
            self._dependency_kinds = []
            self.dependencies_error = f"this cupti-python lacks {exc}"

    def _requested(self) -> tuple[int, int]:
        return self.buffer_bytes, 0

    def _completed(self, activities: Sequence[Any]) -> None:
        converted: list[DeviceActivity] = []
        records: list[EventRecord] = []
        syncs: list[Synchronization] = []
        flags: dict[int, str] = {}
        event_kind, sync_kind, stream_kind = self._dependency_kinds or (None, None, None)
        for record in activities:
            kind = record.kind
            correlation = int(getattr(record, "correlation_id", 0))
            work = self._work_kinds.get(kind)
            if work is not None:
                converted.append(
                    DeviceActivity(
                        work,
                        int(record.start),
                        int(record.end),
                        int(record.stream_id),
                        str(record.name) if work == KERNEL else "",
                        correlation,
                        int(getattr(record, "graph_id", 0)),
                    )
                )
            elif event_kind is not None and kind == event_kind:
                sync_id = int(getattr(record, "cuda_event_sync_id", 0))
                records.append(EventRecord(correlation, int(record.stream_id), int(record.event_id), sync_id))
            elif sync_kind is not None and kind == sync_kind:
                name = self._sync_types.get(int(record.type))
                if name is not None:  # UNKNOWN: nothing to order by
                    syncs.append(
                        Synchronization(
                            correlation,
                            name,
                            int(record.stream_id),
                            int(getattr(record, "cuda_event_id", 0)),
                            int(getattr(record, "cuda_event_sync_id", 0)),
                            int(getattr(record, "start", 0)),
                            int(getattr(record, "end", 0)),
                        )
                    )
            elif stream_kind is not None and kind == stream_kind:
                flag = self._flag_names.get(int(record.flag) & self._flag_mask)
                if flag is not None:
                    flags[int(record.stream_id)] = flag
        with self._lock:
            self._pending.extend(converted)
            self._records.extend(records)
            self._syncs.extend(syncs)
            self._stream_flags.update(flags)

    def start(self) -> None:
        """Enable the activity kinds and register kictl's buffer callbacks (raises ``EnvError``).

        The dependency kinds are optional: if enabling any of them fails, none
        of them is collected and ``dependencies_available`` stays false.
        """
        cupti = self._cupti
        try:
            for kind in self._kinds:
                cupti.activity_enable(kind)
        except Exception as exc:
            raise EnvError(f"CUPTI could not attach: {type(exc).__name__}: {exc}") from exc
        enabled: list[Any] = []
        try:
            for kind in self._dependency_kinds:
                cupti.activity_enable(kind)
                enabled.append(kind)
        except Exception as exc:
            for kind in enabled:
                with contextlib.suppress(Exception):  # that kind's collection is off or broken either way
                    cupti.activity_disable(kind)
            self._dependency_kinds = []
            self.dependencies_error = f"CUPTI refused the dependency records: {type(exc).__name__}: {exc}"
        self.dependencies_available = bool(self._dependency_kinds)
        self.direct = self._direct_reader() if self.direct_allowed else None
        try:
            if self.direct is not None:
                self.direct.register()
            else:
                cupti.activity_register_callbacks(self._requested, self._completed)
        except Exception as exc:
            raise EnvError(f"CUPTI could not attach: {type(exc).__name__}: {exc}") from exc
        self.started = True

    def _direct_reader(self) -> DirectRecords | None:
        """kictl's own buffer callbacks (``DirectRecords``) where every enabled kind's layout is known; else
        ``None``, with the reason in ``direct_error`` (cupti-python's callbacks are used then)."""
        try:
            layouts, _ = record_layouts(self._cupti)
            wanted = [*self._kinds, *self._dependency_kinds]
            unknown = [str(kind) for kind in wanted if int(kind) not in layouts]
            if unknown:
                raise EnvError(f"no record layout for {', '.join(unknown)}")
            direct = DirectRecords(self._cupti, layouts, self._completed)
        except Exception as exc:  # anything: cupti-python's own callbacks still work
            self.direct_error = f"{type(exc).__name__}: {exc}"
            return None
        direct.buffer_bytes = self.buffer_bytes
        return direct

    def now(self) -> int:
        """CUPTI's timestamp (ns), the timebase of every activity record."""
        return int(self._get_timestamp())

    def drain(self) -> list[DeviceActivity]:
        """Every activity completed since the last drain (forces CUPTI to flush its buffers)."""
        return self.drain_all()[0]

    def drain_all(self) -> tuple[list[DeviceActivity], Dependencies | None]:
        """Like ``drain()``, with the dependency records drained with the activities (``None``: not collected)."""
        self._flush_all(1)
        direct = self.direct
        if direct is not None and direct.error is not None:  # records were lost: no figure can be trusted
            raise EnvError(f"CUPTI's records could not be read: {direct.error}")
        with self._lock:
            pending, self._pending = self._pending, []
            records, self._records = self._records, []
            syncs, self._syncs = self._syncs, []
            flags = dict(self._stream_flags)
        if not self.dependencies_available:
            return pending, None
        return pending, Dependencies(tuple(records), tuple(syncs), flags)

    def stop(self) -> None:
        """Disable collection (what is still buffered is dropped)."""
        if not self.started:
            return
        cupti = self._cupti
        try:
            cupti.activity_flush_all(1)
            for kind in [*self._kinds, *self._dependency_kinds]:
                cupti.activity_disable(kind)
        finally:
            self.started = False
            with self._lock:
                self._pending = []
                self._records = []
                self._syncs = []
