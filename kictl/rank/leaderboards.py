"""Leaderboards of a definition and of one workload (``kictl leaderboard``): the record per workload
and per implementation.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kictl.errors import NotFoundError, RecordError, RegistryError
from kictl.families.gpus import GPUS
from kictl.index.facts import DefinitionFacts, RunFacts, WorkloadFacts
from kictl.index.query import QueryIndex
from kictl.policy import Policy
from kictl.rank._common import DEFAULT_EVIDENCE, advisory_marks, check_evidence_level, runs_and_evidence
from kictl.rank.floors import FloorEstimate, estimate_floor, resolve_gpu
from kictl.rank.groups import group_runs, is_reference
from kictl.rank.ranking import RankedGroup, RankedRow, rank_group
from kictl.render import natural_key


@dataclass(frozen=True, slots=True)
class Baseline:
    """The implementation (by name) a definition's speed-ups are over, and why it was chosen."""

    name: str
    source: str  # "policy", "flashinfer" or "reference"
    #: on one board: the usual baseline this one stands in for, which has no run there (the reference does)
    instead_of: str | None = None


@dataclass(frozen=True, slots=True)
class WorkloadRecord:
    """The current record of one workload on one board."""

    group: RankedGroup
    leader: RankedRow
    baseline_unbeaten: bool | None  # None where the baseline has no ranked run in the group


@dataclass(frozen=True, slots=True)
class ImplementationSummary:
    """One implementation's standing on one board."""

    digest: str
    name: str
    covered: int
    workloads: int
    wins: int
    geomean_speedup: float | None
    speedup_workloads: int


@dataclass(frozen=True, slots=True)
class Board:
    """A definition's leaderboard on one GPU, for one comparability family and primary statistic."""

    gpu: str
    comparability: str
    statistic: str
    records: tuple[WorkloadRecord, ...]
    implementations: tuple[ImplementationSummary, ...]
    #: what this board's speed-ups are over: the definition's baseline, or the reference where it has no run here
    baseline: Baseline | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document of this result (stdlib ``json`` types only)."""
        return {
            "gpu": self.gpu,
            "comparabilityFamily": self.comparability,
            "primaryStatistic": self.statistic,
            "baseline": None
            if self.baseline is None
            else {
                "implementation": self.baseline.name,
                "source": self.baseline.source,
                "insteadOf": self.baseline.instead_of,
            },
            "records": [
                {
                    "workload": record.group.key.workload,
                    "workloadName": record.group.workload_name,
                    "comparisonKey": record.group.comparison_key,
                    "implementation": record.leader.implementation_label,
                    "implementationDigest": record.leader.run.implementation,
                    "run": record.leader.run.digest,
                    "latencyNs": record.leader.latency_ns,
                    "evidence": record.leader.evidence,
                    "advisories": list(record.leader.advisories),
                    "stale": record.leader.stale,
                    "tiedForFirst": [row.implementation_label for row in record.group.first()[1:]],
                    "baselineUnbeaten": record.baseline_unbeaten,
                    "floorNs": round(record.group.floor.floor_ns, 3) if record.group.floor else None,
                    "recordAboveFloor": record.group.record_above_floor,
                    "belowFloor": record.leader.below_floor,
                }
                for record in self.records
            ],
            "implementations": [
                {
                    "implementation": summary.name,
                    "implementationDigest": summary.digest,
                    "covered": summary.covered,
                    "workloads": summary.workloads,
                    "wins": summary.wins,
                    "geomeanSpeedupOverBaseline": summary.geomean_speedup,
                    "speedupWorkloads": summary.speedup_workloads,
                }
                for summary in self.implementations
            ],
        }


@dataclass(frozen=True, slots=True)
class DefinitionBoard:
    """``kictl leaderboard DEFINITION``: per GPU, the record of every workload and the standings."""

    definition: DefinitionFacts
    workloads: tuple[WorkloadFacts, ...]
    baseline: Baseline | None
    boards: tuple[Board, ...]
    challenges: tuple[str, ...]
    min_evidence: str
    unranked: int  # runs naming a workload, protocol or environment that is not in the registry
    gpu: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document of this result (stdlib ``json`` types only)."""
        definition = self.definition
        return {
            "definition": {"name": definition.name, "digest": definition.digest, "family": definition.family},
            "workloads": len(self.workloads),
            "baseline": None
            if self.baseline is None
            else {"implementation": self.baseline.name, "source": self.baseline.source},
            "minimumEvidence": self.min_evidence,
            "boards": [board.to_json() for board in self.boards],
            "challenges": list(self.challenges),
            "unranked": self.unranked,
        }


