"""The timed loop, driven from kictl's parent (DESIGN §7, issue 10).

For one implementation on one workload, ``RunDriver`` asks its worker for:
the correctness rounds (each on fresh tensors with secret-seeded values),
``Arm`` (setup on values that are never timed, then the timed input sets),
the warm-up calls, and then timed calls one at a time.  Each timed call
returns before the parent decides, with its own randomness, whether that
call is audited (its outputs fetched and later compared with the
reference's outputs for the input set it ran on).  Its sample comes back
with it, or (the CUPTI timer, which needs a flush of CUPTI's buffers per
figure) with a later call's answer: the parent asks for the samples so far
every ``SETTLE_EVERY`` calls and at the end, and files each under its call.
Which input set a call gets rotates over several sets with the same
structure, so no answer can be cached across calls.

The parent keeps what it sees itself beside each sample: its wall time
around the request, and from the OS the worker's CPU time, threads and the
processes in its sandbox.  ``RunEvidence`` holds all of it; ``verdict``
judges it.  On the CPU several drivers take turns (``interleave``), one call
each, so that a candidate and the reference see the same load; on a GPU the
session runs each driver's calls as a block (``session``).

Everything that can go wrong with the implementation ends its driver with a
failure of its own (``failure`` set); no exception leaves a driver's steps
but kictl's own bugs, and the session guards against those per run.

Its size (over 600 lines) is ``RunDriver``: every request to the worker and the parent's own check of its
answer side by side, so that nothing a worker reports is used without the check next to it.
"""

from __future__ import annotations

import os
import secrets
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kictl.bench import wire
from kictl.bench.judge import staging, taken
from kictl.bench.judge.audits import AuditFinding
from kictl.bench.judge.runner import PROTOCOL, ImplementationFailed, ProcessView, WorkerGone, WorkerProcess
from kictl.bench.wire import cuda_ipc, regions
from kictl.bench.wire.checks import Check
from kictl.bench.worker import timing
from kictl.bench.worker.main import unpack
from kictl.errors import EnvError

PINGS = 15
#: A slow call may end adaptive repetition by the time budget before ``min_calls``, but not below this.
MIN_CALLS_IN_BUDGET = 3
#: A fixed count capped by a time budget (the GPU's default, ``options.fixed_count_budget``) stops early
#: only after this many calls: a median of fewer would not be one to rank by (the run records the median's
#: relative error beside it: with 20 calls, half the width between the 6th and the 15th of them).
MIN_CALLS_UNDER_BUDGET = 20
#: Shifts are drawn below this; the worker takes them modulo each input's size.
SHIFTS = 2**31
#: Timed call ``i`` (from 0) is audited with probability ``min(1, AUDIT_WEIGHT / (i + 1))``, drawn by the
#: parent after the call returned: the first calls always, later ones ever less often but never with
#: probability zero, so that about ``AUDIT_WEIGHT * ln(n)`` of ``n`` calls are audited and a cheat that
#: turns bad after any number of calls is still met by an audit it cannot foresee.
AUDIT_WEIGHT = 3
#: Timed call ``i`` (from 1) is a *probe* with probability ``min(1, PROBE_WEIGHT / i)``: the previous call's
#: input set and shift again with a few values of each random input swapped (``worker._perturbed``), and
#: always audited.  A cache keyed on the inputs' identity, pointer, version or a sample of their values
#: answers it with the previous call's outputs; the audit finds them wrong (timedOutputsCorrect).
PROBE_WEIGHT = 1
#: Known values a GPU worker puts in device memory for the parent to read there before any import (``_probe``).
PROBE_VALUES = 4096
#: The parent asks for the samples so far (``wire.Call(settle=True)``) every this many timed calls, the
#: CUPTI timer's own batch; between, that timer may send a call's sample with a later answer.  Nothing the
#: parent decides per call needs the sample itself (audits and probes are drawn from its own randomness, and
#: a fixed count's budget is its own wall time); an adaptive count asks for every call's.
SETTLE_EVERY = timing.SETTLE_EVERY
#: A sample may exceed the parent's wall time around its request by this much (clock granularity).
SAMPLE_SLACK_NS = 2_000
#: How long the parent watches an idle worker for CPU use after the timed calls.
IDLE_WINDOW_S = 0.1
#: What the wire and the scheduler may add to the best-placed call as the parent sees it, beyond four
#: times the pings' median (the inputs are staged by a request of their own, outside the
#: parent's measurement of the call): a sample forged short by tens of milliseconds
#: (work done while the worker's clock was not looking) is caught; shorter forgeries of CPU work are
#: caught by the CPU-time bound below.
GAP_BASE_NS = 30_000_000
#: ... judged only over this many timed calls or more: one call on a loaded machine can wait that long.
GAP_MIN_SAMPLES = 5
#: The sandbox's CPU time over the timed calls' requests (from /proc's schedstat, which the worker
#: cannot forge; staging the inputs is a request of its own and not counted) may be at most this
#: multiple of what the samples add up to (per allowed thread), plus the wire's cost per call.
CPU_PER_SAMPLE_FACTOR = 2
CPU_PER_CALL_NS = 1_000_000
CPU_SLACK_NS = 20_000_000
IDLE_TICKS_ALLOWED = 2
#: On the CPU a call's figure is the parent's clock around it (less the wire's round trip); the worker's sample
#: is a cross-check.  (Tests that drive a fake worker through the CUPTI timer's bookkeeping on the CPU turn it
#: off: there the figures under test are the fake's.)
PARENT_CLOCK_ON_CPU = True
#: The most wall time one run (an implementation on a workload) may hold the session, in seconds, or this many
#: times ``--timeout`` where that is longer: a worker that answers every request just inside ``--timeout`` ends
#: as a ``timeout`` once its run has taken this long in all.
RUN_WALL_S = 3600
RUN_WALL_TIMEOUTS = 6
#: The sandbox's CPU time between its own timed calls (while the parent stages, or other workers are timed):
#: kictl's checks of each call run there after its answer (~0.1 ms), and nothing else may but the implementation's
#: own threads, which ``THREAD_SHARE`` judges.  A worker that keeps working between its calls (precomputing, or
#: slowing the workers timed meanwhile) is judged.
OUTSIDE_PER_CALL_NS = 1_000_000
OUTSIDE_SLACK_NS = 50_000_000
#: The sandbox's CPU time over its timed calls may exceed what the CPUs it was given can run in their wall time
#: by this much a call (the parent reads the counter just after the answer, while kictl's checks of the call
#: start) and in all (issue 40): more is a second CPU it was not given.
OVER_WALL_PER_CALL_NS = 300_000
#: ... and where the cgroup counts CPU time per CPU (v1), at most this much on CPUs it was not given, in all.
OTHER_CPUS_NS = 1_000_000
OVER_WALL_SLACK_NS = 10_000_000
#: Threads the implementation keeps (a watchdog, a helper blocked on a queue, a library's idle pool) are judged by
#: what they do, not by being alive (issue 40), on the CPU: between the worker's own timed calls (while the parent
#: stages, other workers are timed, and in the idle window after the calls) all of them together may use at most
#: this share of that wall time plus ``THREAD_SLACK_NS`` (a watchdog waking every 50 ms used 0.14% on the loaded
#: 2-core VM, 70 us a wake; one that spins uses all of it) ...
THREAD_SHARE = 0.01
THREAD_SLACK_NS = 5_000_000
#: ... and between a call's answer and the worker's stop at its return (the parent's clock has stopped, the
#: outputs are not read yet) at most this much a call plus ``THREAD_WINDOW_SLACK_NS``: an idle thread does nothing
#: there, a helper handed the GIL as kictl's worker writes the answer would finish the call's outputs there.
THREAD_WINDOW_PER_CALL_NS = 50_000
THREAD_WINDOW_SLACK_NS = 2_000_000


