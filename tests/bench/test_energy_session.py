"""``kictl bench --measure energy`` through the real harness on the CPU (issue 31).

NVML's energy counter cannot run here, so the one stand-in is ``StepCounter``: a counter that moves every
100 ms like the H200's (MEASURED.md), drawing the idle 85.6 W, and 560 W more while the parent's energy
loop request is in flight.  Everything else is real: the sandboxed worker, its loop, the audit, the record.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kictl.bench import wire
from kictl.bench.judge import energy, energy_loop
from kictl.bench.judge.session import BenchOptions, run_bench
from kictl.errors import EnvError
from kictl.records import BenchmarkProtocolSpec, BenchmarkRunSpec, RunEnergy
from kictl.store.registry import Registry
from tests.bench.conftest import IMPLEMENTATIONS, UNSANDBOXED, invoke

RMSNORM = "rmsnorm_h4096"
CHEAT = Path(__file__).resolve().parents[1] / "assets" / "energy" / "cheats" / "rmsnorm_idles_in_loops.py"
LAZY = CHEAT.with_name("rmsnorm_lazy_audit_in_loops.py")


class StepCounter:
    """A millijoule counter that steps every ``period_s``: ``idle_w`` always, ``busy_w`` more while busy.

    It integrates exactly: every change of ``busy`` (``set_busy``) and every read first credits the time since the
    last one at the draw then in force, and the shown value is the total at the last period boundary.  (Crediting
    a whole interval with the draw seen at the read made the figure depend on when the reads came: 590 W against
    645.6 in a full run at load 7.)
    """

    def __init__(self, idle_w: float = 85.6, busy_w: float = 560.0, period_s: float = 0.1) -> None:
        self.idle_w, self.busy_w, self.period_s = idle_w, busy_w, period_s
        self.busy = False
        self.busy_idle = False
        #: loop requests seen (``set_busy(True)``), and those (by number, from 1) in which every read comes late:
        #: the parent's poller held off the CPU, as on a loaded host.  Each read waits ``stall_share`` of the time
        #: since the loop began, so that a window's edge steps are known to about that share of it however long a
        #: loaded host makes the loop
        self.loops = 0
        self.stalled_loops: set[int] = set()
        self.stall_share = 0.15
        #: reads between loops (the idle window's, 0.6 s whatever the load) still to come ``idle_stall_s`` late
        self.stalled_idle_reads = 0
        self.idle_stall_s = 0.05
        self._lock = threading.Lock()
        self._period_ns = int(period_s * 1e9)
        self._start = time.perf_counter_ns()
        self._mj = 1_000_000_000.0
        self._shown = int(self._mj)
        self._last = self._start
        self._since = self._start  # when the last loop began or ended

    def _advance(self, now: int) -> None:
        """Credit ``_last`` to ``now`` at the present draw, showing the total at each period boundary passed."""
        watts = self.idle_w + (self.busy_w if self.busy else 0.0)
        boundary = self._start + ((self._last - self._start) // self._period_ns + 1) * self._period_ns
        while boundary <= now:
            self._mj += watts * (boundary - self._last) / 1e6
            self._last = boundary
            self._shown = int(self._mj)
            boundary += self._period_ns
        self._mj += watts * (now - self._last) / 1e6
        self._last = now

    def set_busy(self, busy: bool) -> None:
        with self._lock:
            self._advance(time.perf_counter_ns())
            self.busy = busy
            self.loops += busy
            self._since = self._last

    def read(self) -> energy.Poll:
        if self.busy and self.loops in self.stalled_loops:
            time.sleep(self.stall_share * (time.perf_counter_ns() - self._since) / 1e9)
        elif not self.busy and self.loops >= 2 and self.stalled_idle_reads > 0:  # after the two calibration loops
            self.stalled_idle_reads -= 1
            time.sleep(self.idle_stall_s)
        with self._lock:
            now = time.perf_counter_ns()
            self._advance(now)
            return energy.Poll(now, self._shown)

    def power_limit_mw(self) -> int:
        return 700_000

    def busy_percent(self) -> int:
        """NVML's utilisation: 100% while ``busy_idle`` (a kernel left running through the idle window)."""
        return 100 if self.busy_idle or self.busy else 0


