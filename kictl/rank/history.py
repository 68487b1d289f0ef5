"""``kictl history``: when each related record entered the registry, and how the #1 of each group
changed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kictl.index.facts import RunFacts
from kictl.index.query import QueryIndex
from kictl.layout import RECORDS_DIR
from kictl.policy import Policy
from kictl.rank._common import DEFAULT_EVIDENCE, runs_and_evidence
from kictl.rank.groups import GroupKey, group_of, group_runs
from kictl.rank.ranking import rank_group
from kictl.render import natural_key


@dataclass(frozen=True, slots=True)
class Entry:
    """When one record entered the registry (``commit`` is ``None`` when not committed yet)."""

    kind: str
    digest: str
    name: str
    commit: str | None
    date: str | None
    author: str | None


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """A group's #1 after a commit changed it."""

    commit: str | None
    date: str | None
    author: str | None
    implementation: str
    run: str
    latency_ns: int
    previous_implementation: str | None
    previous_latency_ns: int | None


@dataclass(frozen=True, slots=True)
class GroupHistory:
    key: GroupKey
    workload_name: str
    changes: tuple[LeaderChange, ...]


@dataclass(frozen=True, slots=True)
class History:
    """``kictl history TARGET``."""

    kind: str
    digest: str
    name: str
    entries: tuple[Entry, ...]
    groups: tuple[GroupHistory, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document of this result (stdlib ``json`` types only)."""
        return {
            "kind": self.kind,
            "digest": self.digest,
            "name": self.name,
            "entries": [
                {
                    "kind": entry.kind,
                    "digest": entry.digest,
                    "name": entry.name,
                    "commit": entry.commit,
                    "date": entry.date,
                    "author": entry.author,
                }
                for entry in self.entries
            ],
            "groups": [
                {
                    "comparisonKey": group.key.digest,
                    "workload": group.key.workload,
                    "workloadName": group.workload_name,
                    "gpu": group.key.gpu,
                    "comparabilityFamily": group.key.comparability,
                    "primaryStatistic": group.key.statistic,
                    "firstOverTime": [
                        {
                            "commit": change.commit,
                            "date": change.date,
                            "author": change.author,
                            "implementation": change.implementation,
                            "run": change.run,
                            "latencyNs": change.latency_ns,
                            "previousImplementation": change.previous_implementation,
                            "previousLatencyNs": change.previous_latency_ns,
                        }
                        for change in group.changes
                    ],
                }
                for group in self.groups
            ],
        }


def _related(index: QueryIndex, kind: str, digest: str) -> tuple[list[tuple[str, str, str]], list[RunFacts]]:
    """Records related to a target, and the runs whose groups' history is told."""
    related: list[tuple[str, str, str]] = []
    runs: list[RunFacts] = []
    if kind == "Definition":
        facts = index.definition(digest)
        assert facts is not None
        related.append(("Definition", digest, facts.name))
        related.extend(("Workload", w.digest, w.name) for w in index.workloads(digest))
        related.extend(("Implementation", i.digest, i.name) for i in index.implementations(digest))
        runs = index.runs_of_definition(digest)
    elif kind == "Implementation":
        facts_i = index.implementation(digest)
        assert facts_i is not None
        related.append(("Implementation", digest, facts_i.name))
        mine = index.runs_of_implementation(digest)
        keys = {group_of(run) for run in mine} - {None}
        runs = [run for w in {k.workload for k in keys if k} for run in index.runs_of_workload(w)]
        runs = [run for run in runs if group_of(run) in keys]
        related.extend(("BenchmarkRun", run.digest, run.name) for run in mine)
    elif kind == "Workload":
        facts_w = index.workload(digest)
        assert facts_w is not None
        related.append(("Workload", digest, facts_w.name))
        runs = index.runs_of_workload(digest)
    elif kind == "BenchmarkRun":
        (run,) = index.runs([digest])
        related.append(("BenchmarkRun", digest, run.name))
        for member, ref_kind in (
            (run.workload, "Workload"),
            (run.implementation, "Implementation"),
            (run.protocol, "BenchmarkProtocol"),
            (run.environment, "ExecutionEnvironment"),
        ):
            name = index.name_of(member)
            if name is not None:
                related.append((ref_kind, member, name))
        key = group_of(run)
        if key is not None:
            runs = [other for other in index.runs_of_workload(run.workload) if group_of(other) == key]
    else:
        name = index.name_of(digest)
        related.append((kind, digest, name or digest))
    if kind in ("Definition", "Workload"):
        related.extend(("BenchmarkRun", run.digest, run.name) for run in runs)
    return related, runs


def history(
    index: QueryIndex,
    target: str,
    *,
    policy: Policy,
    evidence: Mapping[str, str] | None = None,
    min_evidence: str = DEFAULT_EVIDENCE,
    reruns: Collection[str] = frozenset(),
) -> History:
    """When each record related to ``target`` entered the registry, and how each group's #1 changed.

    ``target`` is a definition, implementation or any record (name, digest or
    prefix).  Entry times come from git: the commit that first added the
    record's file.  Raises ``NotFoundError`` (exit 3) for an unknown target.
    """
    kind, digest, name = index.resolve_any(target)
    related, runs = _related(index, kind, digest)
    registry = index.registry
    added, order = entry_times(index)
    entries = []
    for rel_kind, rel_digest, rel_name in related:
        info = added.get(index.path_of(rel_digest) or "")
        entries.append(
            Entry(
                rel_kind,
                rel_digest,
                rel_name,
                info.sha if info else None,
                info.date if info else None,
                info.author if info else None,
            )
        )
    entries.sort(key=lambda e: (order.get(e.commit or "", len(order)), e.digest != digest, e.kind, natural_key(e.name)))
    if evidence is None:  # verifiers' own reruns are evidence about other runs, never contenders
        runs, evidence = runs_and_evidence(registry, runs)
    else:
        runs = [run for run in runs if run.digest not in reruns]

    def entered(run_digest: str) -> Any:
        return added.get(index.path_of(run_digest) or "")

    groups_out = []
    groups, _ = group_runs(runs)
    for key in sorted(groups):
        members = groups[key]
        steps: dict[int, list[RunFacts]] = {}
        for run in members:
            info = entered(run.digest)
            position = order.get(info.sha, len(order)) if info else len(order)
            steps.setdefault(position, []).append(run)
        seen: list[RunFacts] = []
        changes: list[LeaderChange] = []
        previous = None
        definition = index.definition(members[0].definition) if members[0].definition else None
        for position in sorted(steps):
            seen.extend(steps[position])
            ranked = rank_group(
                key,
                seen,
                policy=policy,
                evidence=evidence,
                now=datetime.now(UTC),
                min_evidence=min_evidence,
                definition=definition,
            )
            leader = ranked.leader
            if leader is None or (previous is not None and previous.run.digest == leader.run.digest):
                continue
            step = entered(steps[position][0].digest)
            changes.append(
                LeaderChange(
                    commit=step.sha if step else None,
                    date=step.date if step else None,
                    author=step.author if step else None,
                    implementation=leader.implementation_label,
                    run=leader.run.digest,
                    latency_ns=leader.latency_ns,
                    previous_implementation=previous.implementation_label if previous else None,
                    previous_latency_ns=previous.latency_ns if previous else None,
                )
            )
            previous = leader
        groups_out.append(GroupHistory(key, members[0].workload_name or key.workload, tuple(changes)))
    groups_out.sort(key=lambda group: (natural_key(group.workload_name), group.key))
    return History(kind, digest, name, tuple(entries), tuple(groups_out))


def entry_times(index: QueryIndex) -> tuple[dict[str, Any], dict[str, int]]:
    """When each record file entered the registry: ``{path: the commit that first added it}``, and each commit's
    position in the history (``{sha: position}``, for ordering); both empty outside git or before a commit."""
    registry = index.registry
    if not registry.is_git_repository() or index.commit is None:
        return {}, {}
    added = registry.git.first_added(RECORDS_DIR)
    order = {info.sha: position for position, info in enumerate(registry.git.commits())}
    return added, order