@dataclass
class LoopOptions:
    """How many calls: ``iterations`` fixed (times ``trials``), or adaptive (``None``) to a target or budget."""

    warmup: int
    iterations: int | None
    trials: int
    target_relative_error: float | None
    time_budget_s: float | None
    #: Seconds of warm-up calls after which the warm-up ends early (``None``: the count is exact): counted from
    #: the end of the first call (a JIT build or a lazy start), and then one more call settles them all.
    warmup_budget_s: float | None = None
    min_calls: int = 10
    max_calls: int = 5000
    timer: str = "perf_counter_ns"
    time_setup: bool = False
    flush_bytes: int = 0
    timeout_s: float = 600.0


@dataclass
class RunEvidence:
    """Everything the parent gathered about one implementation on one workload."""

    #: (status, detail) when the implementation failed outright (compile_error, runtime_error, timeout)
    failure: tuple[str, str] | None = None
    #: correctness round label -> outputs (tensors) or the reason there are none
    rounds: dict[str, list[Any] | str] = field(default_factory=dict)
    #: timed calls: samples, the parent's wall times, input set of each call
    samples: list[int] = field(default_factory=list)
    #: CPU: the worker's own samples of the timed calls (the figure is the parent's clock: ``samples``)
    worker_samples: list[int] = field(default_factory=list)
    walls: list[int] = field(default_factory=list)
    sets: list[int] = field(default_factory=list)
    enqueued_ahead: int | None = None
    device_spin_ns: int | None = None
    #: CUPTI timer: the events figure and the activity count of each timed call
    events_ns: list[int] = field(default_factory=list)
    kernels: list[int] = field(default_factory=list)
    busy_ns: list[int] = field(default_factory=list)
    #: CUPTI timer: how streamOrdered was judged (``None``: no CUPTI timer, the check is judged as before)
    stream_rule: str | None = None
    #: GPU: NVML readings (gpu_state.GpuReading.to_json) around the timed calls
    clocks: list[dict[str, Any]] = field(default_factory=list)
    #: (timed call index, input set, shift, outputs or why none); the outputs become their finding once judged
    #: against the reference's (``audits.AuditFinding``: the session judges them as they come, issue 40)
    audits: list[tuple[int, int, int, list[Any] | str | AuditFinding]] = field(default_factory=list)
    #: timed call index -> the seed of its perturbation, for the calls that were probes (all audited)
    probes: dict[int, int] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    pings_ns: list[int] = field(default_factory=list)
    loop_ticks: int = 0
    #: the sandbox's CPU time over the timed calls' requests only (staging excluded), in ns
    call_cpu_ns: int = 0
    #: ... and between its timed calls (from one answer to the next request; audits excluded), in ns
    outside_cpu_ns: int = 0
    loop_wall_ns: int = 0
    idle_ticks: int = 0
    #: CPU: what the implementation's own threads (not kictl's) used between the worker's timed calls and in the
    #: idle window after them, and that wall time, in ns (``THREAD_SHARE``)
    thread_outside_ns: int = 0
    thread_outside_wall_ns: int = 0
    #: ... of which between the timed calls alone (the window of ``outside_cpu_ns``; the idle window excluded)
    thread_between_ns: int = 0
    #: ... and between each call's answer and the worker's stop at its return (``THREAD_WINDOW_PER_CALL_NS``)
    thread_window_ns: int = 0
    threads_allowed: int = 1
    stop_reason: str | None = None
    #: warm-up calls made, where ``LoopOptions.warmup_budget_s`` ended them before ``LoopOptions.warmup``
    warmup_calls: int | None = None
    relative_error: float | None = None
    cpus: tuple[int, ...] = ()

    def note(self, check: Check | str, detail: str) -> None:
        found = self.notes.setdefault(str(check), [])
        if detail not in found and len(found) < 20:
            found.append(wire.clean_text(detail, 500))


def _known_check(name: str) -> bool:
    return name in {check.value for check in Check}


