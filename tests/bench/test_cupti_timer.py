"""CUPTI records to per-call samples: attribution rules, on hand-made activity records."""

from __future__ import annotations

import dataclasses
import enum
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kictl.bench.worker.cupti_attribution import attribute, timer_tampering
from kictl.bench.worker.cupti_model import (
    BLOCKING,
    BUFFER_BYTES,
    CONTEXT_SYNCHRONIZE,
    EVENT_SYNCHRONIZE,
    KERNEL,
    MEMCPY,
    MEMSET,
    NON_BLOCKING,
    NULL_STREAM,
    SPIN_KERNEL_NAME,
    STREAM_SYNCHRONIZE,
    STREAM_WAIT_EVENT,
    Dependencies,
    DeviceActivity,
    EventRecord,
    Synchronization,
    Window,
)
from kictl.bench.worker.cupti_ordering import unordered_by_dependencies
from kictl.bench.worker.cupti_timer import CuptiCollector
from kictl.errors import EnvError


def kernel(start: int, end: int, stream: int = 7, name: str = "attention") -> DeviceActivity:
    return DeviceActivity(KERNEL, start, end, stream, name)


def spin(start: int, end: int) -> DeviceActivity:
    return DeviceActivity(KERNEL, start, end, 7, SPIN_KERNEL_NAME)


def test_one_kernel_per_call_is_its_duration() -> None:
    windows = [Window(0, 100), Window(200, 300)]
    result = attribute([kernel(10, 40), kernel(210, 222)], windows)
    assert [s.duration_ns if s else None for s in result.spans] == [30, 12]
    assert result.clean


def test_side_stream_work_is_timed_not_hidden() -> None:
    # The call returns at once; its kernel runs on another stream and ends before the window closes.
    result = attribute([kernel(10, 12, stream=7), kernel(11, 90, stream=13)], [Window(0, 100)])
    (span,) = result.spans
    assert span is not None
    assert (span.duration_ns, span.kernels, span.streams) == (80, 2, 2)


def test_work_past_the_window_or_outside_any_window_escapes() -> None:
    windows = [Window(0, 100), Window(200, 300)]
    late = kernel(90, 150)  # started in the window, ended after the device was synchronised
    stray = kernel(120, 130)  # between windows: launched by a thread after the call returned
    result = attribute([kernel(10, 20), late, stray, kernel(205, 210)], windows)
    assert result.overran == [late]
    assert result.escaped == [stray]
    assert not result.clean


def test_harness_spin_is_left_out_and_must_be_there() -> None:
    windows = [Window(0, 1000, harness_spin_ns=400), Window(2000, 3000, harness_spin_ns=400)]
    records = [spin(5, 450), kernel(451, 470), kernel(2010, 2030)]  # the second window lost its spin
    result = attribute(records, windows)
    assert result.spans[0] is not None
    assert result.spans[0].duration_ns == 19
    assert result.spin_missing == 1


def test_a_kernel_named_like_the_spin_cannot_hide_by_name() -> None:
    # Only the earliest activity of the window may be the spin, and it must have lasted half the spin.
    windows = [Window(0, 1000, harness_spin_ns=400)]
    records = [spin(5, 450), DeviceActivity(KERNEL, 460, 900, 7, SPIN_KERNEL_NAME)]
    (span,) = attribute(records, windows).spans
    assert span is not None
    assert span.duration_ns == 440
    short = attribute([spin(5, 50), kernel(60, 70)], windows)
    assert short.spin_missing == 1


def test_copies_and_memsets_count_and_busy_time_is_a_union() -> None:
    records = [
        DeviceActivity(MEMCPY, 10, 30, 7),
        kernel(20, 50, stream=9),
        DeviceActivity(MEMSET, 70, 80, 7),
    ]
    (span,) = attribute(records, [Window(0, 100)]).spans
    assert span is not None
    assert (span.copies, span.memsets, span.kernels) == (1, 1, 1)
    assert span.duration_ns == 70
    assert span.busy_ns == 50  # [10, 50] and [70, 80]


def test_harness_work_between_calls_is_left_out_but_must_stay_in_its_window() -> None:
    calls = [Window(100, 200), Window(400, 500)]
    harness = [Window(0, 90), Window(300, 390)]
    flush = DeviceActivity(KERNEL, 10, 80, 7, "fill")
    restore = DeviceActivity(MEMCPY, 310, 350, 7)
    result = attribute([flush, kernel(110, 120), restore, kernel(410, 430)], calls, harness)
    assert [s.duration_ns if s else None for s in result.spans] == [10, 20]
    assert result.clean
    late = DeviceActivity(KERNEL, 320, 395, 7, "late")  # a harness window's work must end inside it
    assert attribute([late], calls, harness).overran == [late]
    with pytest.raises(ValueError, match="overlap"):
        attribute([], calls, [Window(150, 160)])


def test_a_call_without_device_work_has_no_span() -> None:
    assert attribute([], [Window(0, 10)]).spans == [None]


def test_overlapping_windows_are_refused() -> None:
    with pytest.raises(ValueError, match="overlap"):
        attribute([], [Window(0, 100), Window(50, 150)])


def test_collector_without_cupti_is_an_environment_error() -> None:
    pytest.importorskip("torch")
    try:
        import cupti  # noqa: F401
    except ImportError:
        with pytest.raises(EnvError, match="CUPTI is not available"):
            CuptiCollector()
    else:  # pragma: no cover - only where cupti-python is installed
        pytest.skip("cupti-python is installed here")


def test_work_that_outlives_the_calling_streams_end_is_unordered() -> None:
    # The side-stream cheat: the call returns at once; its kernel (stream 13) runs past the end marker
    # the harness put on the calling stream (7) right after the call returned.
    window = Window(0, 1000, harness_spin_ns=400, end_marker=True)
    records = [spin(5, 450), DeviceActivity(KERNEL, 452, 453, 7, SPIN_KERNEL_NAME), kernel(451, 900, stream=13)]
    result = attribute(records, [window])
    (span,) = result.spans
    assert span is not None
    assert span.duration_ns == 449  # timed, not hidden
    assert [a.stream for a in result.unordered] == [13]


def test_work_the_calling_stream_waited_for_is_ordered() -> None:
    window = Window(0, 1000, harness_spin_ns=400, end_marker=True)
    records = [spin(5, 450), kernel(451, 600, stream=13), DeviceActivity(KERNEL, 601, 602, 7, SPIN_KERNEL_NAME)]
    result = attribute(records, [window])
    assert result.unordered == []
    assert result.clean
    (span,) = result.spans
    assert span is not None
    assert span.duration_ns == 149


def test_a_fake_marker_on_another_stream_is_not_the_marker() -> None:
    # A kernel named like the harness's marker, started late on the implementation's own stream, is no marker.
    window = Window(0, 2000, harness_spin_ns=400, end_marker=True)
    records = [
        spin(5, 450),
        kernel(451, 1500, stream=13),
        DeviceActivity(KERNEL, 460, 461, 7, SPIN_KERNEL_NAME),
        DeviceActivity(KERNEL, 1600, 1601, 13, SPIN_KERNEL_NAME),
    ]
    result = attribute(records, [window])
    assert [a.end_ns for a in result.unordered] == [1500, 1601]


# --------------------------------------------------------------------------- stream ordering by dependencies

CALLING, SIDE, OTHER = 7, 13, 14