@dataclass(frozen=True, slots=True)
class WorkloadBoard:
    """``kictl leaderboard DEFINITION --workload ID``: every group of one workload, in full."""

    definition: DefinitionFacts
    workload: WorkloadFacts
    groups: tuple[RankedGroup, ...]
    min_evidence: str
    unranked: int
    gpu: str | None = None

    def to_json(self) -> list[dict[str, Any]]:
        """The ``--json`` document: one object a comparison group, with the definition and the workload's axes."""
        return [
            {
                "definition": {"name": self.definition.name, "digest": self.definition.digest},
                "workloadAxes": self.workload.axes,
                "minimumEvidence": self.min_evidence,
                **group.to_json(),
            }
            for group in self.groups
        ]


def choose_baseline(definition: DefinitionFacts, runs: Sequence[RunFacts], policy: Policy) -> Baseline | None:
    """The policy's baseline for the definition, else the FlashInfer wrapper, else the reference.

    The FlashInfer wrapper is an implementation whose name starts with
    ``flashinfer`` (one naming a ``wrapper`` first, then the one with most runs).
    The reference is a baseline when some run of it is in the registry, or some
    run carries the reference latency its harness measured (``sourceNative``);
    speed-ups over it are the rows' speed-ups over the reference.
    """
    named = policy.baselines.get(definition.name)
    if named is not None:
        return Baseline(named, "policy")
    counts: dict[str, int] = {}
    reference_names: set[str] = set()
    for run in runs:
        if run.implementation_name is None:
            continue
        counts[run.implementation_name] = counts.get(run.implementation_name, 0) + 1
        if is_reference(run, definition):
            reference_names.add(run.implementation_name)
    flashinfer = [name for name in counts if name.lower().startswith("flashinfer")]
    if flashinfer:
        chosen = min(flashinfer, key=lambda name: ("wrapper" not in name.lower(), -counts[name], name))
        return Baseline(chosen, "flashinfer")
    if reference_names:
        return Baseline(min(reference_names, key=lambda name: (-counts[name], name)), "reference")
    if any(run.native_reference_ns is not None for run in runs):
        return Baseline("reference", "reference")
    return None


def _now(now: datetime | None) -> datetime:
    return now if now is not None else datetime.now(UTC)


def _floor_for(
    index: QueryIndex, definition: DefinitionFacts, workload: WorkloadFacts | None, gpu: str
) -> FloorEstimate | None:
    if workload is None:
        return None
    try:
        return estimate_floor(index, definition, workload, gpu)
    except (RecordError, NotFoundError, RegistryError):
        return None  # a workload whose structure cannot be made has no floor; validate says why


def _marks_of(
    index: QueryIndex, runs: Sequence[RunFacts], known: Mapping[str, tuple[str, ...]] | None
) -> dict[str, tuple[str, ...]]:
    """The advisory marks of ``runs``: from ``known`` when the caller judged them, else judged here."""
    if known is None:
        return advisory_marks(index.registry, runs)
    return {run.digest: known[run.digest] for run in runs if known.get(run.digest)}


