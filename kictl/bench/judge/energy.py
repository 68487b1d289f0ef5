"""Energy per call from NVML's total-energy counter: the method's arithmetic (DESIGN §14, issue 31).

NVML's ``nvmlDeviceGetTotalEnergyConsumption`` gives the board's energy since
the driver loaded, in millijoules, on Volta and later.  It does not move
continuously: on the H200 it steps once every ~100 ms (97–103 ms,
MEASURED.md), so one reading is as old as the last step and a single call of
a 10 µs kernel (millijoules at most) is invisible to it.  The method is
therefore:

1. **Idle first.**  With the worker holding still and nothing of the harness
   on the device, the parent polls the counter for ``IDLE_S``; the board's
   idle draw is the energy between the first and the last *step* seen over
   the time between them (``power_between``).
2. **A long back-to-back loop.**  The harness's own loop (``wire.Loop``: the
   worker calls ``run()`` ``count`` times with no synchronisation between
   calls, warm caches) runs for ``LOOP_S`` while the parent polls the
   counter.  The first ``SETTLE_S`` are left out (the board's power ramps up);
   the board's power in the loop is the energy between the first step after
   that and the last step before the loop ended, over the time between them.
   A step's time is known to half the polling gap (``Step.lag_ns``); the
   window spans many update periods, so that and the counter's unit (1 mJ)
   are small against it, and both are reported (``Window.uncertainty``).  A
   loop or idle window known to worse than ``MAX_WINDOW_UNCERTAINTY`` (the
   poller was held off the CPU) is measured again, and fails the run
   (``runtime_error``, never a check's verdict) if it stays so.
3. **Per call.**  The loop's time per call is the parent's own wall time of
   the loop request over the calls made (the loop ends with a device
   synchronisation); joules per call is the board's power in the loop less
   the idle draw, times that time.  The board's figure (idle included) is
   kept beside it.
4. **Trials.**  ``TRIALS`` loops, each with its own window; the figure is
   their median and the spread ``(max − min) / median`` is stated.

The counter is an unsigned 64-bit integer: a reading below the last one is a
wrap only when the difference modulo the counter's width is an energy the
board could have drawn in the time between (``unwrap``); anything else
(a driver reload resets it) fails the trial.  A GPU without the counter is
refused (``EnergyCounter`` raises ``EnvError``, exit 5): no energy figure is
ever estimated from power samples.

Everything here is arithmetic on ``Poll`` traces, so the tests run it on
recorded NVML traces; ``EnergyCounter`` is the one part that reads NVML.
"""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kictl.bench.worker.gpu_state import open_nvml
from kictl.errors import EnvError, KictlError

#: The NVML function the figure comes from (recorded in the protocol).
COUNTER = "nvmlDeviceGetTotalEnergyConsumption"
#: NVML returns the counter as an ``unsigned long long``.
COUNTER_MODULUS = 1 << 64
#: How long the parent watches the idle board before the loops (s).
IDLE_S = 1.2
#: How long each back-to-back loop lasts (s), and how much of its start is left out (the power ramps up).
LOOP_S = 1.5
SETTLE_S = 0.3
TRIALS = 3
#: The parent's polling interval (s): a step's time is known to half of it.
POLL_S = 0.0005
#: A window must span at least this many counter steps (so at least this many update periods, less one).
MIN_STEPS = 4
#: A loop or idle window whose steps' timing is known to worse than this share of its length (``Window.uncertainty``)
#: measures nothing: the parent's poller was held off the CPU (a loaded host), so the window's watts may be off by
#: that much.  Below the ceiling's slack (``families.energy.CEILING_SLACK``, 5%), so that a board held at its power
#: limit still passes the ceiling; above the 0.5-1.5% (loop and idle windows together) of the 31 H200 and H100
#: energy runs in the bundled registry.  Such a window is measured again (``energy_loop.EnergyPhase``).
MAX_WINDOW_UNCERTAINTY = 0.04
#: A counter increment above this power over the time since the last poll is not energy the board drew
#: (a reset or a corrupt reading): the H200's power limit is 700 W, no board of today draws 2 kW.
MAX_PLAUSIBLE_WATTS = 2000.0
#: A step holds a whole update period's energy (~0.1 s on the H200) and may come up to a period late:
#: an increment may be as large as the time since the counter last moved plus this, at that power.
STEP_SLACK_S = 0.25