class Program:
    """Host calls in order, each with the next correlation id, as CUPTI would report them for one timed call."""

    def __init__(self, calling: int = CALLING, flags: dict[int, str] | None = None) -> None:
        self.calling = calling
        self.correlation = 100
        self.activities: list[DeviceActivity] = []
        self.records: list[EventRecord] = []
        self.syncs: list[Synchronization] = []
        self.flags = flags or {}
        self.latest: dict[int, EventRecord] = {}
        self.begin: int | None = None
        self.end = 0

    def _next(self) -> int:
        self.correlation += 1
        return self.correlation

    def spin(self) -> None:
        self.begin = self._next()

    def launch(self, stream: int, name: str = "k") -> None:
        self.activities.append(DeviceActivity(KERNEL, 0, 1, stream, name, self._next()))

    def launch_graph(self, graph: int, streams: list[int], name: str = "g") -> None:
        """One ``cudaGraphLaunch``: its kernels share the launch's correlation, the driver picks their streams."""
        correlation = self._next()
        self.activities.extend(
            DeviceActivity(KERNEL, 0, 1, stream, f"{name}{i}", correlation, graph) for i, stream in enumerate(streams)
        )

    def record(self, event: int, stream: int) -> None:
        correlation = self._next()
        record = EventRecord(correlation, stream, event, sync_id=correlation * 10)
        self.records.append(record)
        self.latest[event] = record

    def wait(self, stream: int, event: int) -> None:
        record = self.latest.get(event)
        self.syncs.append(
            Synchronization(self._next(), STREAM_WAIT_EVENT, stream, event, record.sync_id if record else 0)
        )

    def wait_stream(self, waiter: int, waited: int, event: int) -> None:
        """torch's ``waiter.wait_stream(waited)``: an event recorded on ``waited``, waited for on ``waiter``."""
        self.record(event, waited)
        self.wait(waiter, event)

    def stream_sync(self, stream: int) -> None:
        self.syncs.append(Synchronization(self._next(), STREAM_SYNCHRONIZE, stream))

    def context_sync(self) -> None:
        self.syncs.append(Synchronization(self._next(), CONTEXT_SYNCHRONIZE))

    def event_sync(self, event: int) -> None:
        record = self.latest[event]
        self.syncs.append(Synchronization(self._next(), EVENT_SYNCHRONIZE, 0, event, record.sync_id))

    def marker(self) -> None:
        self.end = self._next()

    def dependencies(self) -> Dependencies:
        return Dependencies(tuple(self.records), tuple(self.syncs), dict(self.flags))

    def unjoined(self, legacy: bool | None = None) -> list[str]:
        found = unordered_by_dependencies(
            self.activities, self.calling, self.begin, self.end, self.dependencies(), legacy
        )
        return [a.name for a in found]


def test_honest_fork_join_is_ordered() -> None:
    p = Program()
    p.spin()
    p.launch(CALLING, "prologue")
    p.wait_stream(SIDE, CALLING, event=1)  # side.wait_stream(current)
    p.launch(SIDE, "a")
    p.launch(SIDE, "b")
    p.wait_stream(CALLING, SIDE, event=2)  # current.wait_stream(side)
    p.marker()
    assert p.unjoined() == []


def test_side_stream_cheat_after_a_host_sync_is_not_joined() -> None:
    # tests/assets/cheats/attention_side_stream.py: kv_indptr.tolist() (a copy and a host sync on the calling
    # stream), then kernels on its own stream, never joined: they follow the spin but nothing orders them
    # before the marker, however early they happen to finish.
    p = Program()
    p.spin()
    p.activities.append(DeviceActivity(MEMCPY, 0, 1, CALLING, "tolist", p._next()))
    p.stream_sync(CALLING)
    p.launch(SIDE, "gather")
    p.launch(SIDE, "einsum")
    p.marker()
    assert p.unjoined() == ["gather", "einsum"]


def test_work_launched_without_waiting_for_the_inputs_is_not_after_the_begin() -> None:
    p = Program()
    p.spin()
    p.launch(SIDE, "early")  # may read the inputs before the calling stream's earlier work wrote them
    p.wait_stream(CALLING, SIDE, event=2)
    p.marker()
    assert p.unjoined() == ["early"]


def test_a_fork_without_a_join_is_not_before_the_end() -> None:
    p = Program()
    p.spin()
    p.wait_stream(SIDE, CALLING, event=1)
    p.launch(SIDE, "left_running")
    p.marker()
    assert p.unjoined() == ["left_running"]


def test_work_after_the_joining_record_is_not_joined() -> None:
    p = Program()
    p.spin()
    p.wait_stream(SIDE, CALLING, event=1)
    p.launch(SIDE, "joined")
    p.wait_stream(CALLING, SIDE, event=2)
    p.launch(SIDE, "after_the_join")
    p.marker()
    assert p.unjoined() == ["after_the_join"]


def test_a_join_through_a_chain_of_two_streams_is_ordered() -> None:
    p = Program()
    p.spin()
    p.wait_stream(SIDE, CALLING, event=1)
    p.wait_stream(OTHER, SIDE, event=2)  # OTHER after SIDE after the spin
    p.launch(OTHER, "deep")
    p.launch(SIDE, "side")
    p.wait_stream(SIDE, OTHER, event=3)  # SIDE waits for OTHER ...
    p.wait_stream(CALLING, SIDE, event=4)  # ... and the calling stream for SIDE
    p.marker()
    assert p.unjoined() == []


def test_a_host_stream_synchronize_before_returning_joins() -> None:
    p = Program()
    p.spin()
    p.wait_stream(SIDE, CALLING, event=1)
    p.launch(SIDE, "k")
    p.stream_sync(SIDE)  # side.synchronize() before run() returns
    p.marker()
    assert p.unjoined() == []


def test_a_host_synchronize_of_another_stream_does_not_join() -> None:
    p = Program()
    p.spin()
    p.wait_stream(SIDE, CALLING, event=1)
    p.launch(SIDE, "k")
    p.stream_sync(OTHER)
    p.marker()
    assert p.unjoined() == ["k"]


def test_context_synchronize_orders_both_ways() -> None:
    p = Program()
    p.spin()
    p.context_sync()  # waits for the spin: what follows is after it
    p.launch(SIDE, "k")
    p.context_sync()  # torch.cuda.synchronize() before returning
    p.marker()
    assert p.unjoined() == []


def test_event_synchronize_joins_the_work_before_the_record() -> None:
    p = Program()
    p.spin()
    p.wait_stream(SIDE, CALLING, event=1)
    p.launch(SIDE, "before")
    p.record(5, SIDE)
    p.launch(SIDE, "after")
    p.event_sync(5)
    p.marker()
    assert p.unjoined() == ["after"]


def test_a_wait_uses_the_record_before_it_not_a_later_re_record() -> None:
    # The event is recorded on SIDE before the work, the calling stream waits on that record, and the event is
    # recorded again after the work: the wait consumed the first record, so the work is not joined.
    for with_sync_ids in (True, False):
        p = Program()
        p.spin()
        p.wait_stream(SIDE, CALLING, event=1)
        p.record(2, SIDE)
        p.wait(CALLING, 2)
        p.launch(SIDE, "k")
        p.record(2, SIDE)
        p.marker()
        if not with_sync_ids:
            p.records = [EventRecord(r.correlation, r.stream, r.event) for r in p.records]
            p.syncs = [Synchronization(s.correlation, s.kind, s.stream, s.event) for s in p.syncs]
        assert p.unjoined() == ["k"], with_sync_ids


def test_a_wait_on_a_record_from_outside_the_window_gives_no_edge() -> None:
    p = Program()
    p.record(1, CALLING)  # in setup(), before the call
    p.spin()
    p.wait(SIDE, 1)  # SIDE waits for the calling stream as it was before the spin
    p.launch(SIDE, "k")
    p.wait_stream(CALLING, SIDE, event=2)
    p.marker()
    assert p.unjoined() == ["k"]
    p.records = p.records[1:]  # the record was drained with an earlier call: no record, no edge
    assert p.unjoined() == ["k"]


def test_a_wait_whose_sync_id_names_another_record_gives_no_edge() -> None:
    p = Program()
    p.spin()
    p.wait_stream(SIDE, CALLING, event=1)
    p.launch(SIDE, "k")
    p.record(2, SIDE)
    p.syncs.append(Synchronization(p._next(), STREAM_WAIT_EVENT, CALLING, 2, sync_id=1))  # not that record's id
    p.marker()
    assert p.unjoined() == ["k"]


