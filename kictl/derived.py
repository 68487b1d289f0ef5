"""Figures a record's own evidence determines: derived by every reader, never taken as stated (issue 41).

A BenchmarkRun states statistics (``timing.latencyNs``) beside the samples
they come from (``timing.samples``), and an energy run states its energy per
call beside the trials it comes from (``energy.trials``).  A record whose
stated figure differs from what its own evidence gives contradicts itself;
whoever wrote it chose the figure.  So:

* every reader (``kictl leaderboard``, ``show``, ``site``, ``export``, the
  energy boards, ``kictl review``) takes its figures from this module, which
  derives them from the kept evidence, and never reads a stated figure that
  evidence determines;
* ``kictl review`` lints a record whose stated figure differs, naming the
  statistic or check with the stated and the derived figure
  (``timing-contradicts-samples``, ``energy-contradicts-trials``).

**Timing.**  The statistics of kept samples are ``kictl.bench.worker.timing.summarize``:
the one definition, used by ``kictl bench`` when it writes a run and here when
any reader reads one.  Mean is the arithmetic mean; median, p10 and p90 are
quantiles by linear interpolation between closest ranks (Hyndman & Fan type
7, numpy's default); min and max are the extreme samples; stdev is the
sample standard deviation (n − 1; 0 for one sample); each is rounded to
integer nanoseconds.  A stated statistic may differ from the derived one by
``ROUNDING_NS`` (an integer rounding), no more.  ``medianRelativeError`` (the
half-width of the median's ~95% distribution-free interval over the median,
``kictl.bench.worker.timing.median_relative_error``) may differ by its 6-decimal
rounding.  The noise ranking uses (half the 10–90 % band) is taken from the
samples too (``kictl.index.parsing.run_noise``).

**No samples kept.**  A run imported from another harness (FlashInfer-Bench
states a mean and no samples) or a hand-written record may carry no
``timing.samples``.  Its figures are then the stated ones, nothing can check
them, and the readers say so (``NO_SAMPLES_NOTE``); such a run ranks as
``reported`` at best (``cap_evidence``): even a verifier's agreeing rerun
cannot make its own stated figures evidence.

**Energy.**  Each trial's figures follow from its own watts and time:
``boardJoulesPerCall = boardWatts × loopNs / calls`` and ``joulesPerCall =
max(0, boardWatts − idleWatts) × loopNs / calls``; the run's figures are the
median of its trials' (``kictl.bench.energy.Figure``).  ``energy_checks`` names
each check (``energy_consistency``: ``energyTrials``, ``energyFromTrials``,
``energyPowerTimesTime``; ``energy_bounds``: ``energyAboveIdle``, ``energyAboveFloor``,
``energyBelowCeiling``), a failure with the stated and derived figures;
``energyPowerTimesTime`` compares the run's joules per call with its average
power × time per call within ``ENERGY_TOLERANCE``; ``energyAboveIdle`` asks for a
figure above idle greater than zero; the floor and the ceiling (power limit ×
time per call) are ``kictl.families.energy``'s, applied to the derived figures.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kictl.bench.worker.timing import STATISTICS, median_relative_error, summarize
from kictl.families.energy import bounds
from kictl.records import BenchmarkRunSpec, RunEnergy, Timing
from kictl.render import latency

if TYPE_CHECKING:
    from kictl.families import Work

#: A stated integer statistic may differ from the derived one by this much (a rounding), no more.
ROUNDING_NS = 1
#: The note every reader shows beside a run whose samples are not kept.
NO_SAMPLES_NOTE = "no samples kept: its figures are as stated and nothing checks them; it ranks as reported at best"
#: The strongest evidence level a run without kept samples can have (docs/trust.md levels).
NO_SAMPLES_LEVEL = "reported"
#: ``timing.medianRelativeError`` is written rounded to 6 decimal places.
RELATIVE_ERROR_ROUNDING = 1e-6
#: The review's lints (kictl.review._common.LINTS).
TIMING_LINT = "timing-contradicts-samples"
ENERGY_LINT = "energy-contradicts-trials"
#: Relative slack of floating-point figures recomputed from the same inputs (JSON keeps doubles exactly).
FLOAT_SLACK = 1e-6
#: ``energyPowerTimesTime``: the run's energy per call may differ from its average power × time per call by this
#: share of the board's energy per call (the median of products against the product of medians over trials).
ENERGY_TOLERANCE = 0.10

TRIALS_CHECK = "energyTrials"
MEDIAN_CHECK = "energyFromTrials"
POWER_TIME_CHECK = "energyPowerTimesTime"
ABOVE_IDLE_CHECK = "energyAboveIdle"
#: The self-consistency checks (a failure is ``ENERGY_LINT``); the physical bounds are ``ABOVE_IDLE_CHECK`` and
#: ``kictl.families.energy``'s floor and ceiling (a failure is ``energy-out-of-bounds``).
CONSISTENCY_CHECKS = (TRIALS_CHECK, MEDIAN_CHECK, POWER_TIME_CHECK)


# --------------------------------------------------------------------------- timing


@dataclass(frozen=True, slots=True)
class Contradiction:
    """A stated figure that is not what the record's own evidence gives."""

    what: str  # a statistic (``median``) or an energy figure (``joulesPerCall``)
    stated: float
    derived: float
    unit: str = "ns"

    def text(self) -> str:
        if self.unit == "ns":
            return f"{self.what} stated {latency(self.stated)} ({self.stated:g} ns), derived {latency(self.derived)}"
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.what} stated {self.stated:.6g}{unit}, derived {self.derived:.6g}{unit}"


