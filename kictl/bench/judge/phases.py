"""Where a ``kictl bench`` session's wall time went, phase by phase.

A session spends its time in a few places that differ by orders of
magnitude from one definition to the next: starting the sandboxed workers
(bubblewrap, Python, torch, the CUDA context, CUPTI), importing the
implementations, the reference's outputs, the correctness rounds and
``setup()``, the timed calls, and building the records.  ``PhaseClock``
attributes the wall time of the parent (``time.perf_counter``) to named
phases so that ``kictl bench --timings`` can say which one to make faster.

Phases are exclusive: entering a phase inside another pauses the outer one,
so the phases add up to the time spent inside any phase.  Work that runs in
several threads at once (the workers' correctness rounds overlap) is
counted once, under the phase the parent was in while it waited for it.
Nothing here changes what is measured or recorded; the clock only reads
``time.perf_counter``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: The phases of a session, in the order they first happen (``PhaseClock.report`` keeps this order).
PHASES = (
    "resolve",  # the definition, workloads, implementations, the device
    "start",  # waiting for the workers' Ready (sandbox, Python, torch, device, CUPTI)
    "import",  # the wire's pings and the implementations' imports (Load)
    "inputs",  # planning each workload's inputs in the parent
    "prepare",  # reference outputs for the rounds, correctness rounds and setup(), overlapped
    "reference",  # the reference's outputs for the audited calls
    "warmup",  # the untimed calls before the timed ones
    "timed",  # the timed calls, interleaved across implementations
    "finish",  # the workers' evidence and the idle window after the timed calls
    "records",  # judging the evidence and building the records
    "stop",  # ending the workers
)


class PhaseClock:
    """Exclusive wall time per phase; safe to enter from one thread at a time (the session's own)."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self._stack: list[str] = []
        self._since = time.perf_counter()
        self._owner = threading.get_ident()

    def _charge(self, now: float) -> None:
        if self._stack:
            name = self._stack[-1]
            self.totals[name] = self.totals.get(name, 0.0) + (now - self._since)
        self._since = now

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Charge the time inside the block to ``name`` (pausing the phase it is nested in)."""
        if threading.get_ident() != self._owner:  # a helper thread's work is the waiting thread's phase
            yield
            return
        self._charge(time.perf_counter())
        self._stack.append(name)
        try:
            yield
        finally:
            self._charge(time.perf_counter())
            self._stack.pop()

    def report(self) -> dict[str, float]:
        """Seconds per phase that took any time, known phases first in session order, rounded to ms."""
        ordered = [name for name in PHASES if name in self.totals]
        ordered += sorted(name for name in self.totals if name not in PHASES)
        return {name: round(self.totals[name], 3) for name in ordered}


def format_phases(phases: dict[str, float], total: float | None = None) -> list[str]:
    """``timing <phase> <seconds>`` lines (and ``timing total``), as ``kictl bench --timings`` prints them."""
    width = max([len(name) for name in phases] + [5])
    lines = [f"timing {name:<{width}} {seconds:8.3f}" for name, seconds in phases.items()]
    if total is not None:
        lines.append(f"timing {'total':<{width}} {total:8.3f}")
    return lines


def format_requests(requests: dict[str, dict[str, list[int]]]) -> list[str]:
    """``request <implementation> <type> <count> <seconds> <mean ms>`` lines: the parent's wall time from
    sending each kind of request to a worker to taking its answer, summed over the session's runs."""
    lines = []
    for name, tallies in requests.items():
        for kind, (count, ns) in sorted(tallies.items(), key=lambda item: -item[1][1]):
            mean_ms = ns / count / 1e6 if count else 0.0
            lines.append(f"request {name} {kind} {count} {ns / 1e9:.3f} s {mean_ms:.3f} ms")
    return lines


def parse_phases(text: str) -> dict[str, float]:
    """The ``timing`` lines in ``text`` (e.g. kictl bench's stderr) as {phase: seconds}; other lines ignored."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "timing":
            try:
                found[parts[1]] = float(parts[2])
            except ValueError:
                continue
    return found
