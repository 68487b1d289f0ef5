"""CUDA's happens-before order over one timed call's activities (docs/bench.md, "Stream ordering").

From the dependency records CUPTI drained with a call (event records, stream waits, host synchronisations,
stream creation flags), an activity on another stream than the calling one must be ordered after the
harness's spin and before its end marker; :func:`unordered_by_dependencies` names those that are not.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence

from kictl.bench.worker.cupti_model import (
    BLOCKING,
    EVENT_SYNCHRONIZE,
    KERNEL,
    NULL_STREAM,
    SPIN_KERNEL_NAME,
    STREAM_SYNCHRONIZE,
    STREAM_WAIT_EVENT,
    Dependencies,
    DeviceActivity,
    EventRecord,
    Synchronization,
)


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