class RunDriver:
    """One implementation's worker through one workload's rounds, arming and timed calls."""

    def __init__(
        self,
        worker: WorkerProcess,
        load: wire.Load,
        rounds: Sequence[tuple[str, wire.Plan]],
        setup_plan: wire.Plan,
        timed_plans: Sequence[wire.Plan],
        outputs: Sequence[wire.OutputSpec],
        options: LoopOptions,
        *,
        progress: Callable[[str], None] | None = None,
        label: str = "",
        written: Sequence[wire.OutputSpec] = (),
    ) -> None:
        #: what the driver is doing, for the session's progress (``kictl bench --timings`` prints it)
        self.say = progress or (lambda _text: None)
        self.label = label or worker.label
        self.worker = worker
        self.load = load
        self.round_plans = list(rounds)
        self.setup_plan = setup_plan
        self.timed_plans = list(timed_plans)
        self.outputs = tuple(outputs)
        #: the inputs the definition's reference writes (docs/bench.md, "Inputs the reference writes"): each call's
        #: values of them after the call follow its outputs, and ``inputsUnchanged`` leaves them out
        self.written = tuple(written)
        names = [spec.name for spec in setup_plan.inputs]
        self.written_at = [names.index(spec.name) for spec in self.written]
        worker.output_limit = wire.outputs_limit((*self.outputs, *self.written))
        self.options = options
        self.evidence = RunEvidence()
        #: the run's own wall-time cap (``RUN_WALL_S``), from the driver's making
        self.run_limit_s = max(RUN_WALL_S, RUN_WALL_TIMEOUTS * options.timeout_s)
        self.run_deadline = time.monotonic() + self.run_limit_s
        self.active = False
        self.calls = 0
        #: the parent's wall time of the timed-call requests alone (a fixed count's budget: ``_ending``)
        self.busy_ns = 0
        #: the wall time of this run's whole steps, the parent's own work for each call included (its staging,
        #: checks and audits; not the other runs' steps): an adaptive count's budget (``_ending``)
        self.step_ns = 0
        self.last_shift = 0  # the shift of the last timed call (a probe repeats it)
        self.loop_started_ticks = 0
        self.loop_started_ns = 0
        self.ahead = 0
        self.ahead_known = False
        #: ``Call`` requests since ``Arm`` (warm-up included), as the worker numbers them in ``wire.Settled``;
        #: the timed calls whose samples are still to come: call number -> index in ``evidence.samples``
        self.call_number = 0
        self.warmup_calls: set[int] = set()
        self.waiting: dict[int, int] = {}
        self.threads_armed = 0
        #: CPU: the implementation's threads' CPU time (tid -> ns) when the worker last stopped at a call's return,
        #: and the parent's clock then (``_own_threads``); counted up to the end of the idle window after the calls
        self.thread_mark: dict[int, int] | None = None
        self.thread_mark_ns = 0
        #: the import was sent by ``begin`` and its answer is still to be taken; setup() has run
        self.load_sent = False
        self.armed = False
        self.finished = False
        self.finish_sent = False
        self.idle_from: ProcessView | None = None
        #: the parent's own staging of the timed inputs (CPU, ``staging``), from ``Arm`` on
        self.stager: staging.Stager | staging.DeviceStager | None = None
        #: GPU: the device address ranges of the timed tensor inputs, as the worker gave them before setup()
        self.device_inputs: list[tuple[int, int]] = []
        #: the sandbox's CPU time (ns) when its last timed call's answer came (CPU), less its audits since
        self.cpu_mark: int | None = None
        #: CPU time per call is judged on the CPU only (``consistency_notes``): the GPU path reads threads alone
        self.cpu_device = options.timer == "perf_counter_ns"
        self.total_fixed = (options.iterations * options.trials) if options.iterations is not None else None
        #: the sandbox's CPU time per CPU when the timed calls began (v1 cgroups; ``None`` where none is kept)
        self.per_cpu_from: dict[int, int] | None = None
        #: request type -> [count, parent's wall ns from sending it to taking its answer] (``kictl bench
        #: --timings`` prints them: where a run's harness time goes, request by request)
        self.requests: dict[str, list[int]] = {}

    # ----------------------------------------------------------------- guarded requests

    def _ask(self, message: wire.Message, expect: type[wire.Message]) -> wire.Message | None:
        """One request; on any failure of the implementation the driver ends with it recorded."""
        started = time.perf_counter_ns()
        try:
            self.worker.send(message)
        except WorkerGone as exc:
            self.fail("runtime_error", exc.detail or "the worker died")
            return None
        answer = self._take(expect)
        tally = self.requests.setdefault(message.TYPE, [0, 0])
        tally[0] += 1
        tally[1] += time.perf_counter_ns() - started
        return answer

    def _take(self, expect: type[wire.Message]) -> wire.Message | None:
        """The answer to the request sent last; on any failure of the implementation the driver ends."""
        left = self.run_deadline - time.monotonic()
        if left <= 0:
            self.fail("timeout", f"the run took more than {self.run_limit_s:g} s in all; the worker was stopped")
            return None
        try:
            answer = self.worker.receive(min(self.options.timeout_s, left), frozenset({expect.TYPE}))
        except ImplementationFailed as exc:
            self.fail(exc.status, exc.detail)
            return None
        except WorkerGone as exc:
            if exc.kind == PROTOCOL:
                self.evidence.note(Check.WIRE_INTACT, exc.detail.splitlines()[0] if exc.detail else "broken frame")
                self.fail("reward_hack", f"wireIntact: {exc.detail}")
            elif exc.kind == "timeout":
                self.fail("timeout", exc.detail)
            else:
                self.fail("runtime_error", exc.detail or "the worker died")
            return None
        if expect is not wire.Sample and self._breached():  # a timed call's answer: step() looks, after its reads
            return None
        for note in getattr(answer, "notes", ()):
            if _known_check(note.check):
                self.evidence.note(note.check, note.detail)
            else:
                self.evidence.note(Check.WIRE_INTACT, f"the worker named an unknown check {note.check!r}")
        return answer

    def fail(self, status: str, detail: str) -> None:
        breached = self.worker.breaches() if status != "reward_hack" else []
        if breached:  # a limit the sandbox ran into explains the failure (issue 40)
            found = "resource_limit: " + "; ".join(breached)
            status, detail = "runtime_error", f"{found}; {detail}" if detail else found
        if self.evidence.failure is None:
            self.evidence.failure = (status, wire.clean_text(detail, 4000))
            self.say(f"{self.label}: {status}")
        self.active = False
        self.release()
        self.worker.stop()

    def _other_cpus(self) -> None:
        """CPU time the sandbox spent, since the timed calls began, on CPUs it was not given (its cgroup counts it
        per CPU, processes and threads that have ended included): more than ``OTHER_CPUS_NS`` condemns the run."""
        given = set(self.worker.cpus or self.evidence.cpus)
        now = self.worker.cpu_ns_per_cpu() if self.per_cpu_from is not None and given else None
        if now is None or self.per_cpu_from is None:
            return
        used = {cpu: ns - self.per_cpu_from.get(cpu, 0) for cpu, ns in now.items() if cpu not in given}
        if sum(used.values()) > OTHER_CPUS_NS:
            self.per_cpu_from = None  # said once
            where = ", ".join(f"{ns / 1e6:.1f} ms on CPU {cpu}" for cpu, ns in sorted(used.items()) if ns > 0)
            self.evidence.note(
                Check.NO_WORK_OUTSIDE_CALLS,
                f"the sandbox ran on CPUs it was not given during its timed calls ({where}; it was given "
                f"{','.join(map(str, sorted(given)))})",
            )

    def _breached(self) -> bool:
        """A limit the worker's sandbox ran into (``runner.WorkerProcess.breaches``) ends the run."""
        if not self.worker.breaches():
            return False
        self.fail("runtime_error", "")
        return True

    # ----------------------------------------------------------------- phases

    def begin(self) -> None:
        """Start the worker if needed, measure the wire, and send the import without waiting for it.

        The implementation then imports (FlashInfer, Triton: seconds) while the
        parent gets the reference's outputs; ``prepare`` takes the answer.
        """
        if self.evidence.failure is not None:
            return
        if not self.worker.alive:
            self.worker.start()
        if self.worker.loaded or self.load_sent:
            return
        if not self._ping():
            return
        self.say(f"{self.label}: import (sent)")
        try:
            self.worker.send(self.load)
        except WorkerGone as exc:
            self.fail("runtime_error", exc.detail or "the worker died")
            return
        self.load_sent = True

    def _ping(self) -> bool:
        """The wire's round trip, ``PINGS`` times, before anything of the implementation's is imported; on a GPU
        also the parent's reading of the worker's device memory, checked (``_probe``)."""
        self.worker.pings_ns = []
        for _ in range(PINGS):
            started = time.perf_counter_ns()
            if self._ask(wire.Ping(), wire.Pong) is None:
                return False
            self.worker.pings_ns.append(time.perf_counter_ns() - started)
        return self._probe() if self.takes_outputs and not self.cpu_device else True

    def _probe(self) -> bool:
        """Before any implementation is imported, the worker puts known values in device memory and the parent
        reads them there through their IPC handle, as it will read every audited call's outputs.  A machine where
        that fails (a driver, a sandbox or an allocator that does not allow it) ends the session with an
        environment error, before any run could be judged on outputs the parent could not read."""
        answer = self._ask(wire.Probe(count=PROBE_VALUES), wire.Probed)
        if answer is None:
            return False
        assert isinstance(answer, wire.Probed)
        problem = taken.probe_problem(self.worker.worker_pid, answer, PROBE_VALUES)
        if problem is not None:
            raise EnvError(
                f"kictl's parent cannot read a GPU worker's device memory through CUDA IPC ({problem}), so it "
                "could not take the timed calls' outputs; nothing was judged"
            )
        return True

    def _loaded(self) -> bool:
        """The implementation imported in the worker (its answer taken, or asked for and taken now)."""
        if self.worker.loaded:
            return True
        if self.load_sent:
            self.load_sent = False
            answer = self._take(wire.Loaded)
        else:
            answer = self._ask(self.load, wire.Loaded) if self._ping() else None
        if answer is None:
            return False
        self.say(f"{self.label}: imported")
        self.worker.loaded = True
        return True

    def prepare(self) -> None:
        """Start and load the worker if needed, run the correctness rounds, arm (``setup()``); not the warm-up.

        Drivers of several implementations may prepare at once, each in a thread of its own:
        nothing here is timed, and each driver talks to its own worker only.
        """
        evidence = self.evidence
        if evidence.failure is not None:
            return
        if not self.worker.alive and not self.load_sent:  # a worker that died importing is read as such below
            self.worker.start()
        evidence.cpus = self.worker.pinned[0] if self.worker.pinned else ()
        evidence.threads_allowed = self.worker.pinned[1] if self.worker.pinned else 1
        if not self._loaded():
            return
        evidence.pings_ns = list(self.worker.pings_ns)
        for label, plan in self.round_plans:
            self.say(f"{self.label}: correctness, {label}")
            answer = self._ask(wire.Check(plan=plan, outputs=self.outputs, written=self.written), wire.Outputs)
            if answer is None:
                return
            assert isinstance(answer, wire.Outputs)
            evidence.rounds[label] = self._tensors(answer, f"correctness round {label}")
            self._processes("after a correctness call")
        region = self.worker.inputs
        offsets = regions.layout(self.setup_plan, region.size) if self.cpu_device and region is not None else None
        # on a GPU the parent stages through CUDA IPC wherever it takes the outputs that way (the probe passed)
        on_device = not self.cpu_device and self.takes_outputs
        arm = wire.Arm(
            setup_plan=self.setup_plan,
            # where the parent stages the timed values, the worker never learns their plans (issue 40): setup() runs
            # in a frame that holds no seed of a timed input set, and no timed set is in the worker's memory
            timed_plans=() if offsets is not None or on_device else tuple(self.timed_plans),
            outputs=self.outputs,
            timer=self.options.timer,
            time_setup=self.options.time_setup,
            flush_bytes=self.options.flush_bytes,
            parent_stages=offsets is not None or on_device,
            stop_at_return=self.takes_outputs,
            written=self.written,
        )
        self.say(f"{self.label}: setup() and the timed input sets")
        armed = self._ask(arm, wire.Armed)
        if armed is None:
            return
        assert isinstance(armed, wire.Armed)
        if not self.cpu_device:
            self.device_inputs = taken.ranges(armed.inputs)
        self.release()
        if offsets is not None:
            assert region is not None
            self.stager = staging.Stager(region, self.timed_plans, offsets, self.setup_plan.inputs)
        elif on_device:
            try:
                self.stager = staging.DeviceStager(
                    armed.staged, self.timed_plans, self.setup_plan.inputs, self.options.flush_bytes
                )
            except (staging.StagingError, cuda_ipc.IpcError) as exc:
                self.fail("runtime_error", f"kictl's parent could not stage the timed inputs on the GPU: {exc}")
                return
        if self.written and self.takes_outputs and self.stager is None:
            # a timed call's written inputs are read back by the parent, where it staged them: no worker's word
            self.fail("runtime_error", "kictl's parent could not stage the timed inputs that the reference writes")
            return
        if self.stager is not None:
            self.stager.calls_write = tuple(self.written_at)
        self.armed = True

    def release(self) -> None:
        """The parent lets go of the worker's timed inputs (a GPU stager's IPC handles): a new ``Arm``, or the
        run's end."""
        stager, self.stager = self.stager, None
        if isinstance(stager, staging.DeviceStager):
            stager.close()

    def _stage(self, input_set: int, shift: int, perturb: int = 0) -> bool:
        """The next call's values into the timed tensors: written by the parent itself where it can (CPU), else
        asked of the worker; ``False`` when the run ended."""
        if self.stager is not None:
            self.stager.stage(input_set, shift, perturb)
            return True
        return self._ask(wire.Stage(input_set=input_set, shift=shift, perturb=perturb), wire.Staged) is not None

    def _inputs_unchanged(self, when: str) -> None:
        """The parent reads back what it staged (``staging.Stager.changed``)."""
        if self.stager is not None:
            changed = self.stager.changed()
            if changed:
                self.evidence.note(Check.INPUTS_UNCHANGED, f"{when} changed {', '.join(changed)}")

    def warm(self) -> None:
        """The warm-up calls, then the start of the timed calls (one driver at a time: the host's enqueue
        time measured here sets the device spin before each timed call)."""
        if not self.armed or self.evidence.failure is not None:
            return
        self.say(f"{self.label}: {self.options.warmup} warm-up call(s)")
        last = self.options.warmup
        budget = self.options.warmup_budget_s
        first_done: int | None = None
        n = 0
        while n < last:
            if not self._stage(n % len(self.timed_plans), secrets.randbelow(SHIFTS)):
                return
            # the last warm-up call settles them all: the timed calls start with none waiting
            answer = self._ask(wire.Call(settle=n == last - 1), wire.Sample)
            if answer is None:
                return
            assert isinstance(answer, wire.Sample)
            if self.takes_outputs:
                self._took(answer, False)
            self.call_number += 1
            if answer.ns is None:
                self.warmup_calls.add(self.call_number)
            if not self._settled(answer.settled):
                return
            n += 1
            now = time.perf_counter_ns()
            if first_done is None:
                first_done = now
            elif budget is not None and n < last - 1 and now - first_done >= budget * 1e9:
                last = n + 1  # the budget is spent: one more call, which settles the rest
                self.evidence.warmup_calls = last
                self.say(f"{self.label}: warm-up budget of {budget:g} s spent: {last} warm-up call(s)")
        if self.warmup_calls:
            self._missing(len(self.warmup_calls), "the last warm-up call's answer, which was to settle them")
            return
        armed = self.worker.view()
        self.threads_armed = armed.threads
        # on the CPU a thread the import, setup() or the warm-up left (a watchdog, a helper, a library's pool) is
        # judged by the CPU it uses from here on (``_own_threads``, ``consistency_notes``), not by being alive
        self.thread_mark = None
        self.loop_started_ticks = armed.cpu_ticks
        if self.cpu_device:
            self.worker.pin_sandbox(self.worker.cpus or self.evidence.cpus)
        self.per_cpu_from = self.worker.cpu_ns_per_cpu() if self.cpu_device else None
        self.loop_started_ns = time.perf_counter_ns()
        self.active = True

    @property
    def takes_outputs(self) -> bool:
        """Whether the parent takes each timed call's outputs itself at its return (a real worker process:
        ``judge.taken``, from host memory on the CPU and through CUDA IPC handles on a GPU)."""
        return bool(getattr(self.worker, "takes_outputs", False))

    @property
    def outputs_limit(self) -> int:
        return wire.outputs_limit(self.outputs)

    def _own_threads(self) -> dict[int, int]:
        """CPU time (ns) of each live thread of the worker that is not kictl's own (started by the implementation's
        import, setup() or calls, or a library it uses), by tid, from ``/proc``."""
        kictl = self.worker.baseline_tids
        return {tid: ns for tid, ns in self.worker.thread_times().items() if tid not in kictl}

    def _threads_outside(self, between_calls: bool = True) -> dict[int, int]:
        """The implementation's threads now, just before a timed call's request (or at the end of the idle window):
        what they used since the worker's stop at its last call's return counts as work outside its calls
        (``THREAD_SHARE``)."""
        now = self._own_threads()
        if self.thread_mark is not None:
            grown = _grown(self.thread_mark, now)
            self.evidence.thread_outside_ns += grown
            self.evidence.thread_outside_wall_ns += time.perf_counter_ns() - self.thread_mark_ns
            if between_calls:
                self.evidence.thread_between_ns += grown
        return now

    def _threads_at_return(
        self, before: dict[int, int], at_answer: dict[int, int], stopped: dict[int, int] | None
    ) -> None:
        """The implementation's threads at a timed call's return (read while the worker is stopped, where it is):
        one started by the call and still alive fails ``noThreadsLeft`` (it would finish the call's work after the
        parent's clock stopped); what they used between the answer and the stop is counted
        (``THREAD_WINDOW_PER_CALL_NS``)."""
        after = stopped if stopped is not None else self._own_threads()
        born = [tid for tid in after if tid not in before]
        if born:
            self.evidence.note(
                Check.NO_THREADS_LEFT,
                f"{len(born)} thread(s) started by a timed call were alive when it returned",
            )
        if stopped is not None:
            self.evidence.thread_window_ns += _grown(at_answer, stopped)
        self.thread_mark = after
        self.thread_mark_ns = time.perf_counter_ns()

    def _while_stopped(self, stopped: dict[str, Any], audit: bool) -> None:
        """What the parent reads while the worker is stopped at a timed call's return: its threads' CPU time, and for
        an audited call the inputs the reference writes, from where the parent staged them (``Stager.read_back``:
        nothing the implementation runs after its return can write them for it)."""
        stopped.setdefault("threads", self._own_threads())
        if audit and self.written and self.stager is not None:
            try:
                stopped["written"] = self.stager.read_back()
            except (staging.StagingError, RuntimeError) as exc:
                stopped["written"] = f"its written inputs could not be read back: {exc}"

    def _took(
        self, answer: wire.Sample, read: bool, while_stopped: Callable[[], object] | None = None
    ) -> list[Any] | str | None:
        """The call's outputs as the parent takes them at its return (``taken.take``), and what it saw there
        itself: a worker that did not stop (``wireIntact``), outputs that are no plain CPU tensors
        (``plainTensorOutputs``), outputs lying in the timed inputs' memory (``outputsNotAliasInputs``)."""
        region = self.worker.inputs
        inode = os.fstat(region.fd).st_ino if region is not None else None
        found = taken.take(
            self.worker.worker_pid,
            answer,
            read,
            self.outputs_limit,
            inode,
            while_stopped,
            not self.cpu_device,
            self.device_inputs,
        )
        evidence = self.evidence
        if found.unstopped:
            assert isinstance(found.outputs, str)
            evidence.note(Check.WIRE_INTACT, found.outputs)
        if answer.outputs_error is not None:
            evidence.note(Check.PLAIN_TENSOR_OUTPUTS, f"a timed call {answer.outputs_error} (seen by kictl's parent)")
        for position in found.aliased:
            name = self.outputs[position].name if position < len(self.outputs) else str(position)
            evidence.note(
                Check.OUTPUTS_NOT_ALIAS_INPUTS,
                f"output {name} of a timed call lies in the timed inputs' memory (seen by kictl's parent)",
            )
        return found.outputs

    def _tensors(self, answer: wire.Outputs, where: str) -> list[Any] | str:
        if answer.error is not None:
            return answer.error
        try:
            return [unpack(item) for item in answer.tensors]
        except wire.WireError as exc:
            self.evidence.note(Check.WIRE_INTACT, f"{where}: {exc}")
            return f"outputs that are not tensors: {exc}"

    def _processes(self, when: str) -> None:
        view = self.worker.view()
        if view.processes:
            self.evidence.note(
                Check.NO_PROCESSES_LEFT, f"{len(view.processes)} process(es) besides the worker alive {when}"
            )

    def step(self, neighbours: Sequence[WorkerProcess] = ()) -> None:
        """One timed call (and its audit, if the parent draws one).  ``neighbours``' CPU share is idle while the
        call runs (``WorkerProcess.quiet``): nothing they run then can slow it."""
        if not self.active:
            return
        step_started = time.perf_counter_ns()
        evidence = self.evidence
        index = len(evidence.samples)
        perturb = 0
        if index > 0 and secrets.randbelow(index) < PROBE_WEIGHT:  # a probe: the last call's values, nearly
            chosen, shift = evidence.sets[-1], self.last_shift
            perturb = 1 + secrets.randbelow(SHIFTS - 1)
            evidence.probes[index] = perturb
        else:
            chosen = secrets.randbelow(len(self.timed_plans))
            shift = secrets.randbelow(SHIFTS)
        self.last_shift = shift
        worker = self.worker
        # an adaptive count judges every sample as it comes; a fixed count needs them only at the end
        settle = self.total_fixed is None or (index + 1) % SETTLE_EVERY == 0
        # the neighbours are quieted before the inputs are staged: between the staging and the request only the
        # parent's two readings below pass (tens of microseconds), and what the implementation does meanwhile
        # (with the call's values already in place) is outside the parent's clock (issue 40)
        for neighbour in neighbours:
            neighbour.quiet(True)
        try:
            if not self._stage(chosen, shift, perturb):
                return
            threads_before = self._threads_outside() if self.cpu_device else {}
            cpu_before = worker.cpu_ns() if self.cpu_device else 0
            if self.cpu_device and self.cpu_mark is not None:
                # the sandbox's CPU time since its last answer: kictl's checks of that call (after its answer), and
                # whatever of the implementation's ran while the parent staged or other workers were timed
                evidence.outside_cpu_ns += max(0, cpu_before - self.cpu_mark)
            started = time.perf_counter_ns()
            answer = self._ask(wire.Call(settle=settle), wire.Sample)
            wall = time.perf_counter_ns() - started
        finally:
            for neighbour in neighbours:
                neighbour.quiet(False)
        if answer is None:
            return
        assert isinstance(answer, wire.Sample)
        # whether this call is audited is drawn only now that it returned; on the CPU its outputs are taken at
        # once, the worker stopped, before anything of the implementation's can run again (judge.taken)
        audit = bool(perturb) or secrets.randbelow(index + 1) < AUDIT_WEIGHT
        outputs: list[Any] | str | None = None
        at_answer = self._own_threads() if self.cpu_device else {}
        stopped: dict[str, dict[int, int]] = {}
        if self.takes_outputs:
            outputs = self._took(answer, audit, partial(self._while_stopped, stopped, audit))
            if isinstance(outputs, list) and self.written:
                read = stopped.get("written", "its written inputs were not read back")
                outputs = [*outputs, *read] if isinstance(read, list) else str(read)
        if self.cpu_device:
            self._threads_at_return(threads_before, at_answer, stopped.get("threads"))
        self.call_number += 1
        if self.cpu_device:
            self.cpu_mark = worker.cpu_ns()
            evidence.call_cpu_ns += max(0, self.cpu_mark - cpu_before)
        others = worker.process_count()
        if others:  # a helper process could do the call's work (given the tensors through shared memory)
            evidence.note(
                Check.NO_PROCESSES_LEFT, f"{others} process(es) besides the worker alive when a timed call returned"
            )
        threads = worker.thread_count() if not self.cpu_device else 0
        if threads > self.threads_armed:  # a GPU's: on the CPU threads are judged by what they do (_threads_at_return)
            evidence.note(
                Check.NO_THREADS_LEFT,
                f"{threads - self.threads_armed} thread(s) more than before the timed calls were alive "
                "when a timed call returned",
            )
        if self.cpu_device:
            outside = worker.cpus_outside(worker.cpus or evidence.cpus)  # the CPUs it was given, re-checked (issue 40)
            if outside:
                evidence.note(Check.NO_WORK_OUTSIDE_CALLS, f"when a timed call returned, {outside}")
            self._other_cpus()
        if self._breached():
            return
        evidence.samples.append(0)
        evidence.worker_samples.append(0)
        evidence.walls.append(wall)
        evidence.sets.append(chosen)
        self.busy_ns += wall
        if answer.ns is None:
            self.waiting[self.call_number] = index
        else:
            self._sample(index, answer.ns, answer.events_ns, answer.kernels, answer.busy_ns)
        if not self._settled(answer.settled):
            return
        if settle and self.waiting:
            self._missing(len(self.waiting), "the answer that was to settle them")
            return
        if answer.enqueued_ahead is not None:
            self.ahead_known = True
            self.ahead += int(answer.enqueued_ahead)
        if audit and self.takes_outputs:
            assert outputs is not None
            evidence.audits.append((index, chosen, shift, outputs))
            self._inputs_unchanged("an audited timed call")
        elif audit:
            audit_from = worker.cpu_ns() if self.cpu_device else 0
            # a worker whose outputs the parent does not take (only a test's): the inputs the reference writes come
            # with its outputs
            audited = self._ask(wire.Audit(), wire.Outputs)
            if audited is None:
                return
            if self.cpu_device and self.cpu_mark is not None:
                # the audit's own copy is kictl's: it does not count as work outside the calls
                self.cpu_mark += max(0, worker.cpu_ns() - audit_from)
            assert isinstance(audited, wire.Outputs)
            evidence.audits.append((index, chosen, shift, self._tensors(audited, "an audited call")))
            self._inputs_unchanged("an audited timed call")
        self.step_ns += time.perf_counter_ns() - step_started
        if self._ending(index + 1):
            self._inputs_unchanged("the last timed call")
            self.active = False

    def _sample(self, index: int, ns: int, events_ns: int | None, kernels: int | None, busy_ns: int | None) -> None:
        evidence = self.evidence
        if self.cpu_device and PARENT_CLOCK_ON_CPU:
            # the CPU figure is the parent's own clock around the call, less the wire's round trip (the pings'
            # fastest, before the import); the worker's sample is only a cross-check (consistency_notes)
            evidence.worker_samples[index] = ns
            trip = min(evidence.pings_ns) if evidence.pings_ns else 0
            ns = max(1, evidence.walls[index] - trip)
        if ns < 0:
            evidence.note(Check.SAMPLES_CONSISTENT, f"a negative sample ({ns} ns)")
        evidence.samples[index] = max(0, ns)
        if events_ns is not None:
            evidence.events_ns.append(events_ns)
        if kernels is not None:
            evidence.kernels.append(kernels)
        if busy_ns is not None:
            # the time the call's activities cover lies within their span: more, or less than nothing, is forged
            if not 0 <= busy_ns <= ns:
                evidence.note(
                    Check.SAMPLES_CONSISTENT, f"a call's device busy time ({busy_ns} ns) outside its span ({ns} ns)"
                )
            evidence.busy_ns.append(min(max(0, busy_ns), max(0, ns)))

    def _settled(self, settled: Sequence[wire.Settled]) -> bool:
        """Take the samples of earlier calls settled in an answer; a number that names no call waiting for
        its sample (or names one twice) breaks the wire's protocol: the run ends, ``wireIntact``."""
        for item in settled:
            if item.call in self.warmup_calls:
                self.warmup_calls.discard(item.call)
            elif item.call in self.waiting:
                self._sample(self.waiting.pop(item.call), item.ns, item.events_ns, item.kernels, item.busy_ns)
            else:
                detail = f"the worker sent a sample for call {item.call}, which was not waiting for one"
                self.evidence.note(Check.WIRE_INTACT, detail)
                self.fail("reward_hack", f"wireIntact: {detail}")
                return False
        return True

    def _missing(self, count: int, where: str) -> None:
        detail = f"{count} call(s) got no sample in {where}"
        self.evidence.note(Check.WIRE_INTACT, detail)
        self.fail("reward_hack", f"wireIntact: {detail}")

    def _ending(self, count: int) -> bool:
        """Whether the timed calls have reached their count, target or budget (reason recorded)."""
        options = self.options
        if self.total_fixed is not None:
            if count >= self.total_fixed:
                self.evidence.stop_reason = f"fixed count of {self.total_fixed} timed calls"
                return True
            budget = options.time_budget_s
            if budget is not None and count >= MIN_CALLS_UNDER_BUDGET and self.busy_ns >= budget * 1e9:
                # the median's relative error is taken once every sample has come (finish_take)
                self.evidence.stop_reason = (
                    f"time budget of {budget:g} s spent after {count} of {self.total_fixed} timed calls"
                )
                return True
            return False
        if count >= options.max_calls:
            self.evidence.stop_reason = f"maximum of {options.max_calls} timed calls"
            return True
        # what the user waits for: on the CPU the parent's checks of a call cost it 2-4 ms beside a call of well
        # under one, so counting the requests alone made a 2 s budget a 20 s run (docs/bench.md, "What a session does")
        budget_spent = options.time_budget_s is not None and self.step_ns >= options.time_budget_s * 1e9
        if budget_spent and count >= MIN_CALLS_IN_BUDGET:
            self.evidence.relative_error = timing.median_relative_error(self.evidence.samples)
            self.evidence.stop_reason = f"time budget of {options.time_budget_s:g} s spent"
            return True
        if count < options.min_calls:
            return False
        error = timing.median_relative_error(self.evidence.samples)
        self.evidence.relative_error = error
        if options.target_relative_error is not None and error is not None and error <= options.target_relative_error:
            self.evidence.stop_reason = (
                f"median's relative error {error:.3g} <= target {options.target_relative_error:g}"
            )
            return True
        return False

    def finish(self) -> None:
        """End the timed calls: the worker's evidence, then what the OS shows of it while idle."""
        self.finish_calls()
        self.idle_begin()
        time.sleep(IDLE_WINDOW_S)
        self.idle_end()

    def finish_calls(self) -> None:
        """End the timed calls and take the worker's evidence (``idle_begin``/``idle_end`` watch it idle)."""
        self.finish_send()
        self.finish_take()

    def finish_send(self) -> None:
        """End the timed calls and ask for the worker's evidence (``finish_take`` takes it): the workers of a
        workload put their evidence together at once."""
        evidence = self.evidence
        self.release()  # nothing is staged after the timed calls (and the energy loops)
        if evidence.failure is not None:
            return
        self.active = False
        evidence.loop_ticks = self.worker.view().cpu_ticks - self.loop_started_ticks
        evidence.loop_wall_ns = time.perf_counter_ns() - self.loop_started_ns
        try:
            self.worker.send(wire.Finish())
        except WorkerGone as exc:
            self.fail("runtime_error", exc.detail or "the worker died")
            return
        self.finish_sent = True

    def finish_take(self) -> None:
        """The worker's evidence after the timed calls (asked for by ``finish_send``)."""
        evidence = self.evidence
        if not self.finish_sent or evidence.failure is not None:
            return
        self.finish_sent = False
        answer = self._take(wire.Finished)
        if answer is None:
            return
        assert isinstance(answer, wire.Finished)
        if not self._settled(answer.settled):
            return
        if self.waiting or self.warmup_calls:
            self._missing(len(self.waiting) + len(self.warmup_calls), "the worker's evidence after the timed calls")
            return
        evidence.device_spin_ns = answer.device_spin_ns
        evidence.enqueued_ahead = self.ahead if self.ahead_known else None
        evidence.relative_error = timing.median_relative_error(evidence.samples)
        self.finished = True

    def idle_begin(self) -> None:
        """Open the idle window: kictl holds the worker idle for ``IDLE_WINDOW_S`` (the windows of all
        drivers of a workload are open at once, so the wait is paid once per workload)."""
        self.idle_from = self.worker.view() if self.finished and self.evidence.failure is None else None
        if self.idle_from is not None and self.cpu_device and self.thread_mark is None:
            # counted from the last call's stop on: a run that ended early waits while the others are timed
            self.thread_mark = self._own_threads()
            self.thread_mark_ns = time.perf_counter_ns()

    def idle_end(self) -> None:
        """Close the idle window: CPU time, threads and processes the worker showed while held idle."""
        before = self.idle_from
        self.idle_from = None
        if before is None or self.evidence.failure is not None:
            return
        evidence = self.evidence
        after = self.worker.view()
        evidence.idle_ticks = max(0, after.cpu_ticks - before.cpu_ticks)
        if self.cpu_device:
            self._threads_outside(between_calls=False)  # the idle window is judged as between calls, by its work
        elif after.threads > self.threads_armed:
            evidence.note(
                Check.NO_THREADS_LEFT,
                f"{after.threads - self.threads_armed} thread(s) more than before the timed calls are alive after them",
            )
        if after.processes:
            evidence.note(
                Check.NO_PROCESSES_LEFT,
                f"{len(after.processes)} process(es) besides the worker are alive after the timed calls",
            )


