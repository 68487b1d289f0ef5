"""What a site build hands its page renderers: ``SiteContext`` (the core's answers, computed once) and ``RunState``.

Kept apart from ``kictl.site.build`` (which makes the context and writes the
files) so that ``kictl.site.pages`` can name these types without importing the
build that imports it.  ``kictl.site.build`` re-exports both names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kictl.errors import KictlError
from kictl.index.facts import DefinitionFacts, RunFacts, WorkloadFacts
from kictl.index.query import QueryIndex
from kictl.policy import Policy
from kictl.rank import (
    DefinitionBoard,
    FloorEstimate,
    GroupKey,
    History,
    RankedGroup,
    WorkloadBoard,
    definition_leaderboard,
    floors,
    history,
    is_stale,
    workload_leaderboard,
)
from kictl.standing import Marks, RecordTrust
from kictl.store.registry import Registry


@dataclass(frozen=True, slots=True)
class RunState:
    """A run's verification as ``kictl verify`` reported it, kept between builds."""

    fingerprint: str
    ok: bool
    submitted: bool
    level: str
    retracted: bool
    failures: int

    def to_json(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "ok": self.ok,
            "submitted": self.submitted,
            "level": self.level,
            "retracted": self.retracted,
            "failures": self.failures,
        }


@dataclass
class SiteContext:
    """Everything the page renderers read: the index, the policy, the build's moment and cached core answers."""

    registry: Registry
    index: QueryIndex
    policy: Policy
    moment: datetime
    base_url: str | None
    evidence: dict[str, str]
    summaries: dict[str, RecordTrust]
    #: the verifiers' own reruns: evidence about other runs, left out as every reader leaves them out
    reruns: frozenset[str] = frozenset()
    #: the harness advisories that mark runs (docs/advisories.md): badges, evidence lines, show/verify JSON
    marks: Marks = field(default_factory=Marks)
    states: dict[str, RunState] = field(default_factory=dict)
    #: run digest -> what verifiers' reruns found on held-out shapes (issue 32; kictl.standing)
    held_out: dict[str, str] = field(default_factory=dict)
    definitions: dict[str, DefinitionFacts] = field(default_factory=dict)
    workloads: dict[str, WorkloadFacts] = field(default_factory=dict)
    groups: dict[GroupKey, list[RunFacts]] = field(default_factory=dict)
    loose: list[RunFacts] = field(default_factory=list)
    runs_by_definition: dict[str, list[RunFacts]] = field(default_factory=dict)
    _definition_boards: dict[tuple[str, str | None], DefinitionBoard] = field(default_factory=dict)
    _workload_boards: dict[str, WorkloadBoard] = field(default_factory=dict)
    _histories: dict[str, History] = field(default_factory=dict)
    _floors: dict[tuple[str, str], list[FloorEstimate] | str] = field(default_factory=dict)
    #: record digest -> (its JSON as the file holds it, the digest recomputed from it), for the manifests
    manifest_entries: dict[str, tuple[Any, str] | str] = field(default_factory=dict)
    _measured_gpus: tuple[str, ...] | None = None

    def measured_gpus(self) -> tuple[str, ...]:
        """The GPU products this registry holds a passed run on, of any definition: each definition page says, for
        every one of them, what it holds there or that it is not measured there."""
        if self._measured_gpus is None:
            self._measured_gpus = tuple(
                sorted(
                    {
                        run.gpu
                        for runs in self.runs_by_definition.values()
                        for run in runs
                        if run.status == "passed" and run.gpu and run.digest not in self.reruns
                    }
                )
            )
        return self._measured_gpus

    def definition_board(self, definition: str, gpu: str | None = None) -> DefinitionBoard:
        """``kictl leaderboard DEF [--gpu G]``, computed once per build."""
        key = (definition, gpu)
        if key not in self._definition_boards:
            self._definition_boards[key] = definition_leaderboard(
                self.index,
                definition,
                policy=self.policy,
                gpu=gpu,
                evidence=self.evidence,
                reruns=self.reruns,
                now=self.moment,
                marks=self.marks.marked,  # judged once for the build (kictl.standing.standings)
            )
        return self._definition_boards[key]

    def workload_board(self, definition: str, workload: str) -> WorkloadBoard:
        """``kictl leaderboard DEF --workload W``, computed once per build."""
        if workload not in self._workload_boards:
            self._workload_boards[workload] = workload_leaderboard(
                self.index,
                definition,
                workload,
                policy=self.policy,
                evidence=self.evidence,
                reruns=self.reruns,
                now=self.moment,
                marks=self.marks.marked,
            )
        return self._workload_boards[workload]

    def ranked_group(self, key: GroupKey) -> RankedGroup | None:
        workload = self.workloads.get(key.workload)
        if workload is None:
            return None
        board = self.workload_board(workload.definition, workload.digest)
        return next((group for group in board.groups if group.key == key), None)

    def history(self, definition: str) -> History:
        """``kictl history DEF``, computed once per build."""
        if definition not in self._histories:
            self._histories[definition] = history(
                self.index, definition, policy=self.policy, evidence=self.evidence, reruns=self.reruns
            )
        return self._histories[definition]

    def floors(self, definition: str, gpu: str) -> list[FloorEstimate] | str:
        """``kictl floor DEF --gpu G``, or the error message when the floor cannot be estimated."""
        key = (definition, gpu)
        if key not in self._floors:
            try:
                self._floors[key] = floors(self.index, definition, gpu)[1]
            except KictlError as exc:
                self._floors[key] = exc.message
        return self._floors[key]

    def stale(self, run: RunFacts) -> bool:
        return is_stale(run, self.policy, self.moment)
