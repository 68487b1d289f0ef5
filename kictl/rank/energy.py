"""Energy leaderboards (``kictl leaderboard --metric energy``, issue 31).

An energy run (comparability family ``kictl-nvml-energy``) ranks only against
energy runs of the same workload, GPU product, board power limit and family:
the *energy group*, whose key is the digest of those four values and the
metric.  Inside a group:

- only passed runs with an ``energy`` member rank, each implementation's best
  (fewest joules per call), at or above the evidence asked for;
- every figure is derived from the run's trials (``kictl.derived``: each
  trial's watts × time per call, the run's the median of its trials'), never
  read as stated; a run whose stated figures contradict its trials, or whose
  joules per call is not its average power × time per call, is left out and
  counted as ``contradicts``;
- a run outside the physical bounds (``kictl.derived.energy_bounds``: not
  above idle, below the energy floor of its workload's bytes and FLOPs, or
  above power limit × time per call) is left out and counted as
  ``outOfBounds``: it cannot be a measurement;
- the policy's ``energy`` section may require a power limit and steady clocks
  (``excluded.powerLimit``, ``excluded.clocks``);
- joules per call within the larger of the policy's energy tie tolerance and
  the runs' own trial spreads tie (the same rank);
- the Pareto front of joules per call against latency (the run's timed
  latency, cold L2) is marked: no other ranked run is both faster and cheaper.

Ranking rules of the latency boards live in ``ranking.py``; this module adds
nothing to them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kictl import canon
from kictl.derived import EnergyFigures, energy_bounds, energy_consistency, energy_figures, failed_checks
from kictl.errors import KictlError, NotFoundError, RecordError, RegistryError, UsageError
from kictl.families import Work
from kictl.index.facts import DefinitionFacts, RunFacts
from kictl.index.query import QueryIndex
from kictl.policy import EnergyPolicy, Policy
from kictl.rank._common import (
    DEFAULT_EVIDENCE,
    NO_EVIDENCE,
    check_evidence_level,
    evidence_rank,
    runs_and_evidence,
)
from kictl.rank.floors import resolve_gpu, workload_work
from kictl.rank.groups import stale_cutoff
from kictl.rank.history import _related, entry_times
from kictl.records import BenchmarkRunSpec, RunEnergy
from kictl.render import natural_key
from kictl.standing import cap_levels

ENERGY_FAMILY = "kictl-nvml-energy"
METRICS = ("latency", "energy")


def check_metric(metric: str) -> str:
    """``metric`` when it is one of ``METRICS``; raises ``UsageError`` (exit 2)."""

    if metric not in METRICS:
        raise UsageError(f"--metric {metric}: not one of {', '.join(METRICS)}")
    return metric


@dataclass(frozen=True, slots=True, order=True)
class EnergyKey:
    """The four values (and the metric) that make energy runs comparable."""

    workload: str
    gpu: str
    power_limit_mw: int
    comparability: str

    @property
    def digest(self) -> str:
        members = {
            "metric": "energy",
            "workload": self.workload,
            "gpu": self.gpu,
            "powerLimitMilliwatts": self.power_limit_mw,
            "comparabilityFamily": self.comparability,
        }
        return "sha256:" + canon.sha256_hex(canon.canonical_bytes(members))


@dataclass(frozen=True, slots=True)
class EnergyRow:
    """One implementation's best energy run in a group."""

    rank: int
    tied: bool
    run: RunFacts
    energy: RunEnergy
    #: the figures derived from the run's trials (``kictl.derived``): what the row shows and ranks by
    figures: EnergyFigures
    times_vs_first: float
    evidence: str
    stale: bool
    pareto: bool

    @property
    def implementation_label(self) -> str:
        return self.run.implementation_name or self.run.implementation

    @property
    def joules_per_call(self) -> float:
        return self.figures.joules_per_call

    def to_json(self) -> dict[str, Any]:
        energy = self.figures
        return {
            "rank": self.rank,
            "tied": self.tied,
            "implementation": self.implementation_label,
            "implementationDigest": self.run.implementation,
            "run": self.run.digest,
            "joulesPerCall": energy.joules_per_call,
            "boardJoulesPerCall": energy.board_joules_per_call,
            "callsPerJoule": energy.calls_per_joule,
            "averageWatts": energy.average_watts,
            "idleWatts": energy.idle_watts,
            "spread": energy.spread,
            "timesVsFirst": self.times_vs_first,
            "latencyNs": self.run.latency_ns,
            "pareto": self.pareto,
            "evidence": self.evidence,
            "observedAt": self.run.observed_at,
            "stale": self.stale,
        }