def _grown(before: dict[int, int], after: dict[int, int]) -> int:
    """CPU time the threads of ``after`` used since ``before`` (a thread not in ``before``: all of its own)."""
    return sum(max(0, ns - before.get(tid, 0)) for tid, ns in after.items())


def interleave(drivers: Sequence[RunDriver]) -> None:
    """Timed calls taking turns across ``drivers`` until each has stopped."""
    while True:
        active = [driver for driver in drivers if driver.active]
        if not active:
            return
        for driver in active:
            driver.step([other.worker for other in drivers if other is not driver and other.worker.alive])


def consistency_notes(evidence: RunEvidence, cpu_device: bool, clock_ticks: int) -> None:
    """Judge the samples against what the parent saw (``samplesConsistent``, ``noWorkOutsideCalls``).

    On the CPU the figure is the parent's clock, and the worker's samples are held against it as a cross-check.
    """
    reported = evidence.worker_samples if cpu_device and evidence.worker_samples else evidence.samples
    longer = [
        (sample, wall)
        for sample, wall in zip(reported, evidence.walls, strict=False)
        if sample > wall + SAMPLE_SLACK_NS
    ]
    if longer:
        sample, wall = longer[0]
        evidence.note(
            Check.SAMPLES_CONSISTENT,
            f"{len(longer)} sample(s) longer than the parent's wall time around the call (e.g. {sample} ns "
            f"reported, {wall} ns seen)",
        )
    if cpu_device and len(reported) >= GAP_MIN_SAMPLES and evidence.pings_ns:
        # the best-placed call: scheduling delays on a loaded machine only ever add to the gap
        gap = min(wall - sample for sample, wall in zip(reported, evidence.walls, strict=False))
        allowed = GAP_BASE_NS + 4 * statistics.median(evidence.pings_ns)
        if gap > allowed:
            evidence.note(
                Check.SAMPLES_CONSISTENT,
                f"the parent saw every call take at least {gap / 1e6:.1f} ms more than the worker reported, "
                f"more than the wire explains ({allowed / 1e6:.1f} ms)",
            )
    if cpu_device and reported and evidence.call_cpu_ns > 0:
        # the worker's own samples against the sandbox's CPU time: a forged sample is a lie, whatever the figure
        cpu_ns = evidence.call_cpu_ns
        reported_sum = sum(reported)
        allowed_cpu = (
            evidence.threads_allowed * CPU_PER_SAMPLE_FACTOR * reported_sum
            + len(reported) * CPU_PER_CALL_NS
            + CPU_SLACK_NS
        )
        if cpu_ns > allowed_cpu:
            evidence.note(
                Check.SAMPLES_CONSISTENT,
                f"the worker's processes used {cpu_ns / 1e6:.0f} ms of CPU over {len(reported)} timed calls "
                f"whose samples add up to {reported_sum / 1e6:.1f} ms (at most {allowed_cpu / 1e6:.0f} ms expected)",
            )
    if cpu_device and evidence.call_cpu_ns > 0 and evidence.walls:
        # CPU time counted across the whole sandbox, against what the CPUs it was given can do in the calls' wall time
        given = len(evidence.cpus) or evidence.threads_allowed
        most = given * sum(evidence.walls) + len(evidence.walls) * OVER_WALL_PER_CALL_NS + OVER_WALL_SLACK_NS
        if evidence.call_cpu_ns > most:
            evidence.note(
                Check.NO_WORK_OUTSIDE_CALLS,
                f"the worker's processes used {evidence.call_cpu_ns / 1e6:.1f} ms of CPU in "
                f"{sum(evidence.walls) / 1e6:.1f} ms of timed calls on {given} CPU(s) given "
                f"(at most {most / 1e6:.1f} ms): a CPU it was not given",
            )
    if cpu_device and evidence.samples:
        # the implementation's own threads are judged by ``THREAD_SHARE`` of the wall between the calls (below): an
        # idle watchdog's wake-ups grow with that wall, which a loaded machine stretches.  What is left (kictl's
        # worker thread, a thread gone before the parent read it, any other process) may use only kictl's checks.
        threads_ns = min(evidence.thread_between_ns, evidence.outside_cpu_ns)
        rest_ns = evidence.outside_cpu_ns - threads_ns
        allowed_outside = len(evidence.samples) * OUTSIDE_PER_CALL_NS + OUTSIDE_SLACK_NS
        if rest_ns > allowed_outside:
            evidence.note(
                Check.NO_WORK_OUTSIDE_CALLS,
                f"the worker's processes used {rest_ns / 1e6:.0f} ms of CPU between its {len(evidence.samples)} "
                f"timed calls besides the {threads_ns / 1e6:.0f} ms of the implementation's threads (at most "
                f"{allowed_outside / 1e6:.0f} ms: kictl's checks)",
            )
    if cpu_device and evidence.loop_wall_ns > 0:
        loop_cpu_ns = evidence.loop_ticks * 1e9 / clock_ticks
        limit = evidence.threads_allowed * evidence.loop_wall_ns + 3e9 / clock_ticks
        if loop_cpu_ns > limit:
            evidence.note(
                Check.NO_WORK_OUTSIDE_CALLS,
                f"the worker's processes used {loop_cpu_ns / 1e9:.2f} s of CPU in "
                f"{evidence.loop_wall_ns / 1e9:.2f} s of timed calls with {evidence.threads_allowed} thread(s) allowed",
            )
    if cpu_device and evidence.thread_outside_ns > THREAD_SHARE * evidence.thread_outside_wall_ns + THREAD_SLACK_NS:
        evidence.note(
            Check.NO_THREADS_LEFT,
            f"threads the implementation left alive used {evidence.thread_outside_ns / 1e6:.1f} ms of CPU in "
            f"{evidence.thread_outside_wall_ns / 1e6:.0f} ms between its timed calls and after them (at most "
            f"{THREAD_SHARE:.0%} of it plus {THREAD_SLACK_NS / 1e6:.0f} ms: an idle thread's wake-ups)",
        )
    window_allowed = len(evidence.samples) * THREAD_WINDOW_PER_CALL_NS + THREAD_WINDOW_SLACK_NS
    if cpu_device and evidence.thread_window_ns > window_allowed:
        evidence.note(
            Check.NO_THREADS_LEFT,
            f"threads the implementation left alive used {evidence.thread_window_ns / 1e6:.1f} ms of CPU between "
            f"its timed calls' answers and the worker's stops at their returns (at most {window_allowed / 1e6:.1f} "
            "ms): work on the call's outputs after the parent's clock stopped",
        )
    if evidence.idle_ticks > IDLE_TICKS_ALLOWED:
        evidence.note(
            Check.NO_WORK_OUTSIDE_CALLS,
            f"the worker's processes used {evidence.idle_ticks * 1000 // clock_ticks} ms of CPU in "
            f"{IDLE_WINDOW_S * 1000:.0f} ms after the timed calls, while kictl held them idle",
        )
