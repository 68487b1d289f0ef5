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
* with the call's *dependencies* (CUDA event records, stream waits, host
  synchronisations, stream creation flags: :class:`Dependencies`), an
  activity on another stream must also be ordered by CUDA's happens-before
  relation after the harness's spin and before the end marker
  (:func:`unordered_by_dependencies`); one that is not is reported as
  *unjoined*, whatever the timing was (docs/bench.md, "Stream ordering");
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
import contextlib
import itertools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kictl.errors import EnvError

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
    dependencies: Dependencies | None = None,
    legacy_calling_stream: bool | None = None,
) -> Attribution:
    """Assign each activity to the window in which it started; see the module's text for the rules.

    ``windows`` (the timed calls) and ``harness_windows`` (the harness's own
    work between them) must each be in time order, and no two windows may
    overlap (raises ``ValueError`` otherwise).

    With ``dependencies`` (drained with the activities), each window whose end
    marker was found also gets the happens-before check: its activities on
    other streams that :func:`unordered_by_dependencies` finds not ordered
    between the spin (when there was one) and the marker go to
    ``Attribution.unjoined``.  ``legacy_calling_stream`` says whether the
    calling stream is the legacy NULL stream (``None``: as its flag in
    ``dependencies.stream_flags`` says).
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
        spin: DeviceActivity | None = None
        if window.harness_spin_ns > 0:
            spin = next((a for a in bucket if a.kind == KERNEL and SPIN_KERNEL_NAME in a.name), None)
            if spin is None or spin is not bucket[0] or spin.duration_ns * 2 < window.harness_spin_ns:
                result.spin_missing += 1
            if spin is not None:
                harness_stream = spin.stream
                bucket = [a for a in bucket if a is not spin]
        marker: DeviceActivity | None = None
        if window.end_marker:
            marker = _end_marker(bucket, harness_stream)
            if marker is None:
                result.marker_missing += 1
            else:
                bucket = [a for a in bucket if a is not marker]
                result.unordered.extend(a for a in bucket if a.end_ns > marker.start_ns)
                if dependencies is not None:
                    result.unjoined.extend(
                        unordered_by_dependencies(
                            bucket,
                            marker.stream,
                            spin.correlation if spin is not None and spin.stream == marker.stream else None,
                            marker.correlation,
                            dependencies,
                            legacy_calling_stream,
                            window.marker_host_ns or None,
                        )
                    )
        result.harness.append((spin, marker))
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


#: The events figure may read this much less than the CUPTI span it brackets (``cudaEventElapsedTime``
#: resolves about 0.5 µs; on the H200 honest calls read 1.2–3.5 µs *more* by events than by CUPTI) ...
EVENTS_BELOW_SPAN_NS = 2_000
#: ... or this fraction of the span, whichever is larger.
EVENTS_BELOW_SPAN_FRACTION = 0.01


def timer_tampering(
    found: Attribution,
    dependencies: Dependencies | None,
    events_ns: int | None,
) -> list[str]:
    """Why the harness's timer was tampered with during the timed call of ``found`` (its one window).

    The call ran between the harness's spin and its end marker, with the
    harness's CUDA start event recorded after the spin and its stop event
    before the marker, all on the calling stream.  From inside ``run()`` an
    implementation can reach those events (and CUPTI itself); what it can do
    with them shows here (``timerNotPatched``, docs/bench.md "Timers"):

    * the spin or the end marker missing: CUPTI's collection was switched off
      or its records sent elsewhere during the call;
    * the call caused no kernel, copy or memset at all: a call's outputs are
      written on the device, so its work was hidden from CUPTI;
    * with the dependency records: the start or stop record missing (their
      collection was switched off), or the harness's start or stop event
      recorded again between the two (re-recorded or moved to another stream
      from inside the call);
    * the events figure below the CUPTI span of the work it brackets (less
      :data:`EVENTS_BELOW_SPAN_NS` or :data:`EVENTS_BELOW_SPAN_FRACTION`): the
      start event replaced or moved by a means the records do not show.  The
      caller passes ``events_ns=None`` when the call left work unordered: the
      events do not bracket that work, and ``streamOrdered`` names it.
    """
    reasons: list[str] = []
    spin, marker = found.harness[0] if found.harness else (None, None)
    if found.spin_missing or found.marker_missing:
        reasons.append(
            "CUPTI delivered no record of the harness's own spin or end marker around the call: its activity "
            "collection was switched off or redirected during the call"
        )
    span = found.spans[0] if found.spans else None
    if span is None:
        reasons.append(
            "CUPTI recorded no kernel, copy or memset for the call: outputs written on the device are one of those, "
            "so the call's work was hidden from CUPTI"
        )
    if dependencies is not None and marker is not None:
        after = spin.correlation if spin is not None and spin.stream == marker.stream else -1
        inside = sorted(
            (r for r in dependencies.records if after < r.correlation < marker.correlation),
            key=lambda r: r.correlation,
        )
        own = [r for r in inside if r.stream == marker.stream]
        if len(own) < 2:
            reasons.append(
                "CUPTI delivered no record of the harness's own start or stop event: the collection of event "
                "records was switched off during the call"
            )
        else:
            start, stop = own[0], own[-1]
            again = [
                r
                for r in inside
                if start.correlation < r.correlation < stop.correlation and r.event in (start.event, stop.event)
            ]
            if again:
                streams = sorted({r.stream for r in again})
                reasons.append(
                    f"the harness's CUDA start or stop event was recorded again {len(again)} time(s) inside the "
                    f"call (on stream(s) {', '.join(map(str, streams))}): re-recorded or moved from inside run()"
                )
    if span is not None and events_ns is not None:
        allowed = max(EVENTS_BELOW_SPAN_NS, round(span.duration_ns * EVENTS_BELOW_SPAN_FRACTION))
        if events_ns < span.duration_ns - allowed:
            reasons.append(
                f"the harness's CUDA events read {events_ns} ns for {span.duration_ns} ns of device work that they "
                "bracket: the start or stop event was replaced or moved from inside run()"
            )
    return reasons


@dataclass(frozen=True)
class CallFigure:
    """One timed call settled from CUPTI's records: its sample and what its checks found."""

    #: the span of the call's work (the events figure when CUPTI recorded none: ``tampered`` says so)
    ns: int
    #: kernels, copies and memsets the call caused, on any stream
    kernels: int
    #: activities outside the call's windows or past their end (``noWorkOutsideCalls``)
    outside: int
    #: activities not ordered inside the call on the calling stream (``streamOrdered``)
    unordered: int
    #: why the harness's timer was reached into (``timerNotPatched``)
    tampered: tuple[str, ...]
    #: the device time covered by at least one of the call's activities: the span less the gaps between them
    #: (``None`` when CUPTI recorded none)
    busy_ns: int | None = None