class EnergyError(KictlError):
    """A counter trace the method cannot use (a reset, too few steps, a loop too short)."""


@dataclass(frozen=True)
class Poll:
    """One reading of the counter: the parent's ``perf_counter_ns`` and the counter in millijoules."""

    t_ns: int
    mj: int


@dataclass(frozen=True)
class Step:
    """The counter moved: its new (unwrapped) value, when (the middle of the polling gap), and ± how long."""

    t_ns: int
    lag_ns: int
    mj: int


@dataclass(frozen=True)
class Window:
    """The energy between two steps and the time between them."""

    first: Step
    last: Step
    steps: int

    @property
    def joules(self) -> float:
        return (self.last.mj - self.first.mj) / 1000.0

    @property
    def seconds(self) -> float:
        return (self.last.t_ns - self.first.t_ns) / 1e9

    @property
    def watts(self) -> float:
        return self.joules / self.seconds

    @property
    def uncertainty(self) -> float:
        """Relative: the steps' timing (half a polling gap at each end) and the counter's unit (1 mJ each end)."""
        timing = (self.first.lag_ns + self.last.lag_ns) / max(1, self.last.t_ns - self.first.t_ns)
        unit = 2.0 / max(1, self.last.mj - self.first.mj)
        return timing + unit


def unwrap(polls: Sequence[Poll], modulus: int = COUNTER_MODULUS) -> list[Poll]:
    """The readings with the counter's wraps undone.

    The counter moves in steps of a whole update period's energy, so an increment is judged against the
    time since the counter last moved (plus ``STEP_SLACK_S``), not since the last reading.  Raises
    ``EnergyError`` when it went back or jumped by more than the board could draw in that time (a driver
    reload resets it): such a trace measures nothing.
    """
    out: list[Poll] = []
    offset = 0
    moved_ns = polls[0].t_ns if polls else 0
    for poll in polls:
        if not 0 <= poll.mj < modulus:
            raise EnergyError(f"an energy reading of {poll.mj} mJ is outside the counter's range")
        value = poll.mj + offset
        if out:
            previous = out[-1]
            dt_s = max(0, poll.t_ns - moved_ns) / 1e9 + STEP_SLACK_S
            allowed = MAX_PLAUSIBLE_WATTS * dt_s * 1000
            if value < previous.mj:
                gained = value + modulus - previous.mj
                if gained > allowed:
                    raise EnergyError(
                        f"the energy counter went back from {previous.mj % modulus} to {poll.mj} mJ "
                        "(a reset, e.g. the driver reloaded): the trace measures nothing"
                    )
                offset += modulus
                value += modulus
            elif value - previous.mj > allowed:
                raise EnergyError(
                    f"the energy counter jumped by {value - previous.mj} mJ, more than {MAX_PLAUSIBLE_WATTS:.0f} W "
                    f"could draw in {dt_s * 1000:.0f} ms"
                )
            if value != previous.mj:
                moved_ns = poll.t_ns
        out.append(Poll(poll.t_ns, value))
    return out


