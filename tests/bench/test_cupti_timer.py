"""CUPTI records to per-call samples: attribution rules, on hand-made activity records."""

from __future__ import annotations

import pytest

from kictl.bench.cupti_timer import (
    KERNEL,
    MEMCPY,
    MEMSET,
    SPIN_KERNEL_NAME,
    CuptiCollector,
    DeviceActivity,
    Window,
    attribute,
)
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