@pytest.fixture
def counter(monkeypatch: pytest.MonkeyPatch) -> StepCounter:
    """The session's energy phase on the CPU with ``StepCounter`` in place of NVML."""
    made = StepCounter()
    original = energy_loop.EnergyPhase._loop

    def loop(self: Any, driver: Any, count: int, input_set: int, shift: int, found: Any = None) -> Any:
        # busy over the loop's request alone, as a GPU draws while the loop's kernels run: not while the parent
        # stages (on a loaded machine a staging descheduled for tens of ms put 761 W a call on a 560 W board)
        ask = driver._ask

        def busy_ask(request: Any, *expected: Any) -> Any:
            if not isinstance(request, wire.Loop):
                return ask(request, *expected)
            made.set_busy(True)
            try:
                return ask(request, *expected)
            finally:
                made.set_busy(False)

        driver._ask = busy_ask
        try:
            return original(self, driver, count, input_set, shift, found)
        finally:
            del driver._ask

    class CpuPhase(energy_loop.EnergyPhase):
        def __init__(self, device: str, counter: Any = None, **options: Any) -> None:
            super().__init__(device, made, **{**options, "idle_s": 0.6, "settle_s": 0.1})

    monkeypatch.setattr(energy_loop.EnergyPhase, "_loop", loop)
    monkeypatch.setattr("kictl.bench.judge.session.EnergyPhase", CpuPhase)
    return made


def test_an_energy_run_has_its_own_family_figure_checks_and_audit(
    shared_registry: Registry, counter: StepCounter
) -> None:
    options = BenchOptions(
        device="cpu",
        workloads=("b1",),
        rounds=1,
        warmup=1,
        iterations=5,
        trials=1,
        measure="energy",
        energy_loop_s=0.8,
        energy_trials=2,
        no_sandbox=bool(UNSANDBOXED),
    )
    impls = [str(IMPLEMENTATIONS / RMSNORM / "torch_rmsnorm"), str(CHEAT), str(LAZY)]
    report = run_bench(shared_registry, RMSNORM, impls, options)
    (summary,) = [run for run in report.runs if run.implementation.startswith("torch_rmsnorm")]
    # the cheat computes every staged call and skips the loop's repeated ones: the loop's audit finds it
    (cheat,) = [run for run in report.runs if run.implementation.startswith("rmsnorm_idles_in_loops")]
    assert cheat.status == "reward_hack", cheat.detail
    assert "timedOutputsCorrect" in (cheat.detail or "") or "outputsFullyWritten" in (cheat.detail or ""), cheat.detail
    # the lazy one keeps the loop's pace and would fill the loop's last outputs when an audit request is read:
    # the parent takes them at the loop's return, the worker stopped, before any request
    (lazy,) = [run for run in report.runs if run.implementation.startswith("rmsnorm_lazy_audit_in_loops")]
    assert lazy.status == "reward_hack", lazy.detail
    assert re.search(r"1 of \d+ audited timed calls were wrong", lazy.detail or ""), lazy.detail
    assert cheat.run is not None
    cheat_spec = cheat.run.model.spec
    assert isinstance(cheat_spec, BenchmarkRunSpec)
    assert cheat_spec.integrity is not None
    # every timed call (probes included) was right: only the loop's last call, audited, was not (its number
    # follows every timed call's)
    found_wrong = re.search(r"1 of \d+ audited timed calls were wrong: timed call (\d+)", cheat.detail or "")
    assert found_wrong is not None, cheat.detail
    assert cheat_spec.timing is not None
    assert int(found_wrong.group(1)) >= len(cheat_spec.timing.samples or ()), cheat.detail
    assert summary.status == "passed", summary.detail
    assert summary.run is not None
    spec = summary.run.model.spec
    assert isinstance(spec, BenchmarkRunSpec)
    found = spec.energy
    assert found is not None
    # the board drew 560 W above idle during the loops: joules per call = 560 W x the loop's time per call, to
    # within the figure's stated uncertainty (the counter's steps as the poller saw them; at most 4% a window)
    assert found.uncertainty <= 2 * energy.MAX_WINDOW_UNCERTAINTY
    assert found.average_watts == pytest.approx(645.6, rel=found.uncertainty + 0.01)
    assert found.idle_watts == pytest.approx(85.6, rel=0.03)
    assert found.joules_per_call == pytest.approx(560 * found.ns_per_call / 1e9, rel=0.05)
    assert found.counter_period_ms == pytest.approx(100, abs=3)
    assert len(found.trials) == 2
    assert found.power_limit_milliwatts == 700_000
    assert spec.integrity is not None
    for check in ("energyAboveFloor", "energyBelowCeiling", "timedOutputsCorrect"):
        assert spec.integrity[check].result == "passed", (check, spec.integrity[check])
    assert spec.integrity["energyLoopPace"].result == "skipped"  # the CPU's timed figure holds the wire
    # the loop's last call was audited with the timed calls' audits
    assert "audited" in (spec.integrity["timedOutputsCorrect"].detail or "")
    # what `kictl bench` prints of it: the record's member under --json, four columns in the table
    from kictl.cli.bench import _energy_cells, _energy_json

    assert _energy_json(summary)["energy"]["joulesPerCall"] == found.joules_per_call  # type: ignore[index]
    cells = _energy_cells(summary)
    assert cells[1] == f"{found.average_watts:.0f}"
    assert cells[0].endswith("J")
    protocols = [r for r in report.records if r.kind == "BenchmarkProtocol"]
    assert protocols
    protocol = protocols[0].model.spec
    assert isinstance(protocol, BenchmarkProtocolSpec)
    assert protocol.comparability.family == "kictl-nvml-energy"
    assert protocol.measurement.energy is not None
    assert "nvmlDeviceGetTotalEnergyConsumption" in protocol.measurement.energy.method


