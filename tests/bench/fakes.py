"""A fake worker: the wire's requests answered in-process, for the session's bookkeeping tests.

``FakeWorker`` has the parent-side interface of ``runner.WorkerProcess`` (spawn, wait_ready, request,
view, stop) and answers each request as a real worker would, computing RMSNorm with torch on the
values the request describes; a ``Behaviour`` makes it misbehave at one request type, the way a
hostile implementation's worker can (fail, die, break the wire, hang).  No process is started, so a
whole session runs in well under a second of work per run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from kictl.bench import wire
from kictl.bench.judge.inputs import materialize_spec
from kictl.bench.judge.runner import CRASHED, PROTOCOL, TIMEOUT, ImplementationFailed, ProcessView, WorkerGone
from kictl.bench.wire.values import _rolled
from kictl.bench.worker.main import pack

ENVIRONMENT = {
    "hardware": {"product": "Fake CPU", "architecture": "x86_64", "cpu": "Fake CPU"},
    "software": {"framework": {"name": "torch", "version": torch.__version__}},
}


def rmsnorm(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)


@dataclass
class Behaviour:
    """How a fake worker answers: ``compute`` makes the outputs; ``at`` names a request type to misbehave at."""

    compute: Callable[..., torch.Tensor] = rmsnorm
    at: str | None = None
    #: failed (compile_error / runtime_error), crashed, protocol, timeout, or raise (kictl's own bug)
    how: str = "runtime_error"
    #: a failure's detail, where not the fake's own ("fake runtime_error at ...")
    detail: str | None = None
    #: how many times it misbehaves at ``at`` before it answers as asked (None: every time)
    times: int | None = None
    sample_ns: int = 1000
    requests: list[str] = field(default_factory=list)
    #: seconds each request of a type takes (a slow import, a slow correctness call)
    delays: dict[str, float] = field(default_factory=dict)
    #: samples settled in batches, as the CUPTI timer settles them: a call not asked to settle answers
    #: ``ns=None`` and its sample comes with a later answer (``wire.Settled``)
    batched: bool = False
    #: how a hostile worker forges the settled samples: "unknown" (a call number never made), "twice" (one
    #: call settled again), "never" (the waiting calls dropped), "warmup" (the warm-up calls' dropped)
    forge: str | None = None
    #: the ns each call number was settled with (timed and warm-up), for the tests to compare
    settled: dict[int, int] = field(default_factory=dict)
    #: the CUPTI timer's figures beside each sample, as ``(events ns, kernels, busy ns)`` less the sample's ns
    #: for the two times (``busy`` above 0 is a forgery: busy time beyond the span)
    device_figures: tuple[int, int, int] | None = None


class FakeWorker:
    """``runner.WorkerProcess``'s interface, answered in-process."""

    def __init__(self, label: str, behaviour: Behaviour) -> None:
        self.label = label
        self.behaviour = behaviour
        self.alive = False
        self.loaded = False
        self.pings_ns: list[int] = []
        self.pinned: tuple[tuple[int, ...], int] | None = ((0,), 1)
        self.baseline_threads = 1
        self.timers: tuple[str, ...] = ()
        self.cupti_error: str | None = None
        self.dependencies_error: str | None = None
        self.environment: dict[str, Any] | None = None
        self.starts = 0
        self.sets: list[list[Any]] = []
        self.staged: list[Any] = []
        self.rolled: list[bool] = []
        self.last: list[Any] = []
        self.pending: wire.Message | None = None
        self.calls = 0
        self.waiting: list[int] = []
        #: no inputs region: the fake stages its inputs itself (``Stage`` requests), as a GPU worker does
        self.inputs: wire.SharedRegion | None = None
        self.output_limit = wire.MAX_BUFFER_BYTES

    def spawn(self) -> None:
        self.alive = True
        self.loaded = False
        self.pings_ns = []
        self.starts += 1

    def wait_ready(self) -> dict[str, Any]:
        self.environment = dict(ENVIRONMENT)
        return self.environment

    def start(self) -> dict[str, Any]:
        self.spawn()
        return self.wait_ready()

    def stop(self) -> None:
        self.alive = False

    def ask_to_stop(self) -> None:
        return None

    def view(self) -> ProcessView:
        return ProcessView(cpu_ticks=0, threads=1, processes=(), cpu_ns=0)

    #: no process whose memory the parent could read (``runner.WorkerProcess.worker_pid``)
    worker_pid: int | None = None
    #: the CPUs it was given (``runner.WorkerProcess.cpus``): none pinned
    cpus: tuple[int, ...] = ()

    def cpu_ns_per_cpu(self) -> dict[int, int] | None:
        """A fake keeps no CPU time per CPU (``runner.WorkerProcess.cpu_ns_per_cpu``)."""
        return None

    def cpus_outside(self, given: tuple[int, ...]) -> str | None:
        return None

    def breaches(self) -> list[str]:
        """The limits its sandbox ran into (``runner.WorkerProcess.breaches``): a fake has no sandbox."""
        return []

    def thread_count(self) -> int:
        return 1

    #: kictl's own threads when the worker was ready (``runner.WorkerProcess.baseline_tids``): a fake has none
    baseline_tids: frozenset[int] = frozenset()

    def thread_times(self) -> dict[int, int]:
        """No OS threads to read (``runner.WorkerProcess.thread_times``)."""
        return {}

    def process_count(self) -> int:
        return 0

    def cpu_ns(self) -> int:
        return 0

    def quiet(self, idle: bool) -> None:
        """Nothing to quiet (``runner.WorkerProcess.quiet``): a fake has no cgroup."""

    def pin_sandbox(self, cpus: tuple[int, ...]) -> None:
        pass

    def send(self, message: wire.Message) -> None:
        """Hold the request: ``receive`` answers it (a misbehaviour shows there, as over a real wire)."""
        if not self.alive:
            self.start()
        self.pending = message

    def receive(self, timeout: float, expect: frozenset[str]) -> wire.Message:
        message, self.pending = self.pending, None
        assert message is not None, "receive without send"
        return self.request(message, timeout, expect)

    def _misbehave(self) -> None:
        how = self.behaviour.how
        self.alive = False
        if how in ("compile_error", "runtime_error"):
            raise ImplementationFailed(how, self.behaviour.detail or f"fake {how} at {self.behaviour.at}")
        if how == "crashed":
            raise WorkerGone(CRASHED, "the worker was killed by SIGSEGV")
        if how == "protocol":
            raise WorkerGone(PROTOCOL, "the worker broke the wire protocol: unknown member 'exec'")
        if how == "timeout":
            raise WorkerGone(TIMEOUT, "no answer within 1 s; the worker was stopped")
        raise RuntimeError("a bug in kictl's own code")

    def request(self, message: wire.Message, timeout: float, expect: frozenset[str]) -> wire.Message:
        if not self.alive:
            self.start()
        self.behaviour.requests.append(message.TYPE)
        if message.TYPE in self.behaviour.delays:
            time.sleep(self.behaviour.delays[message.TYPE])
        if message.TYPE == self.behaviour.at and self.behaviour.times != 0:
            if self.behaviour.times is not None:
                self.behaviour.times -= 1
            self._misbehave()
        compute = self.behaviour.compute
        if isinstance(message, wire.Ping):
            return wire.Pong()
        if isinstance(message, wire.Load):
            return wire.Loaded(has_setup=False)
        if isinstance(message, wire.Reference):
            made = [materialize_spec(spec, "cpu") for spec in message.plan.inputs]
            args = [
                _rolled(v, message.shift, k) if spec.kind == "random" else v
                for k, (v, spec) in enumerate(zip(made, message.plan.inputs, strict=True))
            ]
            return wire.Outputs(tensors=(pack(rmsnorm(*args)),), error=None, notes=())
        if isinstance(message, wire.Check):
            args = [materialize_spec(spec, "cpu") for spec in message.plan.inputs]
            return wire.Outputs(tensors=(pack(compute(*args)),), error=None, notes=())
        if isinstance(message, wire.Arm):
            self.calls, self.waiting = 0, []
            self.sets = [[materialize_spec(spec, "cpu") for spec in plan.inputs] for plan in message.timed_plans]
            self.rolled = [spec.kind == "random" for spec in message.setup_plan.inputs]
            return wire.Armed(notes=())
        if isinstance(message, wire.Stage):
            self.staged = [
                _rolled(v, message.shift, k) if roll else v
                for k, (v, roll) in enumerate(zip(self.sets[message.input_set], self.rolled, strict=True))
            ]
            return wire.Staged()
        if isinstance(message, wire.Call):
            self.last = [compute(*self.staged)]
            self.calls += 1
            if self.behaviour.batched and not message.settle:
                self.waiting.append(self.calls)
                return wire.Sample(ns=None, enqueued_ahead=None, notes=())
            ns = self._ns(self.calls)
            figures = self._figures(ns)
            return wire.Sample(
                ns=ns,
                enqueued_ahead=None,
                notes=(),
                settled=self._settle(),
                events_ns=figures.get("events_ns"),
                kernels=figures.get("kernels"),
                busy_ns=figures.get("busy_ns"),
            )
        if isinstance(message, wire.Audit):
            return wire.Outputs(tensors=tuple(pack(t) for t in self.last), error=None, notes=())
        if isinstance(message, wire.Finish):
            return wire.Finished(notes=(), device_spin_ns=None, settled=self._settle())
        raise AssertionError(f"unexpected {message.TYPE}")

    def _ns(self, call: int) -> int:
        """Each call's sample: ``sample_ns``; when batched, plus its number, so that a sample filed under the wrong
        call shows."""
        self.behaviour.settled[call] = self.behaviour.sample_ns + (call if self.behaviour.batched else 0)
        return self.behaviour.settled[call]

    def _figures(self, ns: int) -> dict[str, int]:
        """The CUPTI timer's cross-check figures of a call whose span is ``ns`` (none unless asked for)."""
        if self.behaviour.device_figures is None:
            return {}
        events, kernels, busy = self.behaviour.device_figures
        return {"events_ns": ns + events, "kernels": kernels, "busy_ns": ns + busy}

    def _settle(self) -> tuple[wire.Settled, ...]:
        waiting, self.waiting = self.waiting, []
        forge = self.behaviour.forge
        if forge == "never" or (forge == "warmup" and waiting == [1]):
            return ()
        figures = {call: self._ns(call) for call in waiting}
        settled = [wire.Settled(call=call, ns=ns, **self._figures(ns)) for call, ns in figures.items()]
        if forge == "unknown" and settled:
            settled.append(wire.Settled(call=self.calls + 7, ns=1))
        if forge == "twice" and settled:
            settled.append(settled[0])
        return tuple(settled)
