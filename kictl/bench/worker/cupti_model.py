"""The CUPTI timer's data: device activities, the dependency records that order them, windows and spans.

Pure data, no GPU: ``kictl.bench.worker.cupti_attribution`` turns these into one figure per timed call,
``cupti_records`` reads them from CUPTI's buffers and ``cupti_timer`` collects them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: The kernel torch launches for ``torch.cuda._sleep`` (ATen's ``spin_kernel``).
SPIN_KERNEL_NAME = "spin_kernel"
#: CUPTI buffers: 8 MiB each holds some 40,000 kernel records.
BUFFER_BYTES = 256 * 1024

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
    #: CUPTI's correlation id: the host API call that enqueued it (one counter, in host call order)
    correlation: int = 0
    #: CUPTI's graph id when a CUDA graph launch ran it (0 otherwise)
    graph: int = 0

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


STREAM_WAIT_EVENT = "stream_wait_event"
STREAM_SYNCHRONIZE = "stream_synchronize"
EVENT_SYNCHRONIZE = "event_synchronize"
CONTEXT_SYNCHRONIZE = "context_synchronize"
SYNCHRONIZATION_KINDS = (STREAM_WAIT_EVENT, STREAM_SYNCHRONIZE, EVENT_SYNCHRONIZE, CONTEXT_SYNCHRONIZE)

BLOCKING = "blocking"
NON_BLOCKING = "non_blocking"
NULL_STREAM = "null"


@dataclass(frozen=True)
class EventRecord:
    """One ``cudaEventRecord``: ``event`` recorded on ``stream`` by the host call ``correlation``."""

    correlation: int
    stream: int
    event: int
    #: CUPTI's id of this record, which a wait or an event synchronisation that consumes it repeats (0: unknown)
    sync_id: int = 0


@dataclass(frozen=True)
class Synchronization:
    """A stream wait (``cudaStreamWaitEvent``) or a host synchronisation, at the host call ``correlation``.

    ``kind`` is one of :data:`SYNCHRONIZATION_KINDS`; ``stream`` is the waiting
    (or synchronised) stream, ``event`` and ``sync_id`` name the record a wait
    or an event synchronisation consumes (0 where they do not apply).
    """

    correlation: int
    kind: str
    stream: int = 0
    event: int = 0
    sync_id: int = 0
    #: host timestamps of the call (CUPTI's timebase); ``end_ns``: when it returned (0: unknown)
    start_ns: int = 0
    end_ns: int = 0

    def __post_init__(self) -> None:
        if self.kind not in SYNCHRONIZATION_KINDS:
            raise ValueError(f"unknown synchronization kind {self.kind!r}")


@dataclass(frozen=True)
class Dependencies:
    """What orders work across streams: event records, waits and host synchronisations, stream flags.

    ``stream_flags`` maps a stream id to :data:`BLOCKING` (created with the
    default flag: implicitly ordered with the legacy NULL stream),
    :data:`NON_BLOCKING` or :data:`NULL_STREAM`; a stream not in it counts as
    non-blocking (torch creates its streams non-blocking).
    """

    records: tuple[EventRecord, ...] = ()
    syncs: tuple[Synchronization, ...] = ()
    stream_flags: Mapping[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Window:
    """The host timestamps around one timed call; ``harness_spin_ns`` > 0 when the harness spun first."""

    begin_ns: int
    end_ns: int
    harness_spin_ns: int = 0
    #: the harness enqueued its end marker (a spin kernel of ~0 cycles) on the calling stream after the call
    end_marker: bool = False
    #: CUPTI's host timestamp taken just before the end marker was enqueued (0: not taken); with it, a host
    #: synchronisation orders work before the marker only if it returned before then (another thread's does not)
    marker_host_ns: int = 0


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
    #: activities on another stream not ordered (CUDA happens-before) after the spin and before the end
    #: marker; only filled when ``attribute`` was given the dependencies
    unjoined: list[DeviceActivity] = field(default_factory=list)
    #: per window, the harness's own spin and end marker as CUPTI delivered them (``None``: not found)
    harness: list[tuple[DeviceActivity | None, DeviceActivity | None]] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """No activity outside a window, none past its window's end, every spin and marker found."""
        return not self.escaped and not self.overran and self.spin_missing == 0 and self.marker_missing == 0