def test_legacy_null_calling_stream_orders_blocking_streams_only() -> None:
    for flag, expected in ((BLOCKING, []), (NON_BLOCKING, ["k"])):
        p = Program(flags={SIDE: flag})
        p.spin()
        p.launch(SIDE, "k")  # no explicit wait nor join
        p.marker()
        assert p.unjoined(legacy=True) == expected, flag
        assert p.unjoined(legacy=False) == ["k"], flag  # a non-NULL calling stream: no implicit order
    p = Program(flags={CALLING: NULL_STREAM, SIDE: BLOCKING})
    p.spin()
    p.launch(SIDE, "k")
    p.marker()
    assert p.unjoined() == []  # the calling stream's own flag says it is the NULL stream
    assert p.unjoined(legacy=False) == ["k"]  # the caller's word wins over the flag
    p = Program()
    p.spin()
    p.launch(SIDE, "unknown_flag")
    p.marker()
    assert p.unjoined(legacy=True) == ["unknown_flag"]  # no flag known: non-blocking, as torch's streams are


def test_a_null_stream_of_the_implementations_orders_blocking_streams_both_ways() -> None:
    # The calling stream is a non-blocking stream; the implementation forks and joins through the NULL stream.
    for side_flag, expected in ((BLOCKING, []), (NON_BLOCKING, ["k"])):
        p = Program(flags={OTHER: NULL_STREAM, SIDE: side_flag})
        p.spin()
        p.wait_stream(SIDE, CALLING, event=1)
        p.launch(OTHER, "k")  # NULL-stream work waits for SIDE's earlier wait ...
        p.wait_stream(CALLING, SIDE, event=2)  # ... and SIDE's record waits for the NULL stream's earlier work
        p.marker()
        assert p.unjoined(legacy=False) == expected, side_flag
        p = Program(flags={OTHER: NULL_STREAM, SIDE: side_flag})
        p.spin()
        p.wait_stream(OTHER, CALLING, event=1)
        p.launch(SIDE, "k")
        p.wait_stream(CALLING, OTHER, event=2)
        p.marker()
        assert p.unjoined(legacy=False) == expected, side_flag


def test_an_implicit_order_at_the_bound_counts() -> None:
    # SIDE's record directly follows NULL-stream work that followed the spin: the record is after the spin.
    p = Program(flags={OTHER: NULL_STREAM, SIDE: BLOCKING})
    p.spin()
    p.wait_stream(OTHER, CALLING, event=1)
    p.record(2, SIDE)
    p.wait(15, 2)
    p.launch(15, "k")
    p.wait_stream(CALLING, 15, event=3)
    p.marker()
    assert p.unjoined(legacy=False) == []
    # a wait directly followed by a host synchronisation of its stream is before the marker
    p = Program()
    p.spin()
    p.wait_stream(SIDE, CALLING, event=1)
    p.launch(SIDE, "k")
    p.record(2, SIDE)
    p.wait(OTHER, 2)
    p.stream_sync(OTHER)
    p.marker()
    assert p.unjoined() == []


def test_a_wait_uses_the_latest_of_several_records() -> None:
    for with_sync_ids in (True, False):
        p = Program()
        p.spin()
        p.wait_stream(SIDE, CALLING, event=1)
        p.record(2, SIDE)
        p.launch(SIDE, "k")
        p.record(2, SIDE)  # recorded again after the work: the wait below uses this record
        p.wait(CALLING, 2)
        p.marker()
        if not with_sync_ids:
            p.records = [EventRecord(r.correlation, r.stream, r.event) for r in p.records]
            p.syncs = [Synchronization(s.correlation, s.kind, s.stream, s.event) for s in p.syncs]
        assert p.unjoined() == [], with_sync_ids


def test_a_host_sync_orders_later_work_only_after_what_it_waited_for() -> None:
    # Synchronising a stream that had no work since the spin does not put the next launches after the spin.
    p = Program()
    p.spin()
    p.stream_sync(SIDE)
    p.launch(OTHER, "k")
    p.wait_stream(SIDE, CALLING, event=1)
    p.launch(SIDE, "s")
    p.context_sync()
    p.marker()
    assert p.unjoined() == ["k"]
    # nor does synchronising on an event recorded before the spin
    p = Program()
    p.record(1, SIDE)
    p.spin()
    p.event_sync(1)
    p.launch(OTHER, "k")
    p.stream_sync(OTHER)
    p.marker()
    assert p.unjoined() == ["k"]


def test_a_host_sync_after_the_marker_does_not_join() -> None:
    p = Program()
    p.spin()
    p.wait_stream(SIDE, CALLING, event=1)
    p.launch(SIDE, "k")
    p.record(3, SIDE)
    p.marker()
    p.event_sync(3)  # the harness's own synchronisation after the call is no join
    p.stream_sync(SIDE)
    p.context_sync()
    assert p.unjoined() == ["k"]


def test_a_graph_counts_on_the_stream_it_was_launched_on() -> None:
    internal = 99  # a stream of the driver's, for a parallel branch of the graph
    p = Program()
    p.spin()
    p.launch_graph(5, [CALLING, internal])  # replayed on the calling stream
    p.marker()
    assert p.unjoined() == []
    p = Program()
    p.spin()
    p.wait_stream(SIDE, CALLING, event=1)
    p.launch_graph(5, [internal, SIDE])  # replayed on a side stream, forked and joined
    p.wait_stream(CALLING, SIDE, event=2)
    p.marker()
    assert p.unjoined() == []
    p = Program()
    p.spin()
    p.wait_stream(SIDE, CALLING, event=1)
    p.launch_graph(5, [SIDE, internal])  # ... never joined
    p.marker()
    assert p.unjoined() == ["g0", "g1"]
    p = Program()
    p.spin()
    p.launch_graph(5, [internal, 98])  # the launching stream is not known: each keeps its own
    p.stream_sync(CALLING)
    p.marker()
    assert p.unjoined() == ["g0", "g1"]
    p = Program()
    p.spin()
    p.launch(SIDE, "plain")
    p.launch_graph(5, [CALLING, SIDE])  # two streams of the program's: no guess
    p.marker()
    assert p.unjoined() == ["plain", "g1"]


def test_a_host_sync_counts_only_if_it_returned_before_the_marker_was_enqueued() -> None:
    # run() forks SIDE, launches k there, starts a thread that calls torch.cuda.synchronize() and returns at
    # once: the sync's correlation (106) is below the marker's (107), but when it returned (9 µs) after the
    # harness enqueued the marker (8 µs), it ordered nothing before the marker.
    fork = (EventRecord(102, CALLING, 1, 1),), (Synchronization(103, STREAM_WAIT_EVENT, SIDE, 1, 1),)
    activities = [DeviceActivity(KERNEL, 0, 1, SIDE, "k", 105)]

    def verdicts(sync_correlation: int) -> list[list[str]]:
        sync = Synchronization(sync_correlation, CONTEXT_SYNCHRONIZE, start_ns=5_000, end_ns=9_000)
        deps = Dependencies(fork[0], (*fork[1], sync))
        return [
            [a.name for a in unordered_by_dependencies(activities, CALLING, 101, 107, deps, end_host_ns=host)]
            for host in (None, 8_000, 9_000)
        ]

    assert verdicts(106) == [[], ["k"], []]
    assert verdicts(104) == [["k"], ["k"], ["k"]]  # a sync before k's launch never joins k
    window = Window(0, 20_000, harness_spin_ns=400, end_marker=True, marker_host_ns=8_000)
    records = [
        DeviceActivity(KERNEL, 5, 450, CALLING, SPIN_KERNEL_NAME, 101),
        DeviceActivity(KERNEL, 451, 460, SIDE, "k", 105),
        DeviceActivity(KERNEL, 470, 471, CALLING, SPIN_KERNEL_NAME, 107),
    ]
    late = Dependencies(fork[0], (*fork[1], Synchronization(106, CONTEXT_SYNCHRONIZE, 0, 0, 0, 5_000, 9_000)))
    assert [a.name for a in attribute(records, [window], dependencies=late).unjoined] == ["k"]
    in_time = dataclasses.replace(window, marker_host_ns=9_500)
    assert attribute(records, [in_time], dependencies=late).unjoined == []