def settle_calls(
    activities: Sequence[DeviceActivity],
    calls: Sequence[tuple[Window, int, int]],
    dependencies: Dependencies | None,
    legacy_calling_stream: bool | None,
    harness_after: bool = False,
) -> list[CallFigure]:
    """Settle several timed calls from one flush of CUPTI's records, as a flush after each would have.

    ``calls`` are, in time order, each call's window, the start of the harness window before it (the end
    of the call before) and its CUDA events figure.  Each activity goes to the call in whose window or
    harness window it started (the partition that a flush after every call makes); work before the first
    harness window stays with the first call and work after the last window with the last, outside both
    of their windows, unless ``harness_after``: the flush came later than right after the last call (at the
    end of a run), and what started after its window is the harness's (an audit's copies, the end's
    checks), as a flush right after that call would have left it to the next.  The dependency records are
    shared out in host call order
    (``_dependencies_per_call``): a wait on a record made in an earlier call orders nothing, as before.
    """
    if not calls:
        return []
    last = len(calls) - 1
    ends = [window.end_ns for window, _, _ in calls]
    parts: list[list[DeviceActivity]] = [[] for _ in calls]
    for activity in activities:
        index = bisect.bisect_left(ends, activity.start_ns)
        if index <= last:
            parts[index].append(activity)
        elif not harness_after:
            parts[last].append(activity)
    figures: list[CallFigure] = []
    for (window, own_ns, events_ns), part, ordering in zip(
        calls, parts, _dependencies_per_call(parts, dependencies), strict=True
    ):
        found = attribute(
            part,
            [window],
            [Window(own_ns, window.begin_ns)],
            dependencies=ordering,
            legacy_calling_stream=legacy_calling_stream,
        )
        span = found.spans[0]
        outside = len(found.escaped) + len(found.overran)
        # streamOrdered: work that ended after the end marker began, or that CUDA's ordering (event records,
        # waits, host synchronisations) does not put after the call's start and before its end
        unordered = len(found.unordered) + len(found.unjoined)
        # timerNotPatched: the events and CUPTI's own records of the harness's work tell whether the call reached
        # into the timer (events bracket ordered work only, so they are not compared when some was unordered)
        tampered = tuple(timer_tampering(found, dependencies, None if unordered else events_ns))
        if span is None:  # no device work recorded: the events figure stands, and the call is flagged above
            figures.append(CallFigure(events_ns, 0, outside, unordered, tampered))
        else:
            figures.append(
                CallFigure(
                    span.duration_ns,
                    span.kernels + span.copies + span.memsets,
                    outside,
                    unordered,
                    tampered,
                    span.busy_ns,
                )
            )
    return figures


