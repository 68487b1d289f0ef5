"""Energy per call inside a ``kictl bench`` session (``--measure energy``, issue 31).

The session calls :meth:`EnergyPhase.measure` for each implementation right
after its timed calls, while its worker is still armed: the inputs staged by
the harness, the implementation's ``setup()`` done, its timer ready.  From
there the method of ``kictl.bench.judge.energy`` runs with the harness's walls:

- the loop is the worker's (``wire.Loop``: the harness's own call path, the
  graph timer's replay where ``--timer graph`` is asked), on input sets the
  parent stages (``wire.Stage``, a fresh random shift per trial);
- the idle window must be idle by NVML's utilisation (the parent's reading): a kernel left running through
  it would raise the idle draw that every figure is net of;
- the energy counter and the clock around each loop are the *parent's*
  (``EnergyCounter`` is never opened in a worker), so nothing the
  implementation's process says enters the figure;
- the last call of the last loop is audited, its outputs taken by the parent at
  the loop's return while the worker is stopped (as a timed call's), and judged with
  the timed calls' audits (``timedOutputsCorrect``);
- the loop's time per call must not be far below the timed calls' figure
  (``energyLoopPace``): a loop that skips work is caught there, by the audit,
  or by the energy floor; threads and processes left are noted as after a
  timed call;
- the figure must lie between the physical floor and the power limit × time
  per call (``kictl.families.energy``), or the run fails with the check named.

:meth:`EnergyPhase.judge` turns what was gathered into the run record's
``energy`` member and its checks; :meth:`EnergyPhase.protocol` makes the
protocol's family ``kictl-nvml-energy`` and writes the method into its
measurement.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kictl import families
from kictl.bench import wire
from kictl.bench.judge import energy
from kictl.bench.judge.correctness import LOOSER_TOLERANCE
from kictl.bench.wire.checks import Check
from kictl.bench.worker.gpu_state import GpuReading, clocks_steady
from kictl.errors import EnvError, KictlError
from kictl.families.energy import bounds

FAMILY = "kictl-nvml-energy"
MEASURE_NAMES = ("latency", "energy")
#: The loop's time per call may be this fraction of the timed calls' median at least: warm caches, no flush
#: and launches enqueued ahead make a loop's call faster than a timed one (a memory-bound kernel whose data
#: fits in L2 by a few times), not ten times faster; below, calls did less work.  On the CPU (tests only:
#: no counter) the timed figure holds the wire's round trip, so the check is skipped there.
PACE_FRACTION = 0.1
PACE_CHECK = "energyLoopPace"
#: How long the calibration loop runs (s): it also warms the loop's path.
CALIBRATE_S = 0.1
MAX_LOOP_CALLS = 5_000_000
#: A trial's loop that took less than this share of ``loop_s`` is run again with its count resized (the
#: calls got faster since the calibration: caches, clocks), at most ``MEASURE_ATTEMPTS`` times in all.
SHORT_LOOP = 0.8
#: NVML's utilisation at the end of the idle window above which the window was not idle (a persistent kernel
#: reads 100%; an idle board 0%).
IDLE_BUSY_PERCENT = 20
#: How many times a trial's loop (resized, or timed too loosely: ``energy.MAX_WINDOW_UNCERTAINTY``) or the idle
#: window is measured at most before the run fails
MEASURE_ATTEMPTS = 3
METHOD_TEXT = (
    "NVML's total-energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ), read by kictl's parent every "
    "{poll_ms:g} ms: the idle draw over {idle_s:g} s with the worker held still, then {trials} back-to-back "
    "loops of {loop_s:g} s each (run() called on harness-staged inputs with no synchronisation between calls, "
    "warm caches, no L2 flush, one synchronisation at the end; a fresh random shift of the inputs per loop), "
    "each loop's board power taken between the first counter step {settle_s:g} s after its start and the last "
    "step before its end; joules per call = (loop power - idle power) x the parent's wall time of the loop / "
    "calls; median of the loops, spread (max-min)/median; the last call audited against the reference"
)


@dataclass
class EnergyEvidence:
    """What the parent gathered for one run (``figure`` or ``error``)."""

    figure: energy.Figure | None = None
    error: str | None = None
    pace: tuple[bool, str] | None = None
    traces: list[list[energy.Poll]] = field(default_factory=list)
    #: each loop's (start, end) on the parent's clock, and its calls
    loop_spans: list[tuple[int, int]] = field(default_factory=list)
    calls: int = 0
    #: the last loop's last call's outputs, as kictl's parent took them at the loop's return (or why it could not)
    last_outputs: list[Any] | str | None = None


class EnergyPhase:
    """The energy measurement of one session (one GPU); raises ``EnvError`` where the GPU has no counter."""

    def __init__(
        self,
        device: str,
        counter: Any = None,
        *,
        idle_s: float = energy.IDLE_S,
        loop_s: float = energy.LOOP_S,
        settle_s: float = energy.SETTLE_S,
        trials: int = energy.TRIALS,
        poll_s: float = energy.POLL_S,
        clock_reading: Callable[[], dict[str, Any] | None] | None = None,
    ) -> None:
        if counter is None:
            if not device.startswith("cuda"):
                raise EnvError(
                    f"--measure energy needs a GPU with an energy counter; {device} has none "
                    "(kictl does not estimate energy from power samples)"
                )
            counter = energy.EnergyCounter(int(device.split(":")[1]) if ":" in device else 0)
        self.counter = counter
        self.device = device
        self.idle_s, self.loop_s, self.settle_s, self.trials, self.poll_s = idle_s, loop_s, settle_s, trials, poll_s
        self.clock_reading = clock_reading or (lambda: None)
        self.evidence: dict[int, EnergyEvidence] = {}

    # ----------------------------------------------------------------- the protocol

    def method(self) -> dict[str, Any]:
        """The protocol's ``measurement.energy``."""
        text = METHOD_TEXT.format(
            poll_ms=self.poll_s * 1000,
            idle_s=self.idle_s,
            trials=self.trials,
            loop_s=self.loop_s,
            settle_s=self.settle_s,
        )
        return {
            "counter": energy.COUNTER,
            "method": text,
            "idleS": self.idle_s,
            "loopS": self.loop_s,
            "settleS": self.settle_s,
            "trials": self.trials,
            "cache": "warm",
        }

    def protocol(self, spec: dict[str, Any]) -> dict[str, Any]:
        """``spec`` (a BenchmarkProtocol spec) as an energy protocol: its own family, the method recorded."""
        measurement = {**spec["measurement"], "energy": self.method()}
        looser = spec["comparability"]["family"].endswith(LOOSER_TOLERANCE)
        return {**spec, "measurement": measurement, "comparability": {"family": FAMILY + LOOSER_TOLERANCE * looser}}

    # ----------------------------------------------------------------- measuring

    def measure(self, driver: Any) -> None:
        """The energy trials of one implementation, after its timed calls (its worker still armed)."""
        if driver.evidence.failure is not None or not getattr(driver, "armed", False):
            return
        found = EnergyEvidence()
        self.evidence[id(driver)] = found
        try:
            if getattr(driver, "written", ()):
                # a loop's calls run back to back on one staging: each would be given what the last one wrote
                raise energy.EnergyError(
                    "the definition's reference writes its input "
                    f"{', '.join(spec.name for spec in driver.written)}, and an energy loop's calls run back to "
                    "back on one staging, each given what the last one wrote: kictl measures no energy of it yet"
                )
            self._measure(driver, found)
        except energy.EnergyError as exc:
            found.error = str(exc)

    def _loop(
        self, driver: Any, count: int, input_set: int, shift: int, found: EnergyEvidence | None = None
    ) -> tuple[int, int] | None:
        """Stage, then one loop of ``count`` calls: the parent's (start, end) ns, or None if the run failed.

        Where the parent takes outputs itself (a worker process), the worker stops at the loop's return and the
        parent reads the last call's outputs there (``found.last_outputs``), as at a timed call's return: the
        energy loop's audit is the parent's, with no audit request for an implementation to hook."""
        if not driver._stage(input_set, shift):  # the parent writes them itself
            return None
        started = time.perf_counter_ns()
        answer = driver._ask(wire.Loop(count=count), wire.Looped)
        ended = time.perf_counter_ns()
        if answer is None:
            return None
        if not isinstance(answer, wire.Looped) or answer.calls != count:
            driver.evidence.note(Check.WIRE_INTACT, f"a loop of {count} calls answered {answer}")
            driver.fail("reward_hack", "wireIntact: a loop's answer does not match its request")
            return None
        if driver.takes_outputs:
            at_return = wire.Sample(
                ns=None, enqueued_ahead=None, notes=(), outputs=answer.outputs, outputs_error=answer.outputs_error
            )
            outputs = driver._took(at_return, True)
            if found is not None:
                found.last_outputs = outputs
        return started, ended

    def _idle(self) -> tuple[list[energy.Poll], list[energy.Step], energy.Window]:
        """The idle draw's window, its trace and steps; one whose edge steps the poller saw too late (as a loop's,
        ``energy.MAX_WINDOW_UNCERTAINTY``) is watched again: an idle draw read high would take a small kernel's
        joules to zero, below its floor (``energyAboveFloor``), a cheat's verdict for an honest run."""
        idle: energy.Window | None = None
        for _ in range(MEASURE_ATTEMPTS):
            idle_trace = energy.Poller(self.counter, self.poll_s).watch(self.idle_s)
            # the idle window must be idle: a kernel left running (a thread of the implementation's, another
            # process) would raise the idle draw and so lower every figure; NVML's utilisation covers the window's
            # last sample period (at most 1 s of its 1.2 s)
            busy = self.counter.busy_percent() if hasattr(self.counter, "busy_percent") else None
            if busy is not None and busy > IDLE_BUSY_PERCENT:
                raise energy.EnergyError(
                    f"the GPU was busy {busy}% of the idle window's last NVML sample period (kernels ran while the "
                    "worker was held idle): no idle draw to subtract"
                )
            idle_steps = energy.steps(idle_trace)
            if not idle_steps:
                raise energy.EnergyError("the energy counter did not move while idle")
            idle = energy.power_between(idle_steps, idle_trace[0].t_ns, idle_trace[-1].t_ns, "idle window")
            if idle.uncertainty <= energy.MAX_WINDOW_UNCERTAINTY:
                return idle_trace, idle_steps, idle
        assert idle is not None
        raise energy.EnergyError(
            f"in {MEASURE_ATTEMPTS} idle windows the energy counter's steps were seen too late to time the window "
            f"(±{idle.uncertainty:.1%}, at most ±{energy.MAX_WINDOW_UNCERTAINTY:.0%}): the parent's poller was held "
            "off the CPU (a loaded machine)"
        )

    def _measure(self, driver: Any, found: EnergyEvidence) -> None:
        evidence = driver.evidence
        sets = len(driver.timed_plans)
        timed = [s for s in evidence.samples if s > 0]
        guess_ns = statistics.median(timed) if timed else 1_000_000
        count = _calls_for(CALIBRATE_S / 2, guess_ns)
        for seconds in (CALIBRATE_S, self.loop_s):  # twice: a first loop's calls are slower than later ones
            span = self._loop(driver, count, 0, secrets.randbelow(2**31), found)
            if span is None:
                return
            count = _calls_for(seconds, (span[1] - span[0]) / count)
        idle_trace, idle_steps, idle = self._idle()
        found.traces.append(idle_trace)
        all_steps = list(idle_steps)
        trials: list[energy.Trial] = []
        clocks: list[dict[str, Any]] = []
        chosen, shift = 0, 0
        for n in range(self.trials):
            chosen, shift = (n + 1) % sets, secrets.randbelow(2**31)
            # a loop far shorter than asked is made again, resized; one whose counter steps were seen too late to
            # time its window (the parent's poller held off the CPU) is made again as it was
            trial: energy.Trial | None = None
            for attempt in range(MEASURE_ATTEMPTS):
                # the clocks and throttle reasons in the middle of the loop (else right after it)
                poller = energy.Poller(self.counter, self.poll_s, self.clock_reading, self.loop_s / 2)
                poller.start()
                span = self._loop(driver, count, chosen, shift, found)
                trace = poller.stop()
                reading = poller.sampled or self.clock_reading()
                if span is None:
                    return
                took_s = (span[1] - span[0]) / 1e9
                if took_s < SHORT_LOOP * self.loop_s and attempt + 1 < MEASURE_ATTEMPTS:
                    count = _calls_for(self.loop_s, (span[1] - span[0]) / count)
                    continue
                trial = energy.trial_from_trace(trace, idle, span[0], span[1], count, int(self.settle_s * 1e9))
                if trial.loop.uncertainty <= energy.MAX_WINDOW_UNCERTAINTY:
                    break
            assert trial is not None  # the last attempt always makes one
            assert span is not None
            if trial.loop.uncertainty > energy.MAX_WINDOW_UNCERTAINTY:
                raise energy.EnergyError(
                    f"in {MEASURE_ATTEMPTS} loops the energy counter's steps were seen too late to time the window "
                    f"(±{trial.loop.uncertainty:.1%}, at most ±{energy.MAX_WINDOW_UNCERTAINTY:.0%}): the parent's "
                    "poller was held off the CPU (a loaded machine)"
                )
            found.traces.append(trace)
            if reading is not None:
                clocks.append(reading)
            found.loop_spans.append(span)
            found.calls = count
            trials.append(trial)
            all_steps += energy.steps(trace)
            threads = driver.worker.thread_count()
            if threads > driver.threads_armed:
                evidence.note(
                    Check.NO_THREADS_LEFT,
                    f"{threads - driver.threads_armed} thread(s) more than before the timed calls were alive "
                    "after an energy loop",
                )
            driver._processes("after an energy loop")
        if driver.takes_outputs:  # taken by the parent at the last loop's return
            outputs = found.last_outputs if found.last_outputs is not None else "no outputs were taken"
        else:  # an in-process worker (tests): it packs them when asked
            audited = driver._ask(wire.Audit(), wire.Outputs)
            if audited is None:
                return
            assert isinstance(audited, wire.Outputs)
            outputs = driver._tensors(audited, "an energy loop's last call")
        index = len(evidence.samples) + len(evidence.audits)  # a number no timed call has
        evidence.audits.append((index, chosen, shift, outputs))
        limit = self.counter.power_limit_mw() if hasattr(self.counter, "power_limit_mw") else None
        found.figure = energy.summarize(trials, sorted(all_steps, key=lambda s: s.t_ns), limit, clocks)
        found.pace = loop_pace(found.figure.ns_per_call, timed)
        keep_traces(found, driver.label)

    # ----------------------------------------------------------------- judging

    def judge(self, members: dict[str, Any], driver: Any, work: Any) -> dict[str, Any]:
        """The run's members with ``energy`` and its checks; a run without a figure or outside the bounds fails."""
        if members.get("status") != "passed":
            return members
        found = self.evidence.get(id(driver))
        if found is None or found.figure is None:
            why = found.error if found is not None and found.error else "no energy was measured"
            return {"status": "runtime_error", "statusDetail": f"kictl could not measure energy: {why}"}
        figure = found.figure
        energy_json = energy.figure_json(figure)
        if figure.clocks:
            readings = [
                GpuReading(
                    int(c["smClockMhz"]),
                    int(c["memoryClockMhz"]),
                    int(c["temperatureC"]),
                    int(c["powerMilliwatts"]),
                    tuple(c["throttleReasons"]),
                )
                for c in figure.clocks
            ]
            steady, detail = clocks_steady(readings)
            energy_json["clocksSteady"] = steady
            if detail:
                energy_json["clocksDetail"] = detail
        checks = bounds(work, figure.power_limit_mw, figure.ns_per_call).checks(
            figure.joules_per_call, figure.board_joules_per_call
        )
        ok, detail = found.pace or (True, "")
        if self.device == "cpu":
            checks[PACE_CHECK] = {
                "result": "skipped",
                "detail": "on the CPU the timed figure holds the wire: " + detail,
            }
        else:
            checks[PACE_CHECK] = {"result": "passed" if ok else "failed", "detail": detail}
        integrity = {**members.get("integrity", {}), **checks}
        out = {**members, "energy": energy_json, "integrity": integrity}
        failed = [name for name, check in checks.items() if check["result"] == "failed"]
        if failed:
            out["status"] = "reward_hack"
            out["statusDetail"] = "; ".join(f"{name}: {checks[name]['detail']}" for name in failed)[:2000]
        return out