def test_a_single_stream_call_has_nothing_to_report() -> None:
    p = Program()
    p.spin()
    p.launch(CALLING, "a")
    p.stream_sync(CALLING)
    p.launch(CALLING, "b")
    p.marker()
    assert p.unjoined() == []


def test_attribute_reports_unjoined_work_beside_the_time_rule() -> None:
    # The side-stream cheat that finished before the marker: the time rule sees nothing, the dependencies do.
    window = Window(0, 1000, harness_spin_ns=400, end_marker=True)
    records = [
        DeviceActivity(KERNEL, 5, 450, CALLING, SPIN_KERNEL_NAME, 101),
        DeviceActivity(KERNEL, 451, 460, SIDE, "einsum", 103),
        DeviceActivity(KERNEL, 470, 471, CALLING, SPIN_KERNEL_NAME, 104),
    ]
    deps = Dependencies(syncs=(Synchronization(102, STREAM_SYNCHRONIZE, CALLING),))
    found = attribute(records, [window], dependencies=deps)
    assert found.unordered == []
    assert [a.name for a in found.unjoined] == ["einsum"]
    (span,) = found.spans
    assert span is not None
    assert span.duration_ns == 9  # still timed
    assert attribute(records, [window]).unjoined == []  # no dependencies: the time rule alone, as before
    joined = Dependencies(
        records=(EventRecord(102, CALLING, 1, 9), EventRecord(104 - 1, SIDE, 2, 8)),
        syncs=(Synchronization(102 + 1, STREAM_WAIT_EVENT, SIDE, 1, 9),),
    )
    # SIDE waited for the spin but the calling stream never waited for SIDE: fails (b) only
    assert [a.name for a in attribute(records, [window], dependencies=joined).unjoined] == ["einsum"]


def test_attribute_passes_an_honest_fork_join() -> None:
    window = Window(0, 1000, harness_spin_ns=400, end_marker=True)
    records = [
        DeviceActivity(KERNEL, 5, 450, CALLING, SPIN_KERNEL_NAME, 101),
        DeviceActivity(KERNEL, 451, 600, SIDE, "attention", 104),
        DeviceActivity(KERNEL, 601, 602, CALLING, SPIN_KERNEL_NAME, 107),
    ]
    deps = Dependencies(
        records=(EventRecord(102, CALLING, 1, 1), EventRecord(105, SIDE, 2, 2)),
        syncs=(
            Synchronization(103, STREAM_WAIT_EVENT, SIDE, 1, 1),
            Synchronization(106, STREAM_WAIT_EVENT, CALLING, 2, 2),
        ),
    )
    found = attribute(records, [window], dependencies=deps)
    assert found.unjoined == []
    assert found.unordered == []
    assert found.clean
    # without the spin the beginning is not checked, the end still is
    no_spin = [records[1], records[2]]
    unforked = Dependencies(records=deps.records[1:], syncs=deps.syncs[1:])
    assert attribute(records, [window], dependencies=unforked).unjoined == [records[1]]
    assert attribute(no_spin, [Window(0, 1000, end_marker=True)], dependencies=unforked).unjoined == []
    unjoined = Dependencies(records=deps.records, syncs=deps.syncs[:1])
    assert attribute(no_spin, [Window(0, 1000, end_marker=True)], dependencies=unjoined).unjoined == [records[1]]


# ---------------------------------------------------------------- the timer's own events (timerNotPatched)

START_EVENT, STOP_EVENT = 31, 32


def _timed_call(
    *extra: EventRecord, work: tuple[int, int] = (451, 600), start: int = 102, stop: int = 105
) -> tuple[list[DeviceActivity], list[EventRecord]]:
    """The harness's sequence as CuptiTimer enqueues it: spin, start record, the call's kernel, stop, marker."""
    activities = [
        DeviceActivity(KERNEL, 5, 450, CALLING, SPIN_KERNEL_NAME, 101),
        DeviceActivity(KERNEL, work[0], work[1], CALLING, "attention", 103),
        DeviceActivity(KERNEL, 601, 602, CALLING, SPIN_KERNEL_NAME, 107),
    ]
    records = [EventRecord(start, CALLING, START_EVENT, 1), EventRecord(stop, CALLING, STOP_EVENT, 2), *extra]
    return activities, records


def _tampering(activities: list[DeviceActivity], records: list[EventRecord] | None, events_ns: int | None) -> list[str]:
    window = Window(0, 1000, harness_spin_ns=400, end_marker=True)
    deps = None if records is None else Dependencies(records=tuple(records))
    return timer_tampering(attribute(activities, [window], dependencies=deps), deps, events_ns)


def test_an_untouched_timer_has_nothing_to_report() -> None:
    activities, records = _timed_call()
    assert _tampering(activities, records, 151) == []
    assert _tampering(activities, records, 149) == []  # within the events' resolution of the 149 ns span
    assert _tampering(activities, None, 151) == []  # no dependency records: the events figure still judged
    # the implementation's own events (fork-join) are not the harness's
    own = (EventRecord(104, CALLING, 77, 3), EventRecord(104, SIDE, 78, 4))
    activities, records = _timed_call(*own)
    assert _tampering(activities, records, 151) == []


def test_the_start_event_recorded_again_inside_the_call_is_named() -> None:
    activities, records = _timed_call(EventRecord(104, CALLING, START_EVENT, 5))
    (reason,) = _tampering(activities, records, 151)
    assert "recorded again 1 time(s)" in reason
    assert "re-recorded or moved" in reason
    # moved to another stream: the same event, recorded on the side
    activities, records = _timed_call(EventRecord(104, SIDE, START_EVENT, 5))
    assert any("recorded again" in r for r in _tampering(activities, records, 151))
    # the stop event recorded early inside the call, before the harness records it
    activities, records = _timed_call(EventRecord(104, CALLING, STOP_EVENT, 5), stop=106)
    assert any("recorded again" in r for r in _tampering(activities, records, 151))


def test_events_reading_less_than_the_work_they_bracket_are_named() -> None:
    # a start event swapped for one recorded after the work: no second record of the harness's, but the events
    # read less than the CUPTI span
    activities, records = _timed_call(work=(451, 50_451))
    (reason,) = _tampering(activities, records, 1_000)
    assert "read 1000 ns for 50000 ns" in reason
    assert _tampering(activities, records, 49_600) == []  # 1% below: the events' resolution
    assert _tampering(activities, records, None) == []  # unordered work: not compared


def test_cupti_switched_off_during_the_call_is_named() -> None:
    activities, records = _timed_call()
    # no end marker delivered (kernel collection switched off, or the callbacks replaced)
    reasons = _tampering(activities[:2], records, 151)
    assert any("spin or end marker" in r for r in reasons)
    # the call's own kernels hidden, the harness's delivered
    reasons = _tampering([activities[0], activities[2]], records, 151)
    assert any("no kernel, copy or memset" in r for r in reasons)
    # event records switched off: neither of the harness's records arrives
    assert any("start or stop event" in r for r in _tampering(activities, [], 151))


@settings(max_examples=300, deadline=None)
@given(
    own=st.lists(st.tuples(st.integers(0, 1), st.integers(100, 120)), max_size=6),
    again=st.lists(st.tuples(st.integers(0, 1), st.sampled_from([START_EVENT, STOP_EVENT])), max_size=3),
)
def test_any_record_of_the_harness_events_inside_the_call_is_named_and_no_other(
    own: list[tuple[int, int]], again: list[tuple[int, int]]
) -> None:
    """The implementation's own event records (fork-join, any stream, any ids but the harness's) are never named;
    any second record of the harness's start or stop event, on any stream, always is."""
    streams = (CALLING, SIDE)
    extra = [EventRecord(104, streams[s], event, 10 + i) for i, (s, event) in enumerate(own)]
    extra += [EventRecord(104, streams[s], event, 50 + i) for i, (s, event) in enumerate(again)]
    activities, records = _timed_call(*extra)
    reasons = _tampering(activities, records, 151)
    assert bool(reasons) == bool(again), reasons
    if again:
        assert f"recorded again {len(again)} time(s)" in reasons[0]