def _dependencies_per_call(
    parts: Sequence[Sequence[DeviceActivity]], dependencies: Dependencies | None
) -> list[Dependencies | None]:
    """The dependency records of each call's share of one flush, split by host call order (correlation ids).

    A call's share runs up to the latest host call among its activities and those of the calls before it
    (its end marker, normally): what a flush after it would have held, less the host's synchronisation that
    closed its window, which orders nothing inside the call.  Judging each call against its share alone
    keeps the settling of a batch linear in its length.
    """
    if dependencies is None:
        return [None] * len(parts)
    bounds: list[int] = []
    highest = -(2**63)
    for part in parts:
        highest = max([highest, *(a.correlation for a in part)])
        bounds.append(highest)
    last = len(parts) - 1
    records: list[list[EventRecord]] = [[] for _ in parts]
    syncs: list[list[Synchronization]] = [[] for _ in parts]
    for record in dependencies.records:
        records[min(bisect.bisect_left(bounds, record.correlation), last)].append(record)
    for sync in dependencies.syncs:
        syncs[min(bisect.bisect_left(bounds, sync.correlation), last)].append(sync)
    return [
        Dependencies(tuple(own), tuple(waits), dependencies.stream_flags)
        for own, waits in zip(records, syncs, strict=True)
    ]


def _end_marker(bucket: Sequence[DeviceActivity], stream: int | None) -> DeviceActivity | None:
    """The harness's end marker: the last spin kernel to start (on the harness's stream, when known)."""
    candidates = [
        a for a in bucket if a.kind == KERNEL and SPIN_KERNEL_NAME in a.name and (stream is None or a.stream == stream)
    ]
    return max(candidates, key=lambda a: a.start_ns) if candidates else None


def unordered_by_dependencies(
    activities: Sequence[DeviceActivity],
    calling_stream: int,
    begin_correlation: int | None,
    end_correlation: int,
    dependencies: Dependencies,
    legacy_calling_stream: bool | None = None,
    end_host_ns: int | None = None,
) -> list[DeviceActivity]:
    """The activities on other streams than ``calling_stream`` not ordered inside the call (CUDA happens-before).

    An activity on another stream is ordered inside the call when it is both
    (a) after the operation ``begin_correlation`` on the calling stream (the
    harness's spin; ``None``: not checked) and (b) before the operation
    ``end_correlation`` there (the end marker).  The edges are program order on
    a stream, an event record to the stream wait that consumes it, host
    synchronisations (a host call at correlation ``h`` comes after every host
    call below ``h``), and the legacy NULL stream's implicit ordering with
    blocking streams; see docs/bench.md, "Stream ordering".  Work whose order
    cannot be shown (a wait whose record is not in ``dependencies``) is
    reported: the check errs towards failing a call, never towards passing one.

    ``end_host_ns`` (CUPTI's host clock just before the end marker was
    enqueued): a host synchronisation then counts for (b) only if it returned
    by that time.  Correlation order alone is host order only within one
    thread: a synchronisation that another thread began before the marker's
    launch but that returned after it does not order anything before the
    marker.
    """
    placed = _launch_streams(activities, calling_stream, dependencies)
    nodes = [(stream, a.correlation) for a, stream in zip(activities, placed, strict=True)]
    ordering = _Ordering(
        nodes, calling_stream, begin_correlation, end_correlation, dependencies, legacy_calling_stream, end_host_ns
    )
    before = ordering.before_end()
    after = ordering.after_begin() if begin_correlation is not None else None
    return [
        a
        for a, stream in zip(activities, placed, strict=True)
        if stream != calling_stream
        and (a.correlation > before(stream) or (after is not None and a.correlation < after(stream)))
    ]