def _calls_for(seconds: float, ns_per_call: float) -> int:
    """How many calls fill ``seconds`` at ``ns_per_call`` (at least one, at most ``MAX_LOOP_CALLS``)."""
    return max(1, min(MAX_LOOP_CALLS, int(seconds * 1e9 / max(1.0, ns_per_call))))


def loop_pace(ns_per_call: float, timed_ns: list[int]) -> tuple[bool, str]:
    """Whether the loop's time per call is plausible against the timed calls' median (``energyLoopPace``)."""
    if not timed_ns:
        return True, "no timed figure to compare with"
    median = statistics.median(timed_ns)
    text = f"{ns_per_call:.0f} ns per call in the loop against a timed median of {median:.0f} ns"
    if ns_per_call < PACE_FRACTION * median:
        return False, text + f" (below {PACE_FRACTION:g}×: calls in the loop did less work)"
    return True, text


def energy_work(spec: Any, workload: Any, registry: Any) -> Any:
    """The workload's bytes and FLOPs (``families.work``) for the energy floor; None where no model exists."""
    try:
        return families.work(spec, workload.model.spec, registry.read_blob)
    except (KictlError, KeyError, ValueError):
        return None


#: A folder: each run's raw counter readings are written there as JSON (``benchmarks/energy.py`` keeps them
#: as the recorded traces the tests read; nothing else reads this).
TRACE_ENV = "KICTL_ENERGY_TRACES"


def keep_traces(found: EnergyEvidence, label: str) -> None:
    """Write the run's raw counter readings where ``TRACE_ENV`` names a folder."""
    folder = os.environ.get(TRACE_ENV)
    if not folder:
        return
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)[:120] + ".json"
    document = {
        "label": label,
        "idle": [[poll.t_ns, poll.mj] for poll in found.traces[0]] if found.traces else [],
        "loops": [[[poll.t_ns, poll.mj] for poll in trace] for trace in found.traces[1:]],
        "loopSpans": found.loop_spans,
        "calls": found.calls,
    }
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / name).write_text(json.dumps(document) + "\n")
