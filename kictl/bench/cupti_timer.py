"""Device time per timed call from CUPTI activity records (docs/bench.md, "Timers").

CUDA events bracket one stream and include whatever the host did between the
two records; Nsight Compute's ``gpu__time_duration`` is the time the kernels
themselves ran.  CUPTI's activity API reports every kernel, copy and memset of
the process with its device start and end, on every stream, in the host's
timebase (``cupti.get_timestamp``).  This module turns those records into one
sample per timed call:

* the harness opens a *window* (a host timestamp) just before it enqueues the
  call and closes it after synchronising the device when the call returned;
* every activity that started inside the window belongs to that call, on any
  stream: work moved to a side stream is timed, not hidden;
* the call's sample is the span from its first activity's start to its last
  activity's end (for a call of one kernel: that kernel's duration; for
  kernels on several streams: the device time they occupied together);
* the harness's own work inside a window (the device spin that lets the host
  enqueue the whole call before the device reaches it) is named in advance and
  left out: it is the earliest activity of the window with the spin's kernel
  name, and its duration must be at least half the spin asked for;
* the harness's *end marker*, a tiny kernel it enqueues on the calling stream
  as soon as the call returns, is left out too; but any activity of the call
  that ended after the marker started was not ordered before the calling
  stream's end (a consumer on that stream would read unfinished outputs): it
  is reported as *unordered*, the ``streamOrdered`` integrity check;
* the harness's work between calls (restoring inputs, the L2 flush) runs in
  *harness windows* of its own and is left out;
* an activity outside every window, or one that ended after its window
  closed, is work that escaped the measurement and is reported as such.

The pure part (:func:`attribute`) needs no GPU and is what the CPU tests
exercise; :class:`CuptiCollector` binds it to ``cupti-python`` (the ``gpu``
extra) and raises :class:`~kictl.errors.EnvError` when CUPTI is missing or
cannot attach, so that the caller can fall back to CUDA events and say so.
"""

from __future__ import annotations

import bisect
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kictl.errors import EnvError

#: The kernel torch launches for ``torch.cuda._sleep`` (ATen's ``spin_kernel``).
SPIN_KERNEL_NAME = "spin_kernel"
#: CUPTI buffers: 8 MiB each holds some 40,000 kernel records.
BUFFER_BYTES = 8 * 1024 * 1024

KERNEL = "kernel"
MEMCPY = "memcpy"
MEMSET = "memset"


@dataclass(frozen=True)
class DeviceActivity:
    """One kernel, copy or memset as CUPTI reported it (host timebase, nanoseconds)."""

    kind: str
    start_ns: int
    end_ns: int
    stream: int
    name: str = ""

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class Window:
    """The host timestamps around one timed call; ``harness_spin_ns`` > 0 when the harness spun first."""

    begin_ns: int
    end_ns: int
    harness_spin_ns: int = 0
    #: the harness enqueued its end marker (a spin kernel of ~0 cycles) on the calling stream after the call
    end_marker: bool = False


@dataclass(frozen=True)
class CallSpan:
    """What one timed call caused on the device."""

    start_ns: int
    end_ns: int
    kernels: int
    copies: int
    memsets: int
    streams: int
    busy_ns: int

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass
class Attribution:
    """Per window its span (``None``: the call caused no device work), and what escaped the windows."""

    spans: list[CallSpan | None]
    escaped: list[DeviceActivity] = field(default_factory=list)
    overran: list[DeviceActivity] = field(default_factory=list)
    spin_missing: int = 0
    #: activities of a call that ended after the harness's end marker started on the calling stream
    unordered: list[DeviceActivity] = field(default_factory=list)
    marker_missing: int = 0

    @property
    def clean(self) -> bool:
        """No activity outside a window, none past its window's end, every spin and marker found."""
        return not self.escaped and not self.overran and self.spin_missing == 0 and self.marker_missing == 0


def _busy(activities: Sequence[DeviceActivity]) -> int:
    """Device time covered by at least one activity (union of intervals)."""
    total = 0
    current_start = current_end = None
    for activity in sorted(activities, key=lambda a: a.start_ns):
        if current_end is None or activity.start_ns > current_end:
            if current_end is not None and current_start is not None:
                total += current_end - current_start
            current_start, current_end = activity.start_ns, activity.end_ns
        else:
            current_end = max(current_end, activity.end_ns)
    if current_end is not None and current_start is not None:
        total += current_end - current_start
    return total


def _check_order(windows: Sequence[Window]) -> None:
    for earlier, later in itertools.pairwise(windows):
        if earlier.end_ns > later.begin_ns or earlier.begin_ns > earlier.end_ns:
            raise ValueError("timing windows overlap or are out of order")