def _launch_streams(activities: Sequence[DeviceActivity], calling_stream: int, dependencies: Dependencies) -> list[int]:
    """Each activity's stream, a CUDA graph's work counted on the stream the graph was launched on.

    A graph launch is one operation of the stream it was launched on; the
    driver may run parallel branches of the graph on streams of its own, which
    carry nothing else.  So when the activities of one launch (same graph id and
    correlation) lie on exactly one stream that the program also used outside
    graphs (for other work, an event record, a wait, a host synchronisation, or
    the calling stream), that stream is the launch's and all of them count on
    it; otherwise each keeps its own stream.
    """
    used = {calling_stream}
    used.update(a.stream for a in activities if not a.graph)
    used.update(r.stream for r in dependencies.records)
    used.update(s.stream for s in dependencies.syncs if s.kind in (STREAM_WAIT_EVENT, STREAM_SYNCHRONIZE))
    launches: dict[tuple[int, int], set[int]] = {}
    for a in activities:
        if a.graph:
            launches.setdefault((a.graph, a.correlation), set()).add(a.stream)
    launched_on: dict[tuple[int, int], int] = {}
    for launch, streams in launches.items():
        candidates = streams & used
        if len(candidates) == 1:
            launched_on[launch] = candidates.pop()
    return [launched_on.get((a.graph, a.correlation), a.stream) if a.graph else a.stream for a in activities]


_NEVER = -(2**63)
_ALWAYS = 2**63


