"""The timers' table: one row per timer, read by kictl's parent; the worker's class of the same name measures.

Adding a timer is one class in ``kictl.bench.worker.timing`` (a subclass of ``Timer`` with its ``name``) and one
row here.  The row says when a session uses it (the device kind, the ``--timer`` values that ask for it, with or
without ``--time-setup``, whether the worker must have CUPTI attached), what the protocol records (its timer
name, comparability family and the sentence of what lay between the timer's start and stop).
``choices`` reads the rows in order: the first whose worker can serve it is the session's timer
(``judge.session``), and the protocol is written from the row (``judge.results.protocol_spec``).
"""

from __future__ import annotations

from dataclasses import dataclass

#: ``--timer`` values (``auto``: the first row that fits; ``--cuda-graph`` is ``--timer graph``).
OPTIONS = ("auto", "cupti", "events", "graph")


@dataclass(frozen=True, slots=True)
class TimerRow:
    """One timer: when a session uses it and what the protocol records of it."""

    #: the worker's timer class's ``name``
    name: str
    #: ``cpu`` or ``cuda``
    device: str
    #: the ``--timer`` values it serves
    asked_by: tuple[str, ...]
    #: what the protocol's ``measurement.timer`` says
    recorded: str
    family: str
    region: str
    #: ``True``: only with ``--time-setup``; ``False``: only without; ``None``: either
    time_setup: bool | None = False
    #: the family with ``--time-setup`` (where the row serves both)
    setup_family: str | None = None
    #: the worker must report CUPTI attached (``wire.Ready.timers``)
    needs_cupti: bool = False


TIMERS: tuple[TimerRow, ...] = (
    TimerRow(
        name="perf_counter_ns",
        device="cpu",
        asked_by=("auto",),
        recorded="perf_counter_ns",
        family="kictl-cpu-wall-time",
        setup_family="kictl-cpu-setup-and-run",
        time_setup=None,
        region=(
            "kictl's parent's time.perf_counter_ns around each timed-call request to the worker (one call of run() "
            "each), less the wire's fastest round trip measured before the import; the inputs staged by the parent "
            "in memory shared with the worker before each request; the worker's own perf_counter_ns sample around "
            "the call kept as a cross-check against the parent's wall time and the sandbox's CPU time"
        ),
    ),
    TimerRow(
        name="cuda_events_host_inclusive",
        device="cuda",
        asked_by=("auto", "events"),
        recorded="cuda_events",
        family="kictl-cuda-setup-and-run",
        time_setup=True,
        region=(
            "CUDA events on the calling stream around setup() and run(), after an L2 flush and a device "
            "synchronisation: the host's time in setup() (e.g. a FlashInfer plan()) and the launch path count"
        ),
    ),
    TimerRow(
        name="cuda_graph_replay",
        device="cuda",
        asked_by=("graph",),
        recorded="cuda_graph_replay",
        family="kictl-cuda-device-time",
        region=(
            "CUDA events around one replay of a CUDA graph captured from one call of run(), after an L2 flush "
            "and a device spin"
        ),
    ),
    TimerRow(
        name="cupti_device_time",
        device="cuda",
        asked_by=("auto", "cupti"),
        recorded="cupti_device_time",
        family="kictl-cupti-device-time",
        needs_cupti=True,
        region=(
            "CUPTI activity records of every kernel, copy and memset the call of run() caused, on any stream: "
            "from the first one's start to the last one's end, the device synchronised before the window "
            "closes; the persisting L2 reset and the L2 flushed before, then a device spin so the call is "
            "enqueued before the GPU reaches it; CUDA events around the same call kept as the cross-check"
        ),
    ),
    TimerRow(
        name="cuda_events",
        device="cuda",
        asked_by=("auto", "events"),
        recorded="cuda_events",
        family="kictl-cuda-device-time",
        region=(
            "CUDA events on the calling stream around each call of run(); a device spin and an L2 flush before "
            "the start event keep the GPU busy so the call is enqueued before the GPU reaches it: device time, "
            "not the host's launch path, unless the call waits for the GPU"
        ),
    ),
)
BY_NAME: dict[str, TimerRow] = {row.name: row for row in TIMERS}


def choices(device: str, timer: str, cuda_graph: bool, time_setup: bool) -> tuple[TimerRow, ...]:
    """The rows a session may use, in order of preference: the first its worker can serve is its timer.

    ``device`` is ``cpu`` or a CUDA device; ``timer`` a ``--timer`` value (``OPTIONS``).  Empty when nothing
    serves that combination (``judge.options.check_options`` refuses those first, with a reason).
    """
    kind = "cpu" if device == "cpu" else "cuda"
    asked = "graph" if cuda_graph and timer == "auto" else timer
    return tuple(
        row
        for row in TIMERS
        if row.device == kind and asked in row.asked_by and (row.time_setup is None or row.time_setup == time_setup)
    )