def test_no_energy_counter_is_an_environment_error(shared_registry: Registry, tmp_path: Path) -> None:
    with pytest.raises(EnvError, match=r"no energy counter|has none"):
        energy_loop.EnergyPhase("cpu")
    result = invoke(
        "bench", RMSNORM, "--impl", IMPLEMENTATIONS / RMSNORM / "torch_rmsnorm", "--device", "cpu",
        "--measure", "energy", "--registry", shared_registry.root, "--out", tmp_path, *UNSANDBOXED,
    )  # fmt: skip
    assert result.exit_code == 5, result.output
    assert "does not estimate energy from power samples" in result.output


def test_measure_and_its_options_are_checked(shared_registry: Registry, tmp_path: Path) -> None:
    impl = str(IMPLEMENTATIONS / RMSNORM / "torch_rmsnorm")
    base = ("bench", RMSNORM, "--impl", impl, "--device", "cpu", "--registry", str(shared_registry.root))
    assert invoke(*base, "--measure", "joules").exit_code == 2
    assert invoke(*base, "--measure", "energy", "--timer", "cupti").exit_code == 2
    assert invoke(*base, "--measure", "energy", "--energy-loop", "0.2").exit_code == 2


def test_an_idle_window_that_is_not_idle_measures_nothing(shared_registry: Registry, counter: StepCounter) -> None:
    # a kernel left running through the idle window (NVML reads the GPU busy) would raise the idle draw that
    # every figure is net of: the run gets no figure
    counter.busy_idle = True
    options = BenchOptions(
        device="cpu", workloads=("b1",), rounds=1, warmup=1, iterations=3, trials=1, measure="energy",
        energy_loop_s=0.8, energy_trials=1, no_sandbox=bool(UNSANDBOXED),
    )  # fmt: skip
    report = run_bench(shared_registry, RMSNORM, [str(IMPLEMENTATIONS / RMSNORM / "torch_rmsnorm")], options)
    (summary,) = [run for run in report.runs if run.implementation.startswith("torch_rmsnorm")]
    assert summary.status == "runtime_error"
    assert "busy 100% of the idle window" in (summary.detail or "")


