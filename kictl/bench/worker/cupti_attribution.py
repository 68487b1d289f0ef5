"""Device time per timed call from CUPTI activity records (docs/bench.md, "Timers"): the pure attribution.

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

This module (:func:`attribute`, :func:`settle_calls`) needs no GPU and is what the CPU tests exercise; the
happens-before check is ``cupti_ordering``, the records' types ``cupti_model``, the
reader of CUPTI's buffers ``cupti_records``, and ``cupti_timer.CuptiCollector`` binds it
all to ``cupti-python`` (the ``gpu`` extra), raising :class:`~kictl.errors.EnvError` when CUPTI is missing or
cannot attach, so that the caller can fall back to CUDA events and say so.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from kictl.bench.worker.cupti_model import (
    KERNEL,
    MEMCPY,
    MEMSET,
    SPIN_KERNEL_NAME,
    Attribution,
    CallSpan,
    Dependencies,
    DeviceActivity,
    Window,
)
from kictl.bench.worker.cupti_ordering import _dependencies_per_call, _end_marker, unordered_by_dependencies


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


def _window_of(begins: Sequence[int], windows: Sequence[Window], start_ns: int) -> int | None:
    index = bisect.bisect_right(begins, start_ns) - 1
    if index < 0 or start_ns > windows[index].end_ns:
        return None
    return index
