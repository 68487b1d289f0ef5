"""Ranking one comparison group: order, ties within the noise, staleness, evidence, the speed-up over
the reference.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from kictl.derived import NO_SAMPLES_NOTE
from kictl.index.facts import DefinitionFacts, RunFacts
from kictl.lookup import fold_name
from kictl.policy import Policy
from kictl.rank._common import _EVIDENCE_ORDER, DEFAULT_EVIDENCE, NO_EVIDENCE, evidence_rank
from kictl.rank.floors import FloorEstimate
from kictl.rank.groups import GroupKey, group_of, is_reference, stale_cutoff, ties
from kictl.standing import cap_levels


@dataclass(frozen=True, slots=True)
class RankedRow:
    """One implementation's best run in a group, with its rank."""

    rank: int
    run: RunFacts
    latency_ns: int
    times_vs_first: float
    speedup_over_reference: float | None
    speedup_source: str | None  # "group" (a reference run in the group) or "sourceNative"
    evidence: str
    stale: bool
    below_floor: bool | None  # None where no floor is known
    tied: bool  # shares its rank with the row above
    #: another row of the group shows a name that folds to this one's (``kictl.lookup.fold_name``): the label
    #: then carries the implementation's digest, so that no row can pass for another
    ambiguous: bool = False
    #: the open harness advisories that mark the run (docs/advisories.md); ranked by the policy's advisedRuns
    advisories: tuple[str, ...] = ()

    @property
    def implementation_label(self) -> str:
        name = self.run.implementation_name or self.run.implementation
        if self.ambiguous:
            return f"{name}@{self.run.implementation.removeprefix('sha256:')[:12]}"
        return name

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document of this result (stdlib ``json`` types only)."""
        run = self.run
        return {
            "rank": self.rank,
            "tied": self.tied,
            "implementation": self.implementation_label,
            "implementationDigest": run.implementation,
            "run": run.digest,
            "latencyNs": self.latency_ns,
            "timesVsFirst": self.times_vs_first,
            "speedupOverReference": self.speedup_over_reference,
            "speedupSource": self.speedup_source,
            "evidence": self.evidence,
            "observedAt": run.observed_at,
            "stale": self.stale,
            "belowFloor": self.below_floor,
            "noiseNs": run.noise_ns,
            "noiseSource": run.noise_source or "policy",
            "committed": run.committed,
            "advisories": list(self.advisories),
            "samplesKept": run.samples,
            "note": self.note,
        }

    @property
    def note(self) -> str | None:
        """What a reader must know about the row's figure: none kept samples back it (``kictl.derived``)."""
        return NO_SAMPLES_NOTE if self.run.samples == 0 else None


@dataclass(frozen=True, slots=True)
class RankedGroup:
    """A comparison group's leaderboard."""

    key: GroupKey
    workload_name: str
    rows: tuple[RankedRow, ...]
    reference_ns: int | None
    floor: FloorEstimate | None
    excluded: dict[str, int]  # runs left out and why: not passed, evidence, not best of their implementation

    @property
    def comparison_key(self) -> str:
        return self.key.digest

    @property
    def leader(self) -> RankedRow | None:
        return self.rows[0] if self.rows else None

    @property
    def record_above_floor(self) -> float | None:
        """How many times above the floor the group's record is."""
        if not self.rows or self.floor is None or self.floor.floor_ns <= 0:
            return None
        return self.rows[0].latency_ns / self.floor.floor_ns

    def first(self) -> list[RankedRow]:
        """Every row ranked #1 (several when they tie)."""
        return [row for row in self.rows if row.rank == 1]

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document of this result (stdlib ``json`` types only)."""
        return {
            "comparisonKey": self.comparison_key,
            "workload": self.key.workload,
            "workloadName": self.workload_name,
            "gpu": self.key.gpu,
            "comparabilityFamily": self.key.comparability,
            "primaryStatistic": self.key.statistic,
            "referenceLatencyNs": self.reference_ns,
            "floor": self.floor_json(),
            "excluded": self.excluded,
            "rows": [row.to_json() for row in self.rows],
        }

    def floor_json(self) -> dict[str, Any] | None:
        """The group's physical floor and how far its record is above it, as JSON; ``None`` without a floor."""
        if self.floor is None:
            return None
        return {
            **self.floor.to_json(),
            "method": self.floor.method,
            "recordAboveFloor": self.record_above_floor,
        }


def _evidence_ok(level: str, minimum: str) -> bool:
    return evidence_rank(level) >= _EVIDENCE_ORDER[minimum]


def _run_order(run: RunFacts, evidence: Mapping[str, str]) -> tuple[bool, int, int, str, str]:
    """Undisputed runs first (a disputed claim never ranks above one nobody contradicted), then latency,
    then the stronger evidence, then the earlier observation, then the smaller digest."""
    assert run.latency_ns is not None
    level = evidence.get(run.digest, NO_EVIDENCE)
    return (level == "disputed", run.latency_ns, -evidence_rank(level), run.observed_at, run.digest)