class _Ordering:
    """Per stream, the bound up to which its operations reach the end marker, or from which the spin reaches them.

    The set of operations of one stream that happen before a given operation is
    a prefix of that stream (program order); the set that happen after one is a
    suffix.  So the transitive closure is a bound per stream, raised (lowered)
    edge by edge until nothing moves: a fixed point, as chains of waits and
    host synchronisations need.
    """

    def __init__(
        self,
        activities: Sequence[tuple[int, int]],
        calling_stream: int,
        begin: int | None,
        end: int,
        dependencies: Dependencies,
        legacy_calling_stream: bool | None,
        end_host_ns: int | None = None,
    ) -> None:
        self.calling = calling_stream
        self.end_host_ns = end_host_ns
        self.begin = begin
        self.end = end
        flags = dict(dependencies.stream_flags)
        if legacy_calling_stream is None:
            legacy_calling_stream = flags.get(calling_stream) == NULL_STREAM
        self.null = {s for s, flag in flags.items() if flag == NULL_STREAM}
        if legacy_calling_stream:
            self.null.add(calling_stream)
        else:
            self.null.discard(calling_stream)
        self.blocking = {s for s, flag in flags.items() if flag == BLOCKING} - self.null
        records = dependencies.records
        nodes: dict[int, list[int]] = {}
        for stream, correlation in itertools.chain(
            activities,
            ((r.stream, r.correlation) for r in records),
            ((w.stream, w.correlation) for w in dependencies.syncs if w.kind == STREAM_WAIT_EVENT),
            [(calling_stream, end)],
            [] if begin is None else [(calling_stream, begin)],
        ):
            nodes.setdefault(stream, []).append(correlation)
        self.nodes = {stream: sorted(set(corrs)) for stream, corrs in nodes.items()}
        self.streams = set(self.nodes) | self.null | self.blocking
        by_sync: dict[int, list[EventRecord]] = {}
        by_event: dict[int, list[EventRecord]] = {}
        for record in sorted(records, key=lambda r: r.correlation):
            if record.sync_id:
                by_sync.setdefault(record.sync_id, []).append(record)
            by_event.setdefault(record.event, []).append(record)
        #: (wait correlation, waiting stream, the record it consumed)
        self.waits: list[tuple[int, int, EventRecord]] = []
        #: (host call correlation, synchronised stream or None for the context, or the record synchronised on,
        #: when the host call returned)
        self.stream_syncs: list[tuple[int, int | None, int]] = []
        self.event_syncs: list[tuple[int, EventRecord, int]] = []
        for sync in dependencies.syncs:
            if sync.kind in (STREAM_WAIT_EVENT, EVENT_SYNCHRONIZE):
                consumed = _consumed(sync, by_sync, by_event)
                if consumed is None:
                    continue  # a wait on a record not among the records: no edge
                if sync.kind == STREAM_WAIT_EVENT:
                    self.waits.append((sync.correlation, sync.stream, consumed))
                else:
                    self.event_syncs.append((sync.correlation, consumed, sync.end_ns))
            elif sync.kind == STREAM_SYNCHRONIZE:
                self.stream_syncs.append((sync.correlation, sync.stream, sync.end_ns))
            else:
                self.stream_syncs.append((sync.correlation, None, sync.end_ns))

    def _last_at_or_below(self, stream: int, bound: int) -> int | None:
        corrs = self.nodes.get(stream, [])
        index = bisect.bisect_right(corrs, bound)
        return corrs[index - 1] if index else None

    def _first_at_or_above(self, stream: int, bound: int) -> int | None:
        corrs = self.nodes.get(stream, [])
        index = bisect.bisect_left(corrs, bound)
        return corrs[index] if index < len(corrs) else None

    def _returned_before_end(self, host: int, returned_ns: int) -> bool:
        if host >= self.end:
            return False
        return self.end_host_ns is None or 0 < returned_ns <= self.end_host_ns

    def before_end(self) -> Callable[[int], int]:
        """``bound(stream)``: operations on ``stream`` with correlation <= bound happen before the end marker."""
        bound: dict[int, int] = {self.calling: self.end}
        # A host call that returned before the marker's launch: what it waited for precedes the marker.
        floor = _NEVER
        for host, stream, returned in self.stream_syncs:
            if self._returned_before_end(host, returned):
                if stream is None:
                    floor = max(floor, host - 1)
                else:
                    bound[stream] = max(bound.get(stream, _NEVER), host - 1)
        for host, record, returned in self.event_syncs:
            if self._returned_before_end(host, returned):
                bound[record.stream] = max(bound.get(record.stream, _NEVER), record.correlation)

        def get(stream: int) -> int:
            return max(bound.get(stream, _NEVER), floor)

        def raise_to(stream: int, value: int) -> bool:
            if value > get(stream):
                bound[stream] = value
                return True
            return False

        moved = True
        while moved:
            moved = False
            for wait, stream, record in self.waits:
                if wait <= get(stream):
                    moved |= raise_to(record.stream, record.correlation)
            for source, targets in ((self.null, self.blocking), (self.blocking, self.null)):
                for stream in source:
                    last = self._last_at_or_below(stream, get(stream))
                    if last is not None:
                        for target in targets:
                            moved |= raise_to(target, last - 1)
        return get

    def after_begin(self) -> Callable[[int], int]:
        """``bound(stream)``: operations on ``stream`` with correlation >= bound happen after the spin."""
        assert self.begin is not None
        bound: dict[int, int] = {self.calling: self.begin}
        ceiling = _ALWAYS  # every operation enqueued after a host call that waited for post-spin work

        def get(stream: int) -> int:
            return min(bound.get(stream, _ALWAYS), ceiling)

        def lower_to(stream: int, value: int) -> bool:
            if value < get(stream):
                bound[stream] = value
                return True
            return False

        def waited_for_after(stream: int, host: int) -> bool:
            first = self._first_at_or_above(stream, get(stream))
            return first is not None and first < host

        moved = True
        while moved:
            moved = False
            for wait, stream, record in self.waits:
                if record.correlation >= get(record.stream):
                    moved |= lower_to(stream, wait)
            for host, synced, _ in self.stream_syncs:
                streams: Iterable[int] = self.streams if synced is None else (synced,)
                if host + 1 < ceiling and any(waited_for_after(s, host) for s in streams):
                    ceiling, moved = host + 1, True
            for host, record, _ in self.event_syncs:
                if host + 1 < ceiling and record.correlation >= get(record.stream):
                    ceiling, moved = host + 1, True
            for source, targets in ((self.null, self.blocking), (self.blocking, self.null)):
                for stream in source:
                    first = self._first_at_or_above(stream, get(stream))
                    if first is not None:
                        for target in targets:
                            moved |= lower_to(target, first + 1)
        return get