@dataclass(frozen=True, slots=True)
class TimingFigures:
    """A run's latency statistics as readers use them: derived from its samples where kept, else as stated."""

    statistics: Mapping[str, int]
    primary_statistic: str
    #: how many samples are kept (0: none, the statistics are as stated)
    samples: int
    contradictions: tuple[Contradiction, ...]

    @property
    def from_samples(self) -> bool:
        return self.samples > 0

    @property
    def primary_ns(self) -> int | None:
        return self.statistics.get(self.primary_statistic)

    @property
    def note(self) -> str | None:
        return None if self.from_samples else NO_SAMPLES_NOTE

    def to_json(self) -> dict[str, object]:
        return {
            "latencyNs": dict(self.statistics),
            "primaryStatistic": self.primary_statistic,
            "samplesKept": self.samples,
            "source": "samples" if self.from_samples else "stated",
            "contradictions": [
                {"statistic": item.what, "stated": item.stated, "derived": item.derived} for item in self.contradictions
            ],
            "note": self.note,
        }


def timing_figures(timing: Timing) -> TimingFigures:
    """The statistics of ``timing`` derived from its kept samples (``summarize``), and what it states otherwise."""
    stated = {name: value for name in STATISTICS if (value := getattr(timing.latency_ns, name, None)) is not None}
    if not timing.samples:
        return TimingFigures(stated, timing.primary_statistic, 0, ())
    derived = summarize(timing.samples)
    found = [
        Contradiction(name, value, derived[name])
        for name, value in stated.items()
        if abs(value - derived[name]) > ROUNDING_NS
    ]
    if timing.median_relative_error is not None:  # the adaptive repetition's figure, rounded to 6 places by bench
        error = median_relative_error(timing.samples)
        if error is None or abs(round(error, 6) - timing.median_relative_error) > RELATIVE_ERROR_ROUNDING:
            found.append(Contradiction("medianRelativeError", timing.median_relative_error, error or 0.0, ""))
    return TimingFigures(derived, timing.primary_statistic, len(timing.samples), tuple(found))


def primary_ns(timing: Timing) -> int | None:
    """The run's primary statistic as readers use it (``timing_figures``)."""
    return timing_figures(timing).primary_ns


def cap_evidence(level: str, samples_kept: bool) -> str:
    """``level``, or ``NO_SAMPLES_LEVEL`` where it is stronger and the run keeps no samples."""
    if not samples_kept and level == "verified":
        return NO_SAMPLES_LEVEL
    return level


# --------------------------------------------------------------------------- energy


@dataclass(frozen=True, slots=True)
class EnergyFigures:
    """An energy run's figures derived from its trials (the median of each trial's own watts × time)."""

    joules_per_call: float
    board_joules_per_call: float
    average_watts: float
    idle_watts: float
    ns_per_call: float
    spread: float

    @property
    def calls_per_joule(self) -> float | None:
        return 1.0 / self.joules_per_call if self.joules_per_call > 0 else None


