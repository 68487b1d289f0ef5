"""Which runs an export holds, and why every other run is left out: the selection every export format shares.

An export (``kictl export flashinfer-trace``; the next format too) hands a
harness the registry's winners on one GPU product.  ``select_winners``
decides which runs those are, from what every reader believes about them
(``kictl.standing``: verifiers' own reruns and retracted runs never rank,
evidence levels held to ``reported`` where a run keeps no samples) and the
leaderboard's ranking (``kictl.rank.definition_leaderboard``):

* of each comparison group, the #1 at or above the minimum evidence level
  that is not marked by an open harness advisory (the leaderboard's own marks,
  and ``advised``), not below its physical floor, and, when ``generalizes``
  is given, whose verifier rerun found it correct on held-out shapes;
* one run per definition and set of axis values: when groups of the same
  axes have different #1s, none of them is chosen.

Every run of the GPU product that is not chosen is listed in
``ExportReport.left_out`` with its reason.  A format renders the
``Candidate``s it is handed and may still leave one out (saying why).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kictl.index.facts import RunFacts
from kictl.index.query import QueryIndex
from kictl.rank import definition_leaderboard, evidence_rank
from kictl.rank.ranking import RankedGroup, RankedRow
from kictl.standing import board_runs
from kictl.store.registry import Registry

#: ``run digest -> True`` when an open harness advisory names the run (issue 28 provides the real one).
Advised = Callable[[str], bool]
#: ``run digest -> True`` when a verifier's rerun found it correct on held-out shapes.
Generalizes = Callable[[str], bool]


def no_advisories(run_digest: str) -> bool:
    """The advisory filter of a registry without advisories: no run is advised."""
    return False


@dataclass(frozen=True, slots=True)
class Exported:
    """One trace of the export: a group's #1."""

    definition: str
    workload: str
    workload_digest: str
    implementation: str
    implementation_digest: str
    run: str
    evidence: str
    latency_ns: int
    comparison_key: str
    permalink: str

    def to_json(self) -> dict[str, Any]:
        return {
            "definition": self.definition,
            "workload": self.workload,
            "workloadDigest": self.workload_digest,
            "implementation": self.implementation,
            "implementationDigest": self.implementation_digest,
            "run": self.run,
            "evidence": self.evidence,
            "latencyNs": self.latency_ns,
            "comparisonKey": self.comparison_key,
            "permalink": self.permalink,
        }


@dataclass(frozen=True, slots=True)
class LeftOut:
    """A run of the GPU product that is not in the export, and why."""

    run: str
    definition: str
    workload: str
    implementation: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "definition": self.definition,
            "workload": self.workload,
            "implementation": self.implementation,
            "reason": self.reason,
        }