def steps(polls: Sequence[Poll], modulus: int = COUNTER_MODULUS) -> list[Step]:
    """Where the counter moved, from consecutive readings (wraps undone)."""
    readings = unwrap(polls, modulus)
    found: list[Step] = []
    for before, after in itertools.pairwise(readings):
        if after.mj != before.mj:
            gap = after.t_ns - before.t_ns
            found.append(Step(before.t_ns + gap // 2, gap // 2, after.mj))
    return found


@dataclass(frozen=True)
class Period:
    """The counter's update period as seen: the median, least and greatest gap between steps (ms)."""

    median_ms: float
    min_ms: float
    max_ms: float
    intervals: int


def update_period(found: Sequence[Step]) -> Period:
    """The counter's update period from its steps; raises ``EnergyError`` with fewer than three steps."""
    if len(found) < 3:
        raise EnergyError(f"{len(found)} counter step(s): too few to tell the counter's update period")
    gaps = [(b.t_ns - a.t_ns) / 1e6 for a, b in itertools.pairwise(found)]
    return Period(statistics.median(gaps), min(gaps), max(gaps), len(gaps))


def power_between(found: Sequence[Step], start_ns: int, end_ns: int, what: str = "window") -> Window:
    """The window from the first step at or after ``start_ns`` to the last at or before ``end_ns``.

    Raises ``EnergyError`` when it spans fewer than ``MIN_STEPS`` steps: the counter's granularity would
    then not be small against the window.
    """
    inside = [step for step in found if start_ns <= step.t_ns <= end_ns]
    if len(inside) < MIN_STEPS:
        span = (end_ns - start_ns) / 1e6
        raise EnergyError(
            f"the {what} ({span:.0f} ms) spans {len(inside)} counter step(s), fewer than {MIN_STEPS}: "
            "too short for the counter's update period"
        )
    return Window(inside[0], inside[-1], len(inside))


@dataclass(frozen=True)
class Trial:
    """One back-to-back loop: its calls, the parent's wall time of it, the windows of the loop and of idle."""

    calls: int
    loop_ns: int
    loop: Window
    idle: Window

    @property
    def ns_per_call(self) -> float:
        return self.loop_ns / self.calls

    @property
    def board_joules_per_call(self) -> float:
        return self.loop.watts * self.ns_per_call / 1e9

    @property
    def joules_per_call(self) -> float:
        """The loop's power above the idle draw, per call (never below zero)."""
        return max(0.0, self.loop.watts - self.idle.watts) * self.ns_per_call / 1e9

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "loopNs": self.loop_ns,
            "joulesPerCall": self.joules_per_call,
            "boardJoulesPerCall": self.board_joules_per_call,
            "boardWatts": self.loop.watts,
            "idleWatts": self.idle.watts,
            "windowMs": round(self.loop.seconds * 1000, 3),
            "counterSteps": self.loop.steps,
            "uncertainty": self.loop.uncertainty + self.idle.uncertainty,
        }


def trial_from_trace(
    trace: Sequence[Poll],
    idle: Window,
    loop_start_ns: int,
    loop_end_ns: int,
    calls: int,
    settle_ns: int = int(SETTLE_S * 1e9),
    modulus: int = COUNTER_MODULUS,
) -> Trial:
    """One trial from the counter's readings across a loop of ``calls`` calls (parent's times).

    Raises ``EnergyError`` when the loop is too short for the counter or made no call.
    """
    if calls <= 0 or loop_end_ns <= loop_start_ns:
        raise EnergyError("a loop with no calls or no duration")
    window = power_between(steps(trace, modulus), loop_start_ns + settle_ns, loop_end_ns, "loop")
    return Trial(calls, loop_end_ns - loop_start_ns, window, idle)


@dataclass(frozen=True)
class Figure:
    """A run's energy figure: the median of its trials, the spread, the idle draw and the counter seen."""

    trials: tuple[Trial, ...]
    period: Period
    power_limit_mw: int | None = None
    clocks: tuple[dict[str, Any], ...] = field(default=())

    @property
    def joules_per_call(self) -> float:
        return statistics.median(t.joules_per_call for t in self.trials)

    @property
    def board_joules_per_call(self) -> float:
        return statistics.median(t.board_joules_per_call for t in self.trials)

    @property
    def average_watts(self) -> float:
        return statistics.median(t.loop.watts for t in self.trials)

    @property
    def idle_watts(self) -> float:
        return statistics.median(t.idle.watts for t in self.trials)

    @property
    def ns_per_call(self) -> float:
        return statistics.median(t.ns_per_call for t in self.trials)

    @property
    def calls_per_joule(self) -> float | None:
        value = self.joules_per_call
        return 1.0 / value if value > 0 else None

    @property
    def spread(self) -> float:
        """``(max − min) / median`` of the trials' joules per call (0 for one trial)."""
        values = [t.joules_per_call for t in self.trials]
        middle = statistics.median(values)
        return (max(values) - min(values)) / middle if middle > 0 else 0.0


def summarize(
    trials: Sequence[Trial],
    found: Sequence[Step],
    power_limit_mw: int | None = None,
    clocks: Sequence[dict[str, Any]] = (),
) -> Figure:
    """The run's figure from its trials and every counter step seen (for the update period)."""
    if not trials:
        raise EnergyError("no trial")
    return Figure(tuple(trials), update_period(found), power_limit_mw, tuple(clocks))


def figure_json(figure: Figure, uncertainty_from: Sequence[Trial] | None = None) -> dict[str, Any]:
    """The run record's ``energy`` member (docs/records.md, "energy")."""
    trials = list(uncertainty_from or figure.trials)
    out: dict[str, Any] = {
        "counter": COUNTER,
        "joulesPerCall": figure.joules_per_call,
        "boardJoulesPerCall": figure.board_joules_per_call,
        "averageWatts": figure.average_watts,
        "idleWatts": figure.idle_watts,
        "nsPerCall": round(figure.ns_per_call),
        "spread": figure.spread,
        "counterPeriodMs": round(figure.period.median_ms, 3),
        "counterPeriodRangeMs": [round(figure.period.min_ms, 3), round(figure.period.max_ms, 3)],
        "counterUnitMillijoules": 1,
        "uncertainty": max(t.loop.uncertainty + t.idle.uncertainty for t in trials),
        "trials": [t.to_json() for t in figure.trials],
    }
    if figure.calls_per_joule is not None:
        out["callsPerJoule"] = figure.calls_per_joule
    if figure.power_limit_mw is not None:
        out["powerLimitMilliwatts"] = figure.power_limit_mw
    if figure.clocks:
        out["clocks"] = list(figure.clocks)
    return out


# --------------------------------------------------------------------------- reading NVML (the parent only)


class EnergyCounter:
    """NVML's total-energy counter of one GPU, read by kictl's parent (never by a worker).

    Raises ``EnvError`` (exit 5) where NVML is missing or the GPU has no energy counter: the method
    never falls back to integrating power samples.
    """

    def __init__(self, index: int) -> None:
        try:
            self._nvml, self._handle = open_nvml(index)
        except EnvError as exc:
            raise EnvError(f"{exc} (so no energy counter)") from exc
        try:
            int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        except Exception as exc:
            raise EnvError(
                f"this GPU has no energy counter ({COUNTER}: {type(exc).__name__}: {exc}); kictl does not "
                "estimate energy from power samples"
            ) from exc

    def read(self) -> Poll:
        try:
            return Poll(time.perf_counter_ns(), int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)))
        except Exception as exc:
            raise EnvError(f"{COUNTER} failed: {type(exc).__name__}: {exc}") from exc

    def busy_percent(self) -> int | None:
        """NVML's GPU utilisation: the share of its last sample period (1/6 to 1 s) in which a kernel ran."""
        try:
            return int(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu)
        except Exception:
            return None

    def power_limit_mw(self) -> int | None:
        """The enforced power limit (mW), or None where NVML does not say."""
        try:
            return int(self._nvml.nvmlDeviceGetEnforcedPowerLimit(self._handle))
        except Exception:
            return None