def _trial_figures(calls: int, loop_ns: int, board_watts: float, idle_watts: float) -> tuple[float, float, float]:
    """A trial's time per call (ns), joules per call above idle and on the board (``kictl.bench.energy.Trial``)."""
    per_call = loop_ns / calls
    return per_call, max(0.0, board_watts - idle_watts) * per_call / 1e9, board_watts * per_call / 1e9


def energy_figures(energy: RunEnergy) -> EnergyFigures:
    """The run's figures from its trials' watts and times, as ``kictl bench`` computes them."""
    per_trial = [
        _trial_figures(trial.calls, trial.loop_ns, trial.board_watts, trial.idle_watts) for trial in energy.trials
    ]
    joules = [item[1] for item in per_trial]
    middle = statistics.median(joules)
    return EnergyFigures(
        joules_per_call=middle,
        board_joules_per_call=statistics.median(item[2] for item in per_trial),
        average_watts=statistics.median(trial.board_watts for trial in energy.trials),
        idle_watts=statistics.median(trial.idle_watts for trial in energy.trials),
        ns_per_call=statistics.median(item[0] for item in per_trial),
        spread=(max(joules) - min(joules)) / middle if middle > 0 else 0.0,
    )


def _differs(stated: float, derived: float, scale: float) -> bool:
    """Whether two figures differ by more than a float's recomputation can (relative to ``scale`` near zero)."""
    return not math.isclose(stated, derived, rel_tol=FLOAT_SLACK, abs_tol=FLOAT_SLACK * abs(scale))


def _check(failures: list[Contradiction], passed: str) -> dict[str, str]:
    if failures:
        return {"result": "failed", "detail": "; ".join(item.text() for item in failures)}
    return {"result": "passed", "detail": passed}


def energy_consistency(energy: RunEnergy) -> dict[str, dict[str, str]]:
    """The self-consistency checks of an energy record by name (``result``: passed or failed; ``detail``).

    ``energyTrials``: each trial's joules per call (on the board and above idle) is its watts × time per call.
    ``energyFromTrials``: the run's figures are the median of its trials'.
    ``energyPowerTimesTime``: the run's joules per call (board, and above idle) against its average watts (less
    the idle draw) × time per call, within ``ENERGY_TOLERANCE`` of the board's figure.
    """
    out: dict[str, dict[str, str]] = {}
    bad: list[Contradiction] = []
    for number, trial in enumerate(energy.trials, start=1):
        _, joules, board = _trial_figures(trial.calls, trial.loop_ns, trial.board_watts, trial.idle_watts)
        if _differs(trial.joules_per_call, joules, board):
            bad.append(Contradiction(f"trial {number} joulesPerCall", trial.joules_per_call, joules, "J"))
        if _differs(trial.board_joules_per_call, board, board):
            bad.append(Contradiction(f"trial {number} boardJoulesPerCall", trial.board_joules_per_call, board, "J"))
    out[TRIALS_CHECK] = _check(bad, f"{len(energy.trials)} trial(s): joules per call = watts × loop time / calls")
    derived = energy_figures(energy)
    scale = derived.board_joules_per_call
    pairs: list[tuple[str, float, float, str, float]] = [
        ("joulesPerCall", energy.joules_per_call, derived.joules_per_call, "J", scale),
        ("boardJoulesPerCall", energy.board_joules_per_call, derived.board_joules_per_call, "J", scale),
        ("averageWatts", energy.average_watts, derived.average_watts, "W", derived.average_watts),
        ("idleWatts", energy.idle_watts, derived.idle_watts, "W", derived.average_watts),
        ("spread", energy.spread, derived.spread, "", 1.0),
    ]
    bad = [
        Contradiction(name, stated, value, unit)
        for name, stated, value, unit, near in pairs
        if _differs(stated, value, near)
    ]
    if abs(energy.ns_per_call - derived.ns_per_call) > ROUNDING_NS:
        bad.append(Contradiction("nsPerCall", energy.ns_per_call, derived.ns_per_call))
    inverse = derived.calls_per_joule
    if energy.calls_per_joule is not None and (inverse is None or _differs(energy.calls_per_joule, inverse, inverse)):
        bad.append(Contradiction("callsPerJoule", energy.calls_per_joule, inverse or 0.0, "1/J"))
    out[MEDIAN_CHECK] = _check(bad, "the run's figures are the median of its trials'")
    board = energy.average_watts * energy.ns_per_call / 1e9
    above = max(0.0, energy.average_watts - energy.idle_watts) * energy.ns_per_call / 1e9
    allowed = ENERGY_TOLERANCE * board
    bad = [
        Contradiction(f"{name} (against {formula})", stated, value, "J")
        for name, stated, value, formula in (
            ("boardJoulesPerCall", energy.board_joules_per_call, board, "averageWatts × nsPerCall"),
            ("joulesPerCall", energy.joules_per_call, above, "(averageWatts − idleWatts) × nsPerCall"),
        )
        if abs(stated - value) > allowed
    ]
    out[POWER_TIME_CHECK] = _check(bad, f"within {ENERGY_TOLERANCE:.0%} of power × time per call ({board:.4g} J)")
    return out