def test_unknown_synchronization_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown synchronization kind"):
        Synchronization(1, "device_wait")


# A tiny simulator that knows the truth: it builds CUDA's dependency graph operation by operation (each
# operation's predecessors as the CUDA programming guide states them) and answers by reachability, then
# checks the per-stream fixed point against it on random programs.

_STREAMS = (CALLING, SIDE, OTHER)
_OPS = st.one_of(
    st.tuples(st.just("launch"), st.sampled_from(_STREAMS)),
    st.tuples(st.just("record"), st.sampled_from(_STREAMS), st.integers(1, 2)),
    st.tuples(st.just("wait"), st.sampled_from(_STREAMS), st.integers(1, 2)),
    st.tuples(st.just("stream_sync"), st.sampled_from(_STREAMS)),
    st.tuples(
        st.just("context_sync"),
    ),
    st.tuples(st.just("event_sync"), st.integers(1, 2)),
    st.tuples(st.just("graph"), st.sampled_from(_STREAMS)),
)
_GRAPH_BRANCH = 90  # the driver's stream for a second branch of a graph
_FLAGS = st.sampled_from([BLOCKING, NON_BLOCKING, None])
_SIDE_STREAMS = _STREAMS[1:]


def _simulate(
    prelude: list[tuple[Any, ...]],
    body: list[tuple[Any, ...]],
    postlude: list[tuple[Any, ...]],
    flags: dict[int, str],
    legacy: bool,
    sync_ids: bool,
) -> tuple[Program, set[str], bool]:
    """The program's records, the truth (the names of the unjoined activities), whether the truth is exact.

    Not exact: a graph was launched on a stream the program used for nothing else, so its other branch
    cannot be placed and may be reported although ordered.
    """
    program = Program(flags=flags)
    null = {s for s, f in flags.items() if f == NULL_STREAM} | ({CALLING} if legacy else set())
    blocking = {s for s, f in flags.items() if f == BLOCKING} - null
    predecessors: list[set[int]] = []
    last_on: dict[int, int] = {}
    last_record: dict[int, int] = {}
    last_host: int | None = None
    names: dict[int, list[str]] = {}
    launched_on: dict[str, int] = {}  # activity name -> the stream of the host call that enqueued it
    used = {CALLING}
    graph_streams: set[int] = set()

    def node(stream: int | None, extra: set[int]) -> int:
        index = len(predecessors)
        before = set(extra)
        if last_host is not None:
            before.add(last_host)  # issued after the host returned from its last synchronisation
        if stream is not None:
            if stream in last_on:
                before.add(last_on[stream])
            implicit = blocking if stream in null else null if stream in blocking else set()
            before |= {last_on[s] for s in implicit if s in last_on}
            last_on[stream] = index
        predecessors.append(before)
        return index

    spin = marker = -1
    for ops in (prelude, [("spin",)], body, [("marker",)], postlude):
        for op in ops:
            kind = op[0]
            if kind in ("spin", "marker"):
                index = node(CALLING, set())
                if kind == "spin":
                    spin = index
                    program.spin()
                else:
                    marker = index
                    program.marker()
            elif kind == "launch":
                index = node(op[1], set())
                names[index] = [f"k{index}"]
                launched_on[f"k{index}"] = op[1]
                used.add(op[1])
                program.launch(op[1], f"k{index}")
            elif kind == "graph":
                index = node(op[1], set())  # one launch: one operation of its stream, whichever stream runs it
                names[index] = [f"g{index}_0", f"g{index}_1"]
                launched_on.update(dict.fromkeys(names[index], op[1]))
                graph_streams.add(op[1])
                program.launch_graph(index + 1, [op[1], _GRAPH_BRANCH], name=f"g{index}_")  # graph ids start at 1
            elif kind == "record":
                last_record[op[2]] = node(op[1], set())
                used.add(op[1])
                program.record(op[2], op[1])
            elif kind == "wait":
                consumed = {last_record[op[2]]} if op[2] in last_record else set()
                node(op[1], consumed)
                used.add(op[1])
                program.wait(op[1], op[2])
            else:
                if kind == "stream_sync":
                    waited = {last_on[op[1]]} if op[1] in last_on else set()
                    used.add(op[1])
                    program.stream_sync(op[1])
                elif kind == "context_sync":
                    waited = set(last_on.values())
                    program.context_sync()
                else:
                    waited = {last_record[op[1]]} if op[1] in last_record else set()
                    record = program.latest.get(op[1])
                    sync_id = record.sync_id if record else 0
                    program.syncs.append(Synchronization(program._next(), EVENT_SYNCHRONIZE, 0, op[1], sync_id))
                last_host = node(None, waited)
    if not sync_ids:
        program.records = [EventRecord(r.correlation, r.stream, r.event) for r in program.records]
        program.syncs = [Synchronization(s.correlation, s.kind, s.stream, s.event) for s in program.syncs]

    def reach(start: int, edges: dict[int, set[int]]) -> set[int]:
        seen, todo = {start}, [start]
        while todo:
            for nxt in edges.get(todo.pop(), set()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    forward: dict[int, set[int]] = {}
    for index, before in enumerate(predecessors):
        for p in before:
            forward.setdefault(p, set()).add(index)
    backward = dict(enumerate(predecessors))
    after_spin, before_marker = reach(spin, forward), reach(marker, backward)
    truth = {
        name
        for index, group in names.items()
        for name in group
        if launched_on[name] != CALLING and not (index in after_spin and index in before_marker)
    }
    return program, truth, graph_streams <= used


@settings(max_examples=1500, deadline=None)
@given(
    prelude=st.lists(_OPS, max_size=4),
    body=st.lists(_OPS, max_size=14),
    postlude=st.lists(_OPS, max_size=3),
    side_flags=st.tuples(_FLAGS, _FLAGS),
    legacy=st.booleans(),
    null_other=st.booleans(),
    sync_ids=st.booleans(),
)
def test_fixed_point_agrees_with_the_dependency_graph(
    prelude: list[tuple[Any, ...]],
    body: list[tuple[Any, ...]],
    postlude: list[tuple[Any, ...]],
    side_flags: tuple[str | None, ...],
    legacy: bool,
    null_other: bool,
    sync_ids: bool,
) -> None:
    flags = {s: f for s, f in zip(_SIDE_STREAMS, side_flags, strict=True) if f is not None}
    if null_other and not legacy:
        flags[OTHER] = NULL_STREAM  # the implementation uses the NULL stream; the calling stream is one of its own
    program, truth, exact = _simulate(prelude, body, postlude, flags, legacy, sync_ids)
    reported = set(program.unjoined(legacy=legacy))
    assert truth <= reported  # never passes unordered work
    if exact:
        assert reported == truth


# --------------------------------------------------------------------------- the collector's record conversion
# No GPU here: a stand-in for ``cupti.cupti`` with the enum names of cupti-python 13.0 (values made up) delivers
# records the way CUPTI's buffer callback does.


class _Kind(enum.IntEnum):
    MEMCPY = 1
    MEMSET = 2
    KERNEL = 3
    STREAM = 26
    SYNCHRONIZATION = 38
    CUDA_EVENT = 39
    CONCURRENT_KERNEL = 10


class _SyncType(enum.IntEnum):
    UNKNOWN = 0
    EVENT_SYNCHRONIZE = 1
    STREAM_WAIT_EVENT = 2
    STREAM_SYNCHRONIZE = 3
    CONTEXT_SYNCHRONIZE = 4


class _Flag(enum.IntEnum):
    FLAG_UNKNOWN = 0
    FLAG_DEFAULT = 1
    FLAG_NON_BLOCKING = 2
    FLAG_NULL = 3
    MASK = 0xFFFF


class _Cupti:
    ActivityKind = _Kind
    ActivitySynchronizationType = _SyncType
    ActivityStreamFlag = _Flag

    def __init__(self, refuse: tuple[_Kind, ...] = ()) -> None:
        self.refuse = refuse
        self.enabled: set[int] = set()
        self.queued: list[SimpleNamespace] = []
        self.completed: Any = None

    def activity_enable(self, kind: _Kind) -> None:
        if kind in self.refuse:
            raise RuntimeError("CUPTI_ERROR_NOT_SUPPORTED")
        self.enabled.add(kind)

    def activity_disable(self, kind: _Kind) -> None:
        self.enabled.discard(kind)

    def activity_register_callbacks(self, requested: Any, completed: Any) -> None:
        assert requested() == (BUFFER_BYTES, 0)
        self.completed = completed

    def activity_flush_all(self, flag: int) -> None:
        queued = [r for r in self.queued if r.kind in self.enabled]
        self.queued = []
        self.completed(queued)

    def get_timestamp(self) -> int:
        return 123


def _records() -> list[SimpleNamespace]:
    return [
        SimpleNamespace(kind=_Kind.STREAM, stream_id=13, flag=_Flag.FLAG_NON_BLOCKING, correlation_id=0),
        SimpleNamespace(kind=_Kind.STREAM, stream_id=14, flag=_Flag.FLAG_DEFAULT, correlation_id=0),
        SimpleNamespace(kind=_Kind.CONCURRENT_KERNEL, start=5, end=9, stream_id=7, name="k", correlation_id=101),
        SimpleNamespace(kind=_Kind.MEMCPY, start=10, end=12, stream_id=13, correlation_id=102, graph_id=3),
        SimpleNamespace(kind=_Kind.MEMSET, start=13, end=14, stream_id=13, correlation_id=103),
        SimpleNamespace(kind=_Kind.CUDA_EVENT, stream_id=7, event_id=4, cuda_event_sync_id=77, correlation_id=104),
        SimpleNamespace(
            kind=_Kind.SYNCHRONIZATION,
            type=_SyncType.STREAM_WAIT_EVENT,
            stream_id=13,
            cuda_event_id=4,
            cuda_event_sync_id=77,
            correlation_id=105,
            start=20,
            end=21,
        ),
        SimpleNamespace(
            kind=_Kind.SYNCHRONIZATION,
            type=_SyncType.UNKNOWN,
            stream_id=0,
            cuda_event_id=0,
            cuda_event_sync_id=0,
            correlation_id=106,
            start=22,
            end=23,
        ),
    ]


def test_collector_converts_dependency_records_and_keeps_stream_flags() -> None:
    fake = _Cupti()
    collector = CuptiCollector(fake)
    collector.start()
    assert collector.dependencies_available
    assert collector.dependencies_error is None
    fake.queued = _records()
    activities, deps = collector.drain_all()
    assert [(a.kind, a.stream, a.correlation, a.graph) for a in activities] == [
        (KERNEL, 7, 101, 0),
        (MEMCPY, 13, 102, 3),
        (MEMSET, 13, 103, 0),
    ]
    assert deps is not None
    assert deps.records == (EventRecord(104, 7, 4, 77),)
    assert deps.syncs == (Synchronization(105, STREAM_WAIT_EVENT, 13, 4, 77, 20, 21),)  # the UNKNOWN one is dropped
    assert dict(deps.stream_flags) == {13: NON_BLOCKING, 14: BLOCKING}
    fake.queued = [
        SimpleNamespace(kind=_Kind.CONCURRENT_KERNEL, start=1, end=2, stream_id=13, name="k", correlation_id=200)
    ]
    assert [a.correlation for a in collector.drain()] == [200]
    _, later = collector.drain_all()
    assert later is not None
    assert (later.records, later.syncs) == ((), ())
    assert dict(later.stream_flags) == {13: NON_BLOCKING, 14: BLOCKING}  # streams are created once
    collector.stop()
    assert fake.enabled == set()


def test_collector_without_the_dependency_kinds_collects_none_of_them() -> None:
    fake = _Cupti(refuse=(_Kind.SYNCHRONIZATION,))
    collector = CuptiCollector(fake)
    collector.start()
    assert not collector.dependencies_available
    assert "CUPTI_ERROR_NOT_SUPPORTED" in (collector.dependencies_error or "")
    assert fake.enabled == {_Kind.CONCURRENT_KERNEL, _Kind.MEMCPY, _Kind.MEMSET}  # CUDA_EVENT turned off again
    fake.queued = _records()
    activities, deps = collector.drain_all()
    assert deps is None
    assert len(activities) == 3
    collector.stop()
    assert fake.enabled == set()


def test_collector_refusing_kernels_is_an_environment_error() -> None:
    collector = CuptiCollector(_Cupti(refuse=(_Kind.CONCURRENT_KERNEL,)))
    with pytest.raises(EnvError, match="CUPTI could not attach"):
        collector.start()


# --------------------------------------------------------------- calls settled in batches (one flush for many)

_BODIES = ("one", "joined", "unjoined", "none", "late", "restart", "gapped")


def _harnessed_call(index: int, body: str) -> tuple[list[DeviceActivity], list[EventRecord], list[Synchronization]]:
    """One timed call as CuptiTimer runs it, at time ``index * 10_000`` and correlations from ``index * 100``:
    the L2 flush in the harness window, then spin, start record, the body, stop record, end marker."""
    t, c = index * 10_000, index * 100
    activities = [
        DeviceActivity(MEMSET, t + 100, t + 200, CALLING, "", c + 1),
        DeviceActivity(KERNEL, t + 1100, t + 3000, CALLING, SPIN_KERNEL_NAME, c + 3),
    ]
    records = [EventRecord(c + 4, CALLING, START_EVENT, c + 4)]
    syncs = [Synchronization(c + 2, CONTEXT_SYNCHRONIZE, 0, 0, 0, t + 210, t + 220)]
    marker_start = t + 3700
    if body in ("one", "late", "restart"):
        activities.append(DeviceActivity(KERNEL, t + 3010, t + 3500, CALLING, "attention", c + 10))
    if body == "joined":  # side.wait_stream(current), work on the side, current.wait_stream(side)
        records.append(EventRecord(c + 10, CALLING, 5, c + 10))
        syncs.append(Synchronization(c + 11, STREAM_WAIT_EVENT, SIDE, 5, c + 10))
        activities.append(DeviceActivity(KERNEL, t + 3010, t + 3600, SIDE, "attention", c + 12))
        records.append(EventRecord(c + 13, SIDE, 6, c + 13))
        syncs.append(Synchronization(c + 14, STREAM_WAIT_EVENT, CALLING, 6, c + 13))
    if body == "unjoined":  # work left running on a side stream past the end marker
        activities.append(DeviceActivity(KERNEL, t + 3010, t + 8000, SIDE, "attention", c + 12))
    if body == "late":  # work that runs on past the window's end
        activities.append(DeviceActivity(KERNEL, t + 8900, t + 9500, OTHER, "late", c + 39))
    if body == "gapped":  # two dependent kernels, 300 ns apart (the gap a launch leaves between them)
        activities.append(DeviceActivity(KERNEL, t + 3010, t + 3100, CALLING, "fill", c + 10))
        activities.append(DeviceActivity(KERNEL, t + 3400, t + 3500, CALLING, "attention", c + 11))
    if body == "restart":  # the harness's start event recorded again inside the call
        records.append(EventRecord(c + 20, CALLING, START_EVENT, c + 20))
    records.append(EventRecord(c + 40, CALLING, STOP_EVENT, c + 40))
    activities.append(DeviceActivity(KERNEL, marker_start, marker_start + 2, CALLING, SPIN_KERNEL_NAME, c + 41))
    syncs.append(Synchronization(c + 42, CONTEXT_SYNCHRONIZE, 0, 0, 0, t + 8500, t + 8600))
    return activities, records, syncs


def _harnessed_window(index: int) -> tuple[Window, int, int]:
    t = index * 10_000
    own = (index - 1) * 10_000 + 9_000 if index else 0
    return Window(t + 1000, t + 9000, 2000, end_marker=True, marker_host_ns=t + 3650), own, 700


@settings(max_examples=200, deadline=None)
@given(bodies=st.lists(st.sampled_from(_BODIES), min_size=1, max_size=8))
def test_calls_settled_together_read_as_if_each_had_been_flushed_alone(bodies: list[str]) -> None:
    """One flush for many calls (the CUPTI timer's batches) gives each call the figure and the findings that a
    flush after that call alone gives: the sample, the kernel count, work outside the windows, unordered
    side-stream work and a re-recorded start event all stay with their own call."""
    from kictl.bench.worker.cupti_attribution import settle_calls

    calls = [_harnessed_call(i, body) for i, body in enumerate(bodies)]
    windows = [_harnessed_window(i) for i in range(len(bodies))]
    alone = [
        settle_calls(activities, [window], Dependencies(tuple(records), tuple(syncs)), True)[0]
        for (activities, records, syncs), window in zip(calls, windows, strict=True)
    ]
    everything = Dependencies(
        tuple(r for _, records, _ in calls for r in records), tuple(s for _, _, syncs in calls for s in syncs)
    )
    together = settle_calls([a for activities, _, _ in calls for a in activities], windows, everything, True)
    assert together == alone
    for body, figure in zip(bodies, together, strict=True):
        assert (figure.unordered > 0) == (body in ("unjoined", "late")), (body, figure)
        assert (figure.outside > 0) == (body == "late"), (body, figure)
        assert any("recorded again" in r for r in figure.tampered) == (body == "restart"), (body, figure)
        assert any("no kernel" in r for r in figure.tampered) == (body == "none"), (body, figure)
        if body in ("one", "restart"):
            assert (figure.ns, figure.kernels) == (490, 1)
        if body == "late":  # the work past the window's end is timed too, and flagged
            assert (figure.ns, figure.kernels) == (6490, 2)


def test_a_calls_figure_is_its_span_and_its_busy_time_leaves_the_gaps_out() -> None:
    """The sample is the span from the first kernel's start to the last one's end, the gap between them
    included (the caller waits for it); ``busy_ns`` is the time the kernels cover, what a profiler's sum of
    kernel durations adds up; a call without device work has no busy time."""
    from kictl.bench.worker.cupti_attribution import settle_calls

    calls = [_harnessed_call(0, "gapped"), _harnessed_call(1, "one"), _harnessed_call(2, "none")]
    activities = [a for found, _, _ in calls for a in found]
    deps = Dependencies(
        tuple(r for _, records, _ in calls for r in records), tuple(s for _, _, syncs in calls for s in syncs)
    )
    gapped, one, none = settle_calls(activities, [_harnessed_window(i) for i in range(3)], deps, True)
    assert (gapped.ns, gapped.busy_ns, gapped.kernels) == (490, 190, 2)
    assert (one.ns, one.busy_ns, one.kernels) == (490, 490, 1)
    assert (none.busy_ns, none.kernels) == (None, 0)


def test_work_between_settled_calls_is_the_next_harness_windows_and_after_the_last_escapes() -> None:
    """Settled together, an activity goes where a flush right at each window's end would put it: one that
    starts after a call's window is the next call's harness work (left out, as the harness's staging is);
    one that starts after the last window escaped every window (noWorkOutsideCalls)."""
    from kictl.bench.worker.cupti_attribution import settle_calls

    calls = [_harnessed_call(i, "one") for i in range(2)]
    between = DeviceActivity(KERNEL, 9_500, 9_600, OTHER, "between", 60)
    after = DeviceActivity(KERNEL, 19_500, 19_600, OTHER, "after", 160)
    activities = [a for found, _, _ in calls for a in found] + [between, after]
    deps = Dependencies(
        tuple(r for _, records, _ in calls for r in records), tuple(s for _, _, syncs in calls for s in syncs)
    )
    first, second = settle_calls(activities, [_harnessed_window(0), _harnessed_window(1)], deps, True)
    assert (first.outside, second.outside) == (0, 1)
    assert first.ns == second.ns == 490


# ------------------------------------------------ CUPTI's buffers read at the offsets cupti-python's dtypes give


def _layout_dtypes() -> dict[str, Any]:
    """Record layouts as cupti-python declares them (numpy dtypes with offsets; the kernel's name a pointer)."""
    import numpy as np

    def dtype(fields: list[tuple[str, str, int]], size: int) -> Any:
        names, formats, offsets = zip(*fields, strict=True)
        return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": size})

    work = [("kind", "<u4", 0), ("start", "<u8", 8), ("end", "<u8", 16), ("correlation_id", "<u4", 24)]
    work += [("stream_id", "<u4", 28), ("graph_id", "<u4", 32)]
    event = [("kind", "<u4", 0), ("correlation_id", "<u4", 4), ("stream_id", "<u4", 8), ("event_id", "<u4", 12)]
    event.append(("cuda_event_sync_id", "<u8", 16))
    sync = [("kind", "<u4", 0), ("type", "<u4", 4), ("start", "<u8", 8), ("end", "<u8", 16)]
    sync += [("correlation_id", "<u4", 24), ("stream_id", "<u4", 28), ("cuda_event_id", "<u4", 32)]
    sync.append(("cuda_event_sync_id", "<u8", 40))
    return {
        "activity_kernel9_dtype": dtype([("kind", "<u4", 0), ("start", "<u4", 4)], 8),  # an older version: not used
        "activity_kernel10_dtype": dtype([*work, ("name", "<u8", 40)], 64),
        "activity_memcpy6_dtype": dtype(work, 48),
        "activity_memcpy_pto_p4_dtype": dtype(work, 48),  # peer copies: not a kind kictl reads
        "activity_memset4_dtype": dtype(work, 40),
        "activity_cuda_event2_dtype": dtype(event, 24),
        "activity_synchronization2_dtype": dtype(sync, 48),
        "activity_stream_dtype": dtype([("kind", "<u4", 0), ("stream_id", "<u4", 4), ("flag", "<u4", 8)], 16),
    }


class _RawCupti(_Cupti):
    """The fake cupti module with the numpy dtypes of cupti-python 13."""

    def __init__(self, drop: str | None = None) -> None:
        super().__init__()
        for name, dtype in _layout_dtypes().items():
            if drop is not None and name == "activity_stream_dtype":
                import numpy as np

                kept: Any = {n: dtype.fields[n] for n in dtype.names if n != drop}
                dtype = np.dtype(kept)
            setattr(self, name, dtype)


def _write(records: list[SimpleNamespace], cupti: _RawCupti, keep: list[Any]) -> list[int]:
    """Each record into memory of its own, laid out as CUPTI writes it; their addresses."""
    import ctypes

    import numpy as np

    layouts = {
        int(_Kind.CONCURRENT_KERNEL): "activity_kernel10_dtype",
        int(_Kind.MEMCPY): "activity_memcpy6_dtype",
        int(_Kind.MEMSET): "activity_memset4_dtype",
        int(_Kind.CUDA_EVENT): "activity_cuda_event2_dtype",
        int(_Kind.SYNCHRONIZATION): "activity_synchronization2_dtype",
        int(_Kind.STREAM): "activity_stream_dtype",
    }
    addresses = []
    for record in records:
        dtype = getattr(cupti, layouts[int(record.kind)])
        row = np.zeros(1, dtype)
        for name in dtype.names:
            value = getattr(record, name, 0)
            if name == "name":
                text = ctypes.create_string_buffer(str(value).encode())
                keep.append(text)
                value = ctypes.addressof(text)
            row[name] = int(value)
        memory = ctypes.create_string_buffer(row.tobytes(), dtype.itemsize)
        keep.append(memory)
        addresses.append(ctypes.addressof(memory))
    return addresses


def test_records_read_at_their_offsets_are_what_cupti_python_reads() -> None:
    """kictl's direct reader (``RecordReader``) turns CUPTI's records into the same activities, event records,
    synchronisations and stream flags as cupti-python's objects do, each field cross-checked."""
    from kictl.bench.worker.cupti_records import CROSS_CHECKED_RECORDS, RecordReader, record_layouts

    fake = _RawCupti()
    layouts, missing = record_layouts(fake)
    assert missing is None
    assert layouts[int(_Kind.CONCURRENT_KERNEL)].size == 64  # version 10, not 9
    assert "name" in layouts[int(_Kind.CONCURRENT_KERNEL)].names
    reader = RecordReader(layouts)
    keep: list[Any] = []
    read = [reader.read(address) for address in _write(_records(), fake, keep)]
    assert reader.mismatch is None
    assert sum(reader.checked.values()) == len(read) <= CROSS_CHECKED_RECORDS * len(layouts)
    collector = CuptiCollector(fake)
    collector.start()
    collector._completed(read)
    activities, deps = collector.drain_all()
    assert [(a.kind, a.start_ns, a.end_ns, a.stream, a.name, a.correlation, a.graph) for a in activities] == [
        (KERNEL, 5, 9, 7, "k", 101, 0),
        (MEMCPY, 10, 12, 13, "", 102, 3),
        (MEMSET, 13, 14, 13, "", 103, 0),
    ]
    assert deps is not None
    assert deps.records == (EventRecord(104, 7, 4, 77),)
    assert deps.syncs == (Synchronization(105, STREAM_WAIT_EVENT, 13, 4, 77, 20, 21),)
    assert dict(deps.stream_flags) == {13: NON_BLOCKING, 14: BLOCKING}
    import ctypes

    unknown = ctypes.c_uint64(99)  # a kind kictl does not read (its first four bytes name the kind)
    assert reader.read(ctypes.addressof(unknown)) is None


def test_a_layout_that_reads_otherwise_than_numpy_hands_over_to_numpy() -> None:
    """One field read differently from numpy's reading of cupti-python's dtype (the cross-check) and that record
    and every later one are numpy's reading."""
    import dataclasses

    from kictl.bench.worker.cupti_records import RecordReader, record_layouts

    fake = _RawCupti()
    layouts, _ = record_layouts(fake)
    kernel = layouts[int(_Kind.CONCURRENT_KERNEL)]
    # a layout one byte off for the first field (start): what a wrong offset would read
    layouts[int(_Kind.CONCURRENT_KERNEL)] = dataclasses.replace(kernel, format=kernel.format.replace("8x", "9x", 1))
    reader = RecordReader(layouts)
    keep: list[Any] = []
    record = SimpleNamespace(kind=_Kind.CONCURRENT_KERNEL, start=5, end=9, stream_id=7, name="k", correlation_id=1)
    first, second = (reader.read(address) for address in _write([record, record], fake, keep))
    mismatch = reader.mismatch or ""
    assert mismatch.startswith("kernel record field start: read ")
    assert mismatch.endswith(", numpy reads 5")  # and no pointer of the misread record was followed
    assert (first.start, second.start, second.name, second.kind) == (5, 5, "k", int(_Kind.CONCURRENT_KERNEL))


def test_a_layout_without_a_required_field_is_not_read_directly() -> None:
    from kictl.bench.worker.cupti_records import record_layouts

    layouts, missing = record_layouts(_RawCupti(drop="flag"))
    assert "STREAM (activity_stream_dtype)" in (missing or "")
    assert int(_Kind.STREAM) not in layouts
    assert int(_Kind.CONCURRENT_KERNEL) in layouts


def test_at_the_end_of_a_run_what_ran_after_the_last_window_is_the_harnesss() -> None:
    """Settled at the end of a run (after the last call's audit copied its outputs), the audit's copy is the
    harness's work, not the last call's: no noWorkOutsideCalls for an honest run (device call AH)."""
    from kictl.bench.worker.cupti_attribution import settle_calls

    activities, records, syncs = _harnessed_call(0, "one")
    audit = DeviceActivity(MEMCPY, 9_500, 9_600, CALLING, "", 60)
    deps = Dependencies(tuple(records), tuple(syncs))
    (right_after,) = settle_calls([*activities, audit], [_harnessed_window(0)], deps, True)
    (at_the_end,) = settle_calls([*activities, audit], [_harnessed_window(0)], deps, True, harness_after=True)
    assert (right_after.outside, at_the_end.outside) == (1, 0)
    assert right_after.ns == at_the_end.ns == 490


class _FakeLibcupti:
    """libcupti's buffer walk over records written at known addresses (``_write``), as ctypes would call it."""

    def __init__(self, addresses: list[int], end_status: int = 12, dropped: int = 0) -> None:
        self.addresses = addresses
        self.end_status = end_status
        self.dropped = dropped

        def next_record(buffer: int, valid: int, record: Any) -> int:
            current = record._obj.value  # byref's target: NULL to start, else the record returned last
            index = 0 if current is None else self.addresses.index(current) + 1
            if index >= len(self.addresses):
                return self.end_status
            record._obj.value = self.addresses[index]
            return 0

        def dropped_records(context: Any, stream: int, count: Any) -> int:
            count._obj.value = self.dropped
            return 0

        self.cuptiActivityGetNextRecord: Any = next_record
        self.cuptiActivityGetNumDroppedRecords: Any = dropped_records


def _walk(lib: _FakeLibcupti, fake: _RawCupti, delivered: list[Any]) -> Any:
    """A DirectRecords over ``lib``: one buffer requested, then completed with the records ``lib`` walks."""
    import ctypes

    from kictl.bench.worker.cupti_records import DirectRecords, record_layouts

    layouts, _ = record_layouts(fake)
    direct = DirectRecords(fake, layouts, delivered.extend, lib=lib)
    buffer, size, count = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
    direct._requested(ctypes.pointer(buffer), ctypes.pointer(size), ctypes.pointer(count))
    assert (size.value, len(direct.buffers)) == (direct.buffer_bytes, 1)
    direct._completed(None, 0, buffer.value, size.value, 64)
    assert direct.buffers == {}  # released, whatever happened
    return direct


def test_kictls_buffer_walk_delivers_every_record_and_refuses_lost_ones() -> None:
    """The buffer walk hands every record to the collector; a walk that stops short of the buffer's end, or
    records CUPTI dropped, leave the reader in error, and the collector then refuses to drain (EnvError):
    no figure is made from records of which some are missing."""
    fake = _RawCupti()
    keep: list[Any] = []
    addresses = _write(_records(), fake, keep)
    delivered: list[Any] = []
    direct = _walk(_FakeLibcupti(addresses), fake, delivered)
    assert direct.error is None
    assert [int(r.kind) for r in delivered] == [int(r.kind) for r in _records()]
    assert delivered[2].name == "k"

    cut: list[Any] = []
    direct = _walk(_FakeLibcupti(addresses, end_status=21), fake, cut)  # CUPTI_ERROR_INVALID_KIND mid-buffer
    assert "could not be read to its end (status 21)" in (direct.error or "")
    collector = CuptiCollector(fake)
    collector.start()
    collector.direct = direct
    with pytest.raises(EnvError, match="CUPTI's records could not be read"):
        collector.drain_all()

    direct = _walk(_FakeLibcupti(addresses, dropped=3), fake, [])
    assert direct.error == "CUPTI dropped 3 record(s)"

    def broken(records: list[Any]) -> None:
        raise RuntimeError("the collector failed")

    direct = _walk(_FakeLibcupti(addresses), fake, [])
    direct.deliver = broken
    direct._completed(None, 0, None, 0, 0)
    assert direct.error == "RuntimeError: the collector failed"