@dataclass(frozen=True, slots=True)
class EnergyGroup:
    """An energy group's leaderboard."""

    key: EnergyKey
    workload_name: str
    rows: tuple[EnergyRow, ...]
    excluded: dict[str, int]

    @property
    def leader(self) -> EnergyRow | None:
        return self.rows[0] if self.rows else None

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": "energy",
            "comparisonKey": self.key.digest,
            "workload": self.key.workload,
            "workloadName": self.workload_name,
            "gpu": self.key.gpu,
            "powerLimitMilliwatts": self.key.power_limit_mw,
            "comparabilityFamily": self.key.comparability,
            "excluded": self.excluded,
            "rows": [row.to_json() for row in self.rows],
        }


@dataclass(frozen=True, slots=True)
class EnergyBoard:
    """A definition's energy groups (optionally of one workload or GPU)."""

    definition: DefinitionFacts
    groups: tuple[EnergyGroup, ...]
    min_evidence: str

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": "energy",
            "definition": self.definition.name,
            "definitionDigest": self.definition.digest,
            "minEvidence": self.min_evidence,
            "groups": [group.to_json() for group in self.groups],
        }


def run_energy(index: QueryIndex, run: RunFacts) -> RunEnergy | None:
    """The ``energy`` member of a run's record (None where it has none or the record cannot be read)."""
    if run.comparability != ENERGY_FAMILY:
        return None
    try:
        record = index.load_record(run.digest)
    except (NotFoundError, RecordError, RegistryError):
        return None
    spec = record.model.spec
    return spec.energy if isinstance(spec, BenchmarkRunSpec) else None


def energy_key(run: RunFacts, energy: RunEnergy) -> EnergyKey | None:
    if run.gpu is None or run.comparability is None or energy.power_limit_milliwatts is None:
        return None
    return EnergyKey(run.workload, run.gpu, energy.power_limit_milliwatts, run.comparability)


def in_bounds(index: QueryIndex, definition: DefinitionFacts, run: RunFacts, energy: RunEnergy) -> bool:
    """Whether the figure lies between the energy floor and the power limit × time per call."""

    work: Work | None = None
    workload = index.workload(run.workload)
    if workload is not None:
        try:
            facts = workload_work(index, definition, workload)
            work = Work(facts.bytes, facts.flops, facts.compute_dtype)
        except KictlError:
            work = None
    return not failed_checks(energy_bounds(energy, work))


def bounds_of(index: QueryIndex, pairs: Sequence[tuple[RunFacts, RunEnergy]]) -> dict[str, bool]:
    """``in_bounds`` of each run (by digest); a run whose definition is unknown is judged without a work model."""
    out: dict[str, bool] = {}
    for run, energy in pairs:
        definition = index.definition(run.definition) if run.definition else None
        if definition is not None:
            out[run.digest] = in_bounds(index, definition, run, energy)
        else:
            out[run.digest] = not failed_checks(energy_bounds(energy, None))
    return out


def tie_allowance(tolerance: float, first_spread: float, second_spread: float) -> float:
    """The relative difference under which two energy figures tie: the policy's tolerance, or either run's own
    trial spread where larger."""
    return max(tolerance, first_spread, second_spread)


def joules_tie(first: float, first_spread: float, second: float, second_spread: float, tolerance: float) -> bool:
    """Whether two joules-per-call figures take the same rank on an energy board: they differ by no more than
    ``tie_allowance``, relative to the first (the leader)."""
    return abs(second - first) <= tie_allowance(tolerance, first_spread, second_spread) * max(first, 1e-30)


def _ties(a: EnergyRow | EnergyFigures, b: EnergyFigures, tolerance: float) -> bool:
    first = a.figures if isinstance(a, EnergyRow) else a
    return joules_tie(first.joules_per_call, first.spread, b.joules_per_call, b.spread, tolerance)