def attribute(
    activities: Sequence[DeviceActivity],
    windows: Sequence[Window],
    harness_windows: Sequence[Window] = (),
) -> Attribution:
    """Assign each activity to the window in which it started; see the module's text for the rules.

    ``windows`` (the timed calls) and ``harness_windows`` (the harness's own
    work between them) must each be in time order, and no two windows may
    overlap (raises ``ValueError`` otherwise).
    """
    _check_order(windows)
    _check_order(sorted(harness_windows, key=lambda w: w.begin_ns))
    _check_order(sorted([*windows, *harness_windows], key=lambda w: w.begin_ns))
    buckets: list[list[DeviceActivity]] = [[] for _ in windows]
    result = Attribution(spans=[])
    begins = [window.begin_ns for window in windows]
    harness = sorted(harness_windows, key=lambda w: w.begin_ns)
    harness_begins = [window.begin_ns for window in harness]
    for activity in sorted(activities, key=lambda a: (a.start_ns, a.end_ns)):
        index = _window_of(begins, windows, activity.start_ns)
        if index is None:
            own = _window_of(harness_begins, harness, activity.start_ns)
            if own is None:
                result.escaped.append(activity)
            elif activity.end_ns > harness[own].end_ns:
                result.overran.append(activity)
            continue
        buckets[index].append(activity)
        if activity.end_ns > windows[index].end_ns:
            result.overran.append(activity)
    for window, bucket in zip(windows, buckets, strict=True):
        harness_stream: int | None = None
        if window.harness_spin_ns > 0:
            spin = next((a for a in bucket if a.kind == KERNEL and SPIN_KERNEL_NAME in a.name), None)
            if spin is None or spin is not bucket[0] or spin.duration_ns * 2 < window.harness_spin_ns:
                result.spin_missing += 1
            if spin is not None:
                harness_stream = spin.stream
                bucket = [a for a in bucket if a is not spin]
        if window.end_marker:
            marker = _end_marker(bucket, harness_stream)
            if marker is None:
                result.marker_missing += 1
            else:
                bucket = [a for a in bucket if a is not marker]
                result.unordered.extend(a for a in bucket if a.end_ns > marker.start_ns)
        if not bucket:
            result.spans.append(None)
            continue
        result.spans.append(
            CallSpan(
                start_ns=min(a.start_ns for a in bucket),
                end_ns=max(a.end_ns for a in bucket),
                kernels=sum(1 for a in bucket if a.kind == KERNEL),
                copies=sum(1 for a in bucket if a.kind == MEMCPY),
                memsets=sum(1 for a in bucket if a.kind == MEMSET),
                streams=len({a.stream for a in bucket}),
                busy_ns=_busy(bucket),
            )
        )
    return result


def _end_marker(bucket: Sequence[DeviceActivity], stream: int | None) -> DeviceActivity | None:
    """The harness's end marker: the last spin kernel to start (on the harness's stream, when known)."""
    candidates = [
        a for a in bucket if a.kind == KERNEL and SPIN_KERNEL_NAME in a.name and (stream is None or a.stream == stream)
    ]
    return max(candidates, key=lambda a: a.start_ns) if candidates else None


def _window_of(begins: Sequence[int], windows: Sequence[Window], start_ns: int) -> int | None:
    index = bisect.bisect_right(begins, start_ns) - 1
    if index < 0 or start_ns > windows[index].end_ns:
        return None
    return index


class CuptiCollector:
    """CUPTI activity collection for kernels, copies and memsets of this process.

    Create it before the implementation is imported (its callbacks are then
    kictl's); ``start()`` enables the activity kinds, ``now()`` reads CUPTI's
    clock, ``drain()`` flushes the buffers and returns what completed since
    the last drain, ``stop()`` disables collection.

    Raises ``EnvError`` when ``cupti-python`` is not installed or CUPTI refuses
    to attach (another profiler holds it, or the driver is too old).
    """

    def __init__(self) -> None:
        try:
            from cupti import cupti
        except Exception as exc:  # ImportError, or a missing libcupti behind it
            raise EnvError(f"CUPTI is not available: {type(exc).__name__}: {exc}") from exc
        self._cupti: Any = cupti
        self._lock = threading.Lock()
        self._pending: list[DeviceActivity] = []
        self._kinds: list[Any] = [
            cupti.ActivityKind.CONCURRENT_KERNEL,
            cupti.ActivityKind.MEMCPY,
            cupti.ActivityKind.MEMSET,
        ]
        self._get_timestamp = cupti.get_timestamp
        self._flush_all = cupti.activity_flush_all
        self.started = False

    def _requested(self) -> tuple[int, int]:
        return BUFFER_BYTES, 0

    def _completed(self, activities: Sequence[Any]) -> None:
        cupti = self._cupti
        converted: list[DeviceActivity] = []
        for record in activities:
            kind = record.kind
            if kind == cupti.ActivityKind.CONCURRENT_KERNEL or kind == cupti.ActivityKind.KERNEL:
                converted.append(
                    DeviceActivity(KERNEL, int(record.start), int(record.end), int(record.stream_id), str(record.name))
                )
            elif kind == cupti.ActivityKind.MEMCPY:
                converted.append(DeviceActivity(MEMCPY, int(record.start), int(record.end), int(record.stream_id)))
            elif kind == cupti.ActivityKind.MEMSET:
                converted.append(DeviceActivity(MEMSET, int(record.start), int(record.end), int(record.stream_id)))
        with self._lock:
            self._pending.extend(converted)

    def start(self) -> None:
        """Enable the activity kinds and register kictl's buffer callbacks (raises ``EnvError``)."""
        cupti = self._cupti
        try:
            for kind in self._kinds:
                cupti.activity_enable(kind)
            cupti.activity_register_callbacks(self._requested, self._completed)
        except Exception as exc:
            raise EnvError(f"CUPTI could not attach: {type(exc).__name__}: {exc}") from exc
        self.started = True

    def now(self) -> int:
        """CUPTI's timestamp (ns), the timebase of every activity record."""
        return int(self._get_timestamp())

    def drain(self) -> list[DeviceActivity]:
        """Every activity completed since the last drain (forces CUPTI to flush its buffers)."""
        self._flush_all(1)
        with self._lock:
            pending, self._pending = self._pending, []
        return pending

    def stop(self) -> None:
        """Disable collection (what is still buffered is dropped)."""
        if not self.started:
            return
        cupti = self._cupti
        try:
            cupti.activity_flush_all(1)
            for kind in self._kinds:
                cupti.activity_disable(kind)
        finally:
            self.started = False
            with self._lock:
                self._pending = []