class Poller:
    """The counter read every ``POLL_S`` in a thread of the parent's, while the parent waits on a worker."""

    def __init__(
        self,
        counter: Any,
        interval_s: float = POLL_S,
        sample: Any = None,
        sample_after_s: float = 0.0,
    ) -> None:
        self.counter = counter
        self.interval_s = interval_s
        #: ``sample()`` called once, ``sample_after_s`` into the polling (the clocks in the middle of a loop)
        self.sample, self.sample_after_s = sample, sample_after_s
        self.sampled: Any = None
        self.trace: list[Poll] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            began = time.perf_counter()
            while not self._stop.is_set():
                self.trace.append(self.counter.read())
                if self.sample is not None and time.perf_counter() - began >= self.sample_after_s:
                    self.sampled, self.sample = self.sample(), None
                time.sleep(self.interval_s)
            self.trace.append(self.counter.read())
        except BaseException as exc:  # handed to the caller by stop()
            self.error = exc

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kictl-energy-poll", daemon=True)
        self._thread.start()

    def stop(self) -> list[Poll]:
        """The readings so far; raises what the polling thread raised."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.error is not None:
            raise self.error
        return list(self.trace)

    def watch(self, seconds: float) -> list[Poll]:
        """Poll for ``seconds`` in this thread (the idle window)."""
        trace: list[Poll] = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            trace.append(self.counter.read())
            time.sleep(self.interval_s)
        return trace