def definition_leaderboard(
    index: QueryIndex,
    definition_ref: str,
    *,
    policy: Policy,
    gpu: str | None = None,
    min_evidence: str = DEFAULT_EVIDENCE,
    evidence: Mapping[str, str] | None = None,
    reruns: Collection[str] = frozenset(),
    now: datetime | None = None,
    marks: Mapping[str, tuple[str, ...]] | None = None,
) -> DefinitionBoard:
    """The summary leaderboard of a definition, per GPU (docs/leaderboards.md).

    ``marks`` (run digest -> the open advisories that mark it, ``kictl.standing.advisory_marks`` of every run)
    is for a caller that judged the registry's advisories once already: the site, for each of its boards.

    Raises ``NotFoundError`` (exit 3) for an unknown definition and
    ``UsageError`` (exit 2) for an unknown GPU or evidence level.
    """
    check_evidence_level(min_evidence)
    definition = index.resolve_definition(definition_ref)
    product = resolve_gpu(gpu, index.gpu_products()) if gpu is not None else None
    moment = _now(now)
    workloads = tuple(index.workloads(definition.digest))
    by_digest = {workload.digest: workload for workload in workloads}
    all_runs = index.runs_of_definition(definition.digest)
    runs = [run for run in all_runs if product is None or run.gpu == product]
    if evidence is None:  # the working tree's attestations (a review passes the head's levels)
        runs, evidence = runs_and_evidence(index.registry, runs)
    else:  # a caller with its own levels names the verifiers' own reruns too (never contenders)
        runs = [run for run in runs if run.digest not in reruns]
    marks = _marks_of(index, runs, marks)  # harness advisories (docs/advisories.md)
    baseline = choose_baseline(definition, all_runs, policy)
    groups, loose = group_runs(runs)
    sections: dict[tuple[str, str, str], list[RankedGroup]] = {}
    for key in sorted(groups):
        floor = _floor_for(index, definition, by_digest.get(key.workload), key.gpu)
        ranked = rank_group(
            key,
            groups[key],
            policy=policy,
            evidence=evidence,
            now=moment,
            min_evidence=min_evidence,
            definition=definition,
            floor=floor,
            advisories=marks,
        )
        if ranked.rows:
            sections.setdefault((key.gpu, key.comparability, key.statistic), []).append(ranked)
    axes = distinguishing_axes(workloads)
    boards = [
        _board(section, ranked_groups, len(workloads), baseline, definition, by_digest, axes)
        for section, ranked_groups in sorted(sections.items())
    ]
    measured = {run.gpu for run in all_runs if run.gpu is not None and run.status == "passed"}
    known = {gpu_.product for gpu_ in GPUS} | set(index.gpu_products())
    challenges = tuple(sorted(known - measured)) if product is None else (() if product in measured else (product,))
    return DefinitionBoard(
        definition=definition,
        workloads=workloads,
        baseline=baseline,
        boards=tuple(boards),
        challenges=challenges,
        min_evidence=min_evidence,
        unranked=len(loose),
        gpu=product,
    )


def distinguishing_axes(workloads: Sequence[WorkloadFacts]) -> tuple[str, ...]:
    """The variable axes, in the workloads' order, that tell ``workloads`` apart: each one kept tells more apart.

    ``("batch_size", "num_kv_indices")`` for decode workloads that share a batch
    size but not a KV length; ``("M",)`` for GEMMs that differ in M only; ``()``
    for one workload.  Imported workloads are named by uuids: these axes are
    what a reader tells them apart by (``axes_label``) and sorts them by.
    """
    order: list[str] = []
    for workload in workloads:
        order.extend(name for name in workload.axes if name not in order)
    chosen: list[str] = []
    told_apart = 1
    for name in order:
        seen = {tuple(workload.axes.get(axis) for axis in (*chosen, name)) for workload in workloads}
        if len(seen) > told_apart:
            chosen.append(name)
            told_apart = len(seen)
        if told_apart == len(workloads):
            break
    return tuple(chosen)


def axes_label(workload: WorkloadFacts, axes: Sequence[str]) -> str:
    """``batch_size=1 num_kv_indices=73``: the values of ``axes`` (``distinguishing_axes``) of ``workload``."""
    return " ".join(f"{name}={workload.axes[name]}" for name in axes if name in workload.axes)


def axes_key(workload: WorkloadFacts | None, axes: Sequence[str], name: str) -> tuple[Any, ...]:
    """Sort key: the ``axes`` values (a missing one first), then the name in natural order."""
    values = tuple(
        (0, 0) if workload is None or axis not in workload.axes else (1, workload.axes[axis]) for axis in axes
    )
    return (*values, natural_key(name))