def pareto_front(points: Sequence[tuple[str, float, float]]) -> set[str]:
    """The names of the points (name, latency, joules) no other point beats on both (and on one strictly)."""
    front = set()
    for name, latency, joules in points:
        dominated = any(
            (other_latency <= latency and other_joules <= joules) and (other_latency < latency or other_joules < joules)
            for other, other_latency, other_joules in points
            if other != name
        )
        if not dominated:
            front.add(name)
    return front


def rank_energy_group(
    key: EnergyKey,
    runs: Sequence[tuple[RunFacts, RunEnergy]],
    *,
    policy: Policy,
    evidence: Mapping[str, str],
    now: datetime,
    min_evidence: str = DEFAULT_EVIDENCE,
    in_bounds_of: Mapping[str, bool] | None = None,
) -> EnergyGroup:
    """One energy group ranked by the rules in this module's docstring."""
    rules = policy.energy or EnergyPolicy()
    excluded = {
        "notPassed": 0, "evidence": 0, "contradicts": 0, "outOfBounds": 0, "powerLimit": 0, "clocks": 0, "notBest": 0,
    }  # fmt: skip
    evidence = cap_levels([run for run, _ in runs], evidence)  # no kept samples: reported at best (kictl.derived)
    eligible: list[tuple[RunFacts, RunEnergy]] = []
    figures = {run.digest: energy_figures(energy) for run, energy in runs}
    for run, energy in runs:
        level = evidence.get(run.digest, NO_EVIDENCE)
        if run.status != "passed":
            excluded["notPassed"] += 1
        elif evidence_rank(level) < evidence_rank(min_evidence):
            excluded["evidence"] += 1
        elif failed_checks(energy_consistency(energy)):
            excluded["contradicts"] += 1
        elif in_bounds_of is not None and not in_bounds_of.get(run.digest, True):
            excluded["outOfBounds"] += 1
        elif rules.power_limit_milliwatts is not None and energy.power_limit_milliwatts != rules.power_limit_milliwatts:
            excluded["powerLimit"] += 1
        elif rules.steady_clocks and energy.clocks_steady is not True:
            excluded["clocks"] += 1
        else:
            eligible.append((run, energy))
    eligible.sort(
        key=lambda item: (
            figures[item[0].digest].joules_per_call,
            -evidence_rank(evidence.get(item[0].digest, NO_EVIDENCE)),
            item[0].observed_at,
            item[0].digest,
        )
    )
    best: dict[str, tuple[RunFacts, RunEnergy]] = {}
    for run, energy in eligible:
        if run.implementation in best:
            excluded["notBest"] += 1
        else:
            best[run.implementation] = (run, energy)
    chosen = list(best.values())
    front = pareto_front(
        [
            (run.digest, float(run.latency_ns), figures[run.digest].joules_per_call)
            for run, _ in chosen
            if run.latency_ns
        ]
    )
    cutoff = stale_cutoff(policy, now)
    rows: list[EnergyRow] = []
    first = figures[chosen[0][0].digest].joules_per_call if chosen else 0.0
    leader: EnergyFigures | None = None
    for position, (run, energy) in enumerate(chosen, start=1):
        figure = figures[run.digest]
        tied = leader is not None and _ties(leader, figure, rules.tie_tolerance)
        if not tied:
            leader = figure
        rank = rows[-1].rank if tied else position
        rows.append(
            EnergyRow(
                rank=rank,
                tied=tied,
                run=run,
                energy=energy,
                figures=figure,
                times_vs_first=figure.joules_per_call / first if first > 0 else math.inf,
                evidence=evidence.get(run.digest, NO_EVIDENCE),
                stale=run.observed_at < cutoff,
                pareto=run.digest in front,
            )
        )
    name = runs[0][0].workload_name if runs and runs[0][0].workload_name else key.workload
    return EnergyGroup(key, name, tuple(rows), excluded)


def energy_runs(index: QueryIndex, runs: Sequence[RunFacts]) -> list[tuple[RunFacts, RunEnergy]]:
    """The runs of the energy family that carry an ``energy`` member, with it."""
    out: list[tuple[RunFacts, RunEnergy]] = []
    for run in runs:
        energy = run_energy(index, run)
        if energy is not None:
            out.append((run, energy))
    return out