def _order_and_rank(
    runs: Sequence[RunFacts], evidence: Mapping[str, str], tie_tolerance: float
) -> list[tuple[RunFacts, int, bool]]:
    """``(run, rank, tied)`` in row order: by latency, ties within the noise broken by evidence.

    Disputed runs come after every other run (``_run_order``), labelled by their evidence.
    A cluster is a run (its leader) and the following runs that tie with it.
    Inside a cluster the stronger evidence comes first (stable otherwise), and
    only runs of the same level share a rank, numbered by the position of the
    first of them (competition ranking).  So an unsigned run never shares a
    rank with, nor ranks above, a signed one that is as fast within the noise.
    """
    ordered = sorted(runs, key=lambda run: _run_order(run, evidence))
    clusters: list[list[RunFacts]] = []
    for run in ordered:
        if clusters and ties(clusters[-1][0], run, tie_tolerance):
            clusters[-1].append(run)
        else:
            clusters.append([run])
    rows: list[tuple[RunFacts, int, bool]] = []
    for cluster in clusters:
        cluster.sort(key=lambda run: -evidence_rank(evidence.get(run.digest, NO_EVIDENCE)))
        level: str | None = None
        rank = 0
        for run in cluster:
            run_level = evidence.get(run.digest, NO_EVIDENCE)
            tied = level is not None and evidence_rank(run_level) == evidence_rank(level)
            if not tied:
                level, rank = run_level, len(rows) + 1
            rows.append((run, rank, tied))
    return rows


def rank_group(
    key: GroupKey,
    runs: Sequence[RunFacts],
    *,
    policy: Policy,
    evidence: Mapping[str, str],
    now: datetime,
    min_evidence: str = DEFAULT_EVIDENCE,
    definition: DefinitionFacts | None = None,
    floor: FloorEstimate | None = None,
    advisories: Mapping[str, tuple[str, ...]] | None = None,
) -> RankedGroup:
    """The leaderboard of one comparison group, by the rules in this module's docstring.

    ``advisories`` (run digest → the open harness advisories that mark it, ``kictl.standing.run_marks``)
    are applied as ``policy.advisedRuns`` says (docs/advisories.md): ``rank`` labels the rows, ``apart``
    ranks marked runs below every unmarked one (an implementation's unmarked run is its best), ``drop``
    leaves them out (``excluded.advisory``).
    """
    marked = advisories or {}
    mode = policy.advised_runs if marked else "rank"
    evidence = cap_levels(runs, evidence)  # a run without kept samples is reported at best (kictl.derived)
    excluded = {"notPassed": 0, "evidence": 0, "notBest": 0}
    passed = []
    for run in runs:
        if group_of(run) != key:
            raise ValueError(f"run {run.digest} is not in group {key.digest}")
        if run.status != "passed" or run.latency_ns is None:
            excluded["notPassed"] += 1
        elif not _evidence_ok(evidence.get(run.digest, NO_EVIDENCE), min_evidence):
            excluded["evidence"] += 1
        elif mode == "drop" and marked.get(run.digest):
            excluded["advisory"] = excluded.get("advisory", 0) + 1
        else:
            passed.append(run)
    references = [run for run in runs if run.status == "passed" and run.latency_ns and is_reference(run, definition)]
    reference_ns = min(run.latency_ns for run in references if run.latency_ns) if references else None
    apart = mode == "apart"
    best: dict[str, RunFacts] = {}
    for run in sorted(passed, key=lambda run: (apart and bool(marked.get(run.digest)), _run_order(run, evidence))):
        if run.implementation in best:
            excluded["notBest"] += 1
        else:
            best[run.implementation] = run
    if apart:
        clean = _order_and_rank([r for r in best.values() if not marked.get(r.digest)], evidence, policy.tie_tolerance)
        below = _order_and_rank([r for r in best.values() if marked.get(r.digest)], evidence, policy.tie_tolerance)
        ordered = clean + [(run, rank + len(clean), tied) for run, rank, tied in below]
    else:
        ordered = _order_and_rank(list(best.values()), evidence, policy.tie_tolerance)
    cutoff = stale_cutoff(policy, now)
    rows: list[RankedRow] = []
    for run, rank, tied in ordered:
        assert run.latency_ns is not None
        first_ns = ordered[0][0].latency_ns  # the first undisputed run, when there is one (_run_order)
        assert first_ns is not None
        speedup: float | None = None
        source: str | None = None
        if reference_ns is not None and run.latency_ns > 0:
            speedup, source = reference_ns / run.latency_ns, "group"
        elif run.native_reference_ns is not None and run.latency_ns > 0:
            speedup, source = run.native_reference_ns / run.latency_ns, "sourceNative"
        rows.append(
            RankedRow(
                rank=rank,
                run=run,
                latency_ns=run.latency_ns,
                times_vs_first=run.latency_ns / first_ns if first_ns > 0 else math.inf,
                speedup_over_reference=speedup,
                speedup_source=source,
                evidence=evidence.get(run.digest, NO_EVIDENCE),
                stale=run.observed_at < cutoff,
                below_floor=None if floor is None else run.latency_ns < floor.floor_ns,
                tied=tied,
                advisories=marked.get(run.digest, ()),
            )
        )
    folded = Counter(fold_name(row.implementation_label) for row in rows)
    rows = [replace(row, ambiguous=True) if folded[fold_name(row.implementation_label)] > 1 else row for row in rows]
    name = runs[0].workload_name if runs and runs[0].workload_name else key.workload
    return RankedGroup(key, name, tuple(rows), reference_ns, floor, excluded)