def _one_energy_run(registry: Registry, trials: int) -> Any:
    options = BenchOptions(
        device="cpu", workloads=("b1",), rounds=1, warmup=1, iterations=3, trials=1, measure="energy",
        energy_loop_s=0.8, energy_trials=trials, no_sandbox=bool(UNSANDBOXED),
    )  # fmt: skip
    report = run_bench(registry, RMSNORM, [str(IMPLEMENTATIONS / RMSNORM / "torch_rmsnorm")], options)
    (summary,) = [run for run in report.runs if run.implementation.startswith("torch_rmsnorm")]
    return summary


def _figure_unless_too_loaded(summary: Any) -> RunEnergy | None:
    """A run's energy figure; ``None`` where the host itself was too loaded for the windows measured again: then the
    run is ``runtime_error`` saying so, never a check's verdict."""
    if summary.status == "runtime_error":
        assert "seen too late to time the window" in (summary.detail or ""), summary.detail
        return None
    assert summary.status == "passed", summary.detail
    spec = summary.run.model.spec
    assert isinstance(spec, BenchmarkRunSpec)
    assert spec.energy is not None
    return spec.energy


def test_a_loop_the_poller_saw_too_late_is_run_again(shared_registry: Registry, counter: StepCounter) -> None:
    # the first trial's loop (loops 1 and 2 calibrate) is polled late at every read: its window's edge steps are
    # known to about 7% of it each, more than 4%. Taken as it is, a board's watts could read above its power limit
    # and an honest run fail `energyBelowCeiling` (seen at load 20): the loop is made again instead
    counter.stalled_loops = {3}
    summary = _one_energy_run(shared_registry, trials=1)
    assert counter.loops >= 4  # the stalled loop and the one made again
    found = _figure_unless_too_loaded(summary)
    if found is None:
        return
    assert len(found.trials) == 1
    # the loop kept is not the stalled one: its window is timed to 4% (the trial's figure adds the idle window's)
    assert found.trials[0].uncertainty <= 2 * energy.MAX_WINDOW_UNCERTAINTY


def test_loops_always_seen_too_late_measure_nothing(shared_registry: Registry, counter: StepCounter) -> None:
    # a host loaded all through the trials: no figure, and the run is not called a cheat
    counter.stalled_loops = set(range(3, 50))
    summary = _one_energy_run(shared_registry, trials=1)
    assert summary.status == "runtime_error", summary.detail
    # the stalled loops' refusal; under a loaded CI (stop 57's fresh clone) the idle window's check saw the same
    # load first and refused with its own reason: either way no figure, and no cheat named
    detail = summary.detail or ""
    assert "seen too late to time the window" in detail or "too short for the counter's update period" in detail


def test_an_idle_window_the_poller_saw_too_late_is_watched_again(
    shared_registry: Registry, counter: StepCounter
) -> None:
    # an idle draw read high would take a small kernel's joules to zero, below its floor: the window is watched
    # again (the first, 0.6 s here, takes about 12 of these stalled reads), and a host loaded all through fails
    counter.stalled_idle_reads = 12
    summary = _one_energy_run(shared_registry, trials=1)
    assert counter.stalled_idle_reads == 0
    found = _figure_unless_too_loaded(summary)
    if found is None:
        return
    assert found.uncertainty <= 2 * energy.MAX_WINDOW_UNCERTAINTY
    assert found.idle_watts == pytest.approx(85.6, rel=found.uncertainty + 0.01)
    counter.stalled_idle_reads, counter.loops = 10_000, 0
    summary = _one_energy_run(shared_registry, trials=1)
    assert summary.status == "runtime_error", summary.detail
    assert "idle windows the energy counter's steps were seen too late" in (summary.detail or "")