def energy_bounds(energy: RunEnergy, work: Work | None) -> dict[str, dict[str, str]]:
    """The physical checks of an energy record's derived figures by name (``result``, ``detail``).

    ``energyAboveIdle``: the figure above idle is greater than zero; ``energyAboveFloor`` and
    ``energyBelowCeiling`` (``kictl.families.energy``: the floor of ``work``, the power limit × time per call).
    """

    derived = energy_figures(energy)
    out: dict[str, dict[str, str]] = {}
    if derived.joules_per_call > 0:
        out[ABOVE_IDLE_CHECK] = {"result": "passed", "detail": f"{derived.joules_per_call:.4g} J per call above idle"}
    else:
        out[ABOVE_IDLE_CHECK] = {
            "result": "failed",
            "detail": f"{derived.joules_per_call:.4g} J per call above idle: the loops drew no more than the idle "
            "board, so nothing was measured",
        }
    found = bounds(work, energy.power_limit_milliwatts, derived.ns_per_call)
    out.update(found.checks(derived.joules_per_call, derived.board_joules_per_call))
    return out


def energy_checks(energy: RunEnergy, work: Work | None) -> dict[str, dict[str, str]]:
    """Every check of an energy record (``energy_consistency`` then ``energy_bounds``), by name."""
    return {**energy_consistency(energy), **energy_bounds(energy, work)}


def failed_checks(checks: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The names of the checks that failed, in order."""
    return [name for name, check in checks.items() if check.get("result") == "failed"]


# --------------------------------------------------------------------------- what ``kictl show`` says


def run_figures_json(spec: BenchmarkRunSpec) -> dict[str, object] | None:
    """The derived figures of a run (``kictl show --json``'s ``derived``), ``None`` for a run without timing."""
    out: dict[str, object] = {}
    if spec.timing is not None:
        out["timing"] = timing_figures(spec.timing).to_json()
    if spec.energy is not None:
        figures = energy_figures(spec.energy)
        checks = energy_consistency(spec.energy)
        out["energy"] = {
            "joulesPerCall": figures.joules_per_call,
            "boardJoulesPerCall": figures.board_joules_per_call,
            "averageWatts": figures.average_watts,
            "idleWatts": figures.idle_watts,
            "nsPerCall": figures.ns_per_call,
            "spread": figures.spread,
            "trials": len(spec.energy.trials),
            "contradicts": {name: checks[name]["detail"] for name in failed_checks(checks)},
        }
    return out or None


def run_figures_lines(spec: BenchmarkRunSpec) -> list[str]:
    """What ``kictl show`` prints about a run's figures: derived from what, and what its record contradicts."""

    lines = []
    if spec.timing is not None:
        figures = timing_figures(spec.timing)
        value = latency(figures.primary_ns)
        if figures.from_samples:
            lines.append(f"timing: {figures.primary_statistic} {value}, derived from {figures.samples} kept samples")
        else:
            lines.append(f"timing: {figures.primary_statistic} {value} as stated ({NO_SAMPLES_NOTE})")
        for item in figures.contradictions:
            lines.append(f"  CONTRADICTS ITS SAMPLES ({TIMING_LINT}): {item.text()}")
    if spec.energy is not None:
        energy = energy_figures(spec.energy)
        lines.append(
            f"energy: {energy.joules_per_call:.4g} J per call above idle, derived from {len(spec.energy.trials)} "
            "trial(s)' watts × time"
        )
        checks = energy_consistency(spec.energy)
        for name in failed_checks(checks):
            lines.append(f"  CONTRADICTS ITSELF ({ENERGY_LINT}): {name}: {checks[name]['detail']}")
    return lines