@dataclass
class ExportReport:
    """What ``export_flashinfer_trace`` wrote (or, refusing, would have considered)."""

    out: Path
    gpu: str
    min_evidence: str
    require_generalizes: bool
    definitions: tuple[str, ...]
    exported: list[Exported] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def selection(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "minimumEvidence": self.min_evidence,
            "requireGeneralizes": self.require_generalizes,
            "definitions": list(self.definitions),
        }

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document (and, without ``out`` and ``files``, the manifest's body)."""
        return {
            "out": str(self.out),
            **self.selection(),
            "exported": [item.to_json() for item in self.exported],
            "leftOut": [item.to_json() for item in self.left_out],
            "files": list(self.files),
        }


# --------------------------------------------------------------------------- selection


@dataclass
class Candidate:
    """A run chosen for the export: its leaderboard row, its comparison group and its workload's axis values."""

    row: RankedRow
    group: RankedGroup
    axes: tuple[tuple[str, int], ...]


def label(run: RunFacts) -> tuple[str, str]:
    """``(workload, implementation)`` names of a run as the report lists it (digests where a name is missing)."""
    return run.workload_name or run.workload, run.implementation_name or run.implementation


def select_winners(
    index: QueryIndex,
    registry: Registry,
    report: ExportReport,
    *,
    advised: Advised = no_advisories,
    generalizes: Generalizes | None = None,
) -> list[Candidate]:
    """The #1 of every ranked group of ``report.definitions`` (all when empty) on ``report.gpu`` at or above
    ``report.min_evidence`` that may be exported (module docstring); every other run of the GPU goes to
    ``report.left_out`` with its reason.

    Raises ``NotFoundError`` for an unknown definition, ``CheckFailed`` when the trust root does not verify.
    """
    refs = report.definitions
    policy = registry.policy()
    chosen: list[Candidate] = []
    definitions = [index.resolve_definition(ref) for ref in refs] if refs else index.definitions()
    for definition in sorted({d.digest: d for d in definitions}.values(), key=lambda d: (d.name, d.digest)):
        runs = [run for run in index.runs_of_definition(definition.digest) if run.gpu == report.gpu]
        if not runs:
            continue
        kept, levels = board_runs(registry, runs)
        board = definition_leaderboard(
            index,
            definition.digest,
            policy=policy,
            gpu=report.gpu,
            min_evidence=report.min_evidence,
            evidence=levels,
            reruns={run.digest for run in runs} - {run.digest for run in kept},
        )
        placed: dict[str, str] = {}
        winners: list[Candidate] = []
        for section in board.boards:
            for record in section.records:
                group = record.group
                winner: RankedRow | None = None
                for row in group.rows:
                    if winner is not None:
                        placed[row.run.digest] = (
                            f"tied for #{row.rank} with the exported {winner.implementation_label}; the export holds "
                            "one run a group, the first in the leaderboard's order"
                            if row.rank == winner.rank
                            else f"ranked {row.rank} in its comparison group; the export holds each group's #1 only"
                        )
                        continue
                    reason = refusal(row, advised=advised, generalizes=generalizes)
                    if reason is not None:
                        placed[row.run.digest] = reason
                        continue
                    winner = row
                if winner is not None:
                    facts = index.workload(group.key.workload)
                    values = tuple(sorted((facts.axes if facts is not None else {}).items()))
                    winners.append(Candidate(winner, group, values))
        by_axes: dict[tuple[tuple[str, int], ...], list[Candidate]] = {}
        for candidate in winners:
            by_axes.setdefault(candidate.axes, []).append(candidate)
        for key_axes, same in sorted(by_axes.items()):
            implementations = sorted({candidate.row.run.implementation for candidate in same})
            same.sort(key=lambda candidate: candidate.group.comparison_key)
            if len(implementations) > 1:
                text = ", ".join(f"{axis}={value}" for axis, value in key_axes) or "no variable axes"
                for candidate in same:
                    placed[candidate.row.run.digest] = (
                        f"comparison groups of the same axes ({text}) have different #1s "
                        f"({len(implementations)} implementations); apply keys on axes alone, so none is exported"
                    )
                continue
            chosen.append(same[0])
            for candidate in same[1:]:
                placed[candidate.row.run.digest] = (
                    f"the same implementation's #1 in comparison group {same[0].group.comparison_key[:19]}… "
                    "is exported for these axes"
                )
        exported = {candidate.row.run.digest for candidate in chosen}
        for run in sorted(runs, key=lambda r: (label(r), r.digest)):
            if run.digest in exported:
                continue
            reason = placed.get(run.digest) or unranked_reason(run, levels, report.min_evidence, kept)
            workload, implementation = label(run)
            report.left_out.append(LeftOut(run.digest, definition.name, workload, implementation, reason))
    return chosen


def refusal(row: RankedRow, *, advised: Advised, generalizes: Generalizes | None) -> str | None:
    """Why a group's best row may not be exported (``None``: it may)."""
    if row.advisories:  # the leaderboard's own marks (kictl.advisories, docs/advisories.md)
        return f"named by an open harness advisory ({', '.join(row.advisories)})"
    if advised(row.run.digest):
        return "named by an open harness advisory"
    if row.below_floor:
        return "faster than its physical floor (impossible; review rejects it)"
    if generalizes is not None and not generalizes(row.run.digest):
        return "no verifier rerun found it correct on held-out shapes (--require-generalizes)"
    return None


def unranked_reason(run: RunFacts, levels: dict[str, str], minimum: str, kept: Sequence[RunFacts]) -> str:
    """Why a run the leaderboard did not place in any group's ranking is left out."""
    if run.digest not in {k.digest for k in kept}:
        return "a verifier's rerun (evidence about another run, never a contender)"
    if run.status != "passed":
        return f"status {run.status}"
    level = levels.get(run.digest, "unsigned")
    if evidence_rank(level) < evidence_rank(minimum):
        return f"evidence {level} is below {minimum}"
    if run.comparability is None or run.latency_ns is None:
        return "in no comparison group (its workload, protocol or environment is not in the registry)"
    return "not its implementation's best run in its comparison group"


__all__ = [
    "Advised",
    "Candidate",
    "ExportReport",
    "Exported",
    "Generalizes",
    "LeftOut",
    "label",
    "no_advisories",
    "refusal",
    "select_winners",
    "unranked_reason",
]