def _board(
    section: tuple[str, str, str],
    ranked_groups: list[RankedGroup],
    total: int,
    baseline: Baseline | None,
    definition: DefinitionFacts,
    by_digest: Mapping[str, WorkloadFacts],
    axes: Sequence[str],
) -> Board:
    records = []
    covered: dict[str, set[str]] = {}
    wins: dict[str, int] = {}
    names: dict[str, str] = {}
    logs: dict[str, list[float]] = {}
    baseline = _board_baseline(ranked_groups, baseline, definition)
    by_reference = baseline is not None and baseline.source == "reference"
    for group in sorted(
        ranked_groups,
        key=lambda g: (axes_key(by_digest.get(g.key.workload), axes, g.workload_name), g.key.workload),
    ):
        base_row = None
        if baseline is not None:
            base_row = next(
                (
                    row
                    for row in group.rows
                    if (
                        is_reference(row.run, definition) if by_reference else row.implementation_label == baseline.name
                    )
                ),
                None,
            )
        unbeaten = None if base_row is None else base_row.rank == 1
        records.append(WorkloadRecord(group=group, leader=group.rows[0], baseline_unbeaten=unbeaten))
        for row in group.rows:
            digest = row.run.implementation
            names[digest] = row.implementation_label
            covered.setdefault(digest, set()).add(group.key.workload)
            if row.rank == 1:
                wins[digest] = wins.get(digest, 0) + 1
            if by_reference and row.speedup_over_reference:
                logs.setdefault(digest, []).append(math.log(row.speedup_over_reference))
            elif not by_reference and base_row is not None and row.latency_ns > 0:
                logs.setdefault(digest, []).append(math.log(base_row.latency_ns / row.latency_ns))
    summaries = []
    for digest, workloads in covered.items():
        ratios = logs.get(digest, [])
        summaries.append(
            ImplementationSummary(
                digest=digest,
                name=names[digest],
                covered=len(workloads),
                workloads=total,
                wins=wins.get(digest, 0),
                geomean_speedup=math.exp(sum(ratios) / len(ratios)) if ratios else None,
                speedup_workloads=len(ratios),
            )
        )
    summaries.sort(key=lambda s: (-s.wins, -(s.geomean_speedup or 0.0), -s.covered, s.name, s.digest))
    gpu, comparability, statistic = section
    return Board(gpu, comparability, statistic, tuple(records), tuple(summaries), baseline)


def _board_baseline(
    ranked_groups: Sequence[RankedGroup], baseline: Baseline | None, definition: DefinitionFacts
) -> Baseline | None:
    """``baseline``, or the reference where ``baseline`` has no ranked run on this board and the reference has.

    A FlashInfer wrapper measured on a GPU only leaves a CPU board without
    speed-ups; over the reference (a run of it, or the reference latency a
    harness measured) the board still ranks by how much faster than the
    definition's own code each implementation is.
    """
    if baseline is None or baseline.source == "reference":
        return baseline
    rows = [row for group in ranked_groups for row in group.rows]
    if any(row.implementation_label == baseline.name for row in rows):
        return baseline
    if not any(row.speedup_over_reference for row in rows):
        return baseline
    references = sorted({row.implementation_label for row in rows if is_reference(row.run, definition)})
    return Baseline(references[0] if references else "reference", "reference", instead_of=baseline.name)


def workload_leaderboard(
    index: QueryIndex,
    definition_ref: str,
    workload_ref: str,
    *,
    policy: Policy,
    gpu: str | None = None,
    min_evidence: str = DEFAULT_EVIDENCE,
    evidence: Mapping[str, str] | None = None,
    reruns: Collection[str] = frozenset(),
    now: datetime | None = None,
    marks: Mapping[str, tuple[str, ...]] | None = None,
) -> WorkloadBoard:
    """Every comparison group of one workload (on one GPU when given), ranked in full.

    ``marks``: as ``definition_leaderboard``'s.

    Raises ``NotFoundError`` (exit 3) for an unknown definition or workload and
    ``UsageError`` (exit 2) for an unknown GPU or evidence level.
    """
    check_evidence_level(min_evidence)
    definition = index.resolve_definition(definition_ref)
    workload = index.resolve_workload(definition.digest, workload_ref)
    product = resolve_gpu(gpu, index.gpu_products()) if gpu is not None else None
    runs = [run for run in index.runs_of_workload(workload.digest) if product is None or run.gpu == product]
    if evidence is None:  # the working tree's attestations (a review passes the head's levels)
        runs, evidence = runs_and_evidence(index.registry, runs)
    else:  # a caller with its own levels names the verifiers' own reruns too (never contenders)
        runs = [run for run in runs if run.digest not in reruns]
    marks = _marks_of(index, runs, marks)  # harness advisories (docs/advisories.md)
    groups, loose = group_runs(runs)
    ranked = [
        rank_group(
            key,
            groups[key],
            policy=policy,
            evidence=evidence,
            now=_now(now),
            min_evidence=min_evidence,
            definition=definition,
            floor=_floor_for(index, definition, workload, key.gpu),
            advisories=marks,
        )
        for key in sorted(groups)
    ]
    return WorkloadBoard(definition, workload, tuple(ranked), min_evidence, len(loose), product)