def _consumed(
    sync: Synchronization, by_sync: Mapping[int, list[EventRecord]], by_event: Mapping[int, list[EventRecord]]
) -> EventRecord | None:
    """The record a wait or an event synchronisation used: the one of its sync id, else the event's latest before it.

    CUDA waits on an event's most recent record before the wait.  A record of
    the same event whose own sync id differs from the wait's is a different
    record, not the one consumed: no edge then.
    """
    if sync.sync_id and sync.sync_id in by_sync:
        earlier = [r for r in by_sync[sync.sync_id] if r.correlation < sync.correlation]
        return earlier[-1] if earlier else None
    earlier = [r for r in by_event.get(sync.event, []) if r.correlation < sync.correlation]
    if not earlier:
        return None
    record = earlier[-1]
    if sync.sync_id and record.sync_id and record.sync_id != sync.sync_id:
        return None
    return record


def _window_of(begins: Sequence[int], windows: Sequence[Window], start_ns: int) -> int | None:
    index = bisect.bisect_right(begins, start_ns) - 1
    if index < 0 or start_ns > windows[index].end_ns:
        return None
    return index


def _import_cupti() -> Any:
    """``cupti.cupti`` of ``cupti-python`` (raises ``EnvError`` when it or its libcupti is missing)."""
    try:
        from cupti import cupti
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
        import struct

        return struct.unpack_from(self.format, memory)

    def fields_with_numpy(self, memory: Any) -> tuple[int, ...]:
        """The same fields as numpy reads them with cupti-python's dtype (the slow way, and the cross-check)."""
        import numpy as np

        row = np.frombuffer(memory, self.dtype, count=1)[0]
        return tuple(int(row[name]) for name in self.names)

    def record(self, kind: int, fields: Sequence[int]) -> Any:
        """An object with kictl's fields, the kernel's name read from the C string its record points to."""
        from types import SimpleNamespace

        value = SimpleNamespace(kind=kind, **dict(zip(self.names, fields, strict=True)))
        pointer = getattr(value, "name", None)
        if pointer is not None:
            import ctypes

            value.name = ctypes.string_at(pointer).decode("utf-8", "replace") if pointer else ""
        return value


def record_layouts(cupti: Any) -> tuple[dict[int, RecordLayout], str | None]:
    """Per activity kind, the layout of its records as this cupti-python describes them; and what is missing.

    The layout of each kind is the numpy dtype cupti-python declares for the newest version of that record
    (``activity_kernel10_dtype`` for CUPTI 13's kernels), which cupti-python's own classes read the records
    with.  A kind whose dtype or required fields are not there is left out of the map, and the second value
    says which.
    """
    import re

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
    import struct

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
        import ctypes

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
    call (``benchmarks/cupti_flush_cost.py``).  This registers kictl's own buffer callbacks with libcupti
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
        import ctypes

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
        import ctypes

        memory = (ctypes.c_uint8 * self.buffer_bytes)()
        address = ctypes.addressof(memory)
        self.buffers[address] = memory
        buffer[0] = address
        size[0] = self.buffer_bytes
        records[0] = 0

    def _completed(self, context: Any, stream: int, buffer: int | None, size: int, valid: int) -> None:
        import ctypes

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
    import ctypes

    cupti.get_timestamp()  # makes cupti-python load its libcupti, if it has not yet
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        paths = {line.split()[-1] for line in maps if "libcupti.so" in line and line.split()[-1].startswith("/")}
    if len(paths) != 1:
        raise EnvError(f"the libcupti that cupti-python loaded could not be found ({len(paths)} candidates)")
    return ctypes.CDLL(paths.pop())


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
        #: the size of each buffer CUPTI asks for (benchmarks/gpu_call_cost.py compares sizes)
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