def group_energy_runs(
    pairs: Sequence[tuple[RunFacts, RunEnergy]],
) -> dict[EnergyKey, list[tuple[RunFacts, RunEnergy]]]:
    groups: dict[EnergyKey, list[tuple[RunFacts, RunEnergy]]] = {}
    for run, energy in pairs:
        key = energy_key(run, energy)
        if key is not None:
            groups.setdefault(key, []).append((run, energy))
    return groups


def energy_leaderboard(
    index: QueryIndex,
    definition_ref: str,
    *,
    policy: Policy,
    gpu: str | None = None,
    workload: str | None = None,
    min_evidence: str = DEFAULT_EVIDENCE,
    evidence: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> EnergyBoard:
    """The energy groups of a definition (one workload's with ``workload``).

    Raises ``NotFoundError`` (exit 3) for an unknown definition or workload and ``UsageError`` (exit 2)
    for an unknown GPU or evidence level.
    """
    check_evidence_level(min_evidence)
    definition = index.resolve_definition(definition_ref)
    product = resolve_gpu(gpu, index.gpu_products()) if gpu is not None else None
    wanted = index.resolve_workload(definition.digest, workload).digest if workload is not None else None
    runs = [
        run
        for run in index.runs_of_definition(definition.digest)
        if run.comparability == ENERGY_FAMILY
        and (product is None or run.gpu == product)
        and (wanted is None or run.workload == wanted)
    ]
    if evidence is None:
        runs, evidence = runs_and_evidence(index.registry, runs)
    pairs = energy_runs(index, runs)
    bounds_ok = {run.digest: in_bounds(index, definition, run, energy) for run, energy in pairs}
    moment = now or datetime.now(UTC)
    groups = [
        rank_energy_group(
            key,
            members,
            policy=policy,
            evidence=evidence,
            now=moment,
            min_evidence=min_evidence,
            in_bounds_of=bounds_ok,
        )
        for key, members in sorted(
            group_energy_runs(pairs).items(),
            key=lambda item: (natural_key(item[1][0][0].workload_name or item[0].workload), item[0]),
        )
    ]
    return EnergyBoard(definition, tuple(group for group in groups if group.rows or workload), min_evidence)


# --------------------------------------------------------------------------- diff and history


def energy_record_diff(index: QueryIndex, before: str, after: str, *, policy: Policy) -> dict[str, Any] | None:
    """Two runs' energy figures compared (``kictl diff A B``): None unless both carry one.

    ``sameGroup``: the same workload, GPU, power limit and family; ``ratio`` is after / before joules per
    call; ``exceedsNoise`` whether they differ by more than the tie tolerance and their spreads.
    """
    runs = {run.digest: run for run in index.runs([before, after])}
    left, right = runs.get(before), runs.get(after)
    if left is None or right is None:
        return None
    left_energy, right_energy = run_energy(index, left), run_energy(index, right)
    if left_energy is None or right_energy is None:
        return None
    left_key, right_key = energy_key(left, left_energy), energy_key(right, right_energy)
    same = left_key is not None and left_key == right_key
    rules = policy.energy or EnergyPolicy()
    left_figures, right_figures = energy_figures(left_energy), energy_figures(right_energy)
    before_j, after_j = left_figures.joules_per_call, right_figures.joules_per_call
    ratio = after_j / before_j if before_j > 0 else None
    return {
        "sameGroup": same,
        "comparisonKey": left_key.digest if same and left_key is not None else None,
        "joulesPerCall": {"before": before_j, "after": after_j},
        "averageWatts": {"before": left_figures.average_watts, "after": right_figures.average_watts},
        "powerLimitMilliwatts": {
            "before": left_energy.power_limit_milliwatts,
            "after": right_energy.power_limit_milliwatts,
        },
        "ratio": ratio if same else None,
        "exceedsNoise": (not _ties(left_figures, right_figures, rules.tie_tolerance)) if same else None,
    }


def touches_energy(index: QueryIndex, run_digests: Sequence[str]) -> bool:
    """Whether any of these runs (as ``index`` knows them) is an energy run: only then is a diff's energy part
    worth the snapshots it needs."""
    return any(run.comparability == ENERGY_FAMILY for run in index.runs(list(run_digests)))


def energy_group_changes(
    before: QueryIndex, after: QueryIndex, run_digests: Sequence[str], *, policy: Policy
) -> list[dict[str, Any]]:
    """For ``kictl diff REV_A REV_B``: each energy group of the runs added or removed (``run_digests``), with its
    #1 before and after."""
    changed = set(run_digests)
    touched: set[EnergyKey] = set()
    for index in (before, after):
        for run, energy in energy_runs(index, index.runs(sorted(changed))):
            key = energy_key(run, energy)
            if key is not None:
                touched.add(key)
    if not touched:
        return []
    out = []
    moment = datetime.now(UTC)
    for key in sorted(touched):
        ranked = []
        for index in (before, after):
            pairs = [
                (run, energy)
                for run, energy in energy_runs(index, index.runs_of_workload(key.workload))
                if energy_key(run, energy) == key
            ]
            evidence = {run.digest: NO_EVIDENCE for run, _ in pairs}
            ranked.append(
                rank_energy_group(
                    key, pairs, policy=policy, evidence=evidence, now=moment, in_bounds_of=bounds_of(index, pairs)
                )
            )
        old_group, new_group = ranked
        old_leader, new_leader = old_group.leader, new_group.leader
        out.append(
            {
                "comparisonKey": key.digest,
                "workloadName": new_group.workload_name,
                "gpu": key.gpu,
                "powerLimitMilliwatts": key.power_limit_mw,
                "before": old_leader.to_json() if old_leader else None,
                "after": new_leader.to_json() if new_leader else None,
                "newFirst": (old_leader is None) != (new_leader is None)
                or (
                    old_leader is not None and new_leader is not None and old_leader.run.digest != new_leader.run.digest
                ),
                "rows": {"before": len(old_group.rows), "after": len(new_group.rows)},
            }
        )
    return out


def energy_history(index: QueryIndex, target: str, *, policy: Policy) -> dict[str, Any]:
    """For ``kictl history TARGET --metric energy``: how each energy group's #1 changed, commit by commit.

    Raises ``NotFoundError`` (exit 3) for an unknown target.
    """

    kind, digest, name = index.resolve_any(target)
    _, runs = _related(index, kind, digest)
    registry = index.registry
    added, order = entry_times(index)
    runs, evidence = runs_and_evidence(registry, [run for run in runs if run.comparability == ENERGY_FAMILY])
    groups_out = []
    pairs = energy_runs(index, runs)
    bounded = bounds_of(index, pairs)
    for key, members in sorted(group_energy_runs(pairs).items()):
        steps: dict[int, list[tuple[RunFacts, RunEnergy]]] = {}
        for pair in members:
            info = added.get(index.path_of(pair[0].digest) or "")
            steps.setdefault(order.get(info.sha, len(order)) if info else len(order), []).append(pair)
        seen: list[tuple[RunFacts, RunEnergy]] = []
        changes = []
        previous: EnergyRow | None = None
        for position in sorted(steps):
            seen.extend(steps[position])
            leader = rank_energy_group(
                key, seen, policy=policy, evidence=evidence, now=datetime.now(UTC), in_bounds_of=bounded
            ).leader
            if leader is None or (previous is not None and previous.run.digest == leader.run.digest):
                continue
            info = added.get(index.path_of(steps[position][0][0].digest) or "")
            changes.append(
                {
                    "commit": info.sha if info else None,
                    "date": info.date if info else None,
                    "author": info.author if info else None,
                    "implementation": leader.implementation_label,
                    "run": leader.run.digest,
                    "joulesPerCall": leader.joules_per_call,
                    "previousImplementation": previous.implementation_label if previous else None,
                    "previousJoulesPerCall": previous.joules_per_call if previous else None,
                }
            )
            previous = leader
        groups_out.append(
            {
                "metric": "energy",
                "comparisonKey": key.digest,
                "workload": key.workload,
                "workloadName": members[0][0].workload_name or key.workload,
                "gpu": key.gpu,
                "powerLimitMilliwatts": key.power_limit_mw,
                "comparabilityFamily": key.comparability,
                "firstOverTime": changes,
            }
        )
    return {"kind": kind, "digest": digest, "name": name, "metric": "energy", "groups": groups_out}
