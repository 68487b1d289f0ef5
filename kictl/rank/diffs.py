"""``kictl diff``: two records field by field, or the registry at two git revisions (records added, new
#1, rank changes).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from kictl import canon
from kictl.index.facts import RunFacts
from kictl.index.query import QueryIndex
from kictl.policy import Policy
from kictl.rank._common import DEFAULT_EVIDENCE, EvidenceSource, obtain_evidence
from kictl.rank.groups import GroupKey, group_of, group_runs, stale_cutoff, ties
from kictl.rank.ranking import RankedGroup, RankedRow, rank_group
from kictl.records import StoredRecord
from kictl.standing import verifier_rerun_runs
from kictl.store.registry import Registry

_ABSENT = object()


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One JSON path whose value differs; ``None`` with ``*_present=False`` where a side lacks it."""

    path: str
    before: Any
    after: Any
    before_present: bool = True
    after_present: bool = True


def json_changes(before: Any, after: Any, path: tuple[str | int, ...] = ()) -> list[FieldChange]:
    """Field-by-field differences of two JSON values, objects and lists walked member by member."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[FieldChange] = []
        for key in sorted(set(before) | set(after)):
            left, right = before.get(key, _ABSENT), after.get(key, _ABSENT)
            if left is _ABSENT or right is _ABSENT:
                out.append(
                    FieldChange(
                        canon.format_path((*path, key)),
                        None if left is _ABSENT else left,
                        None if right is _ABSENT else right,
                        left is not _ABSENT,
                        right is not _ABSENT,
                    )
                )
            else:
                out.extend(json_changes(left, right, (*path, key)))
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        out = []
        for position, (left, right) in enumerate(zip(before, after, strict=True)):
            out.extend(json_changes(left, right, (*path, position)))
        return out
    if type(before) is type(after) and before == after:
        return []
    return [FieldChange(canon.format_path(path), before, after)]


@dataclass(frozen=True, slots=True)
class RecordDiff:
    """``kictl diff A B`` of two records."""

    before: StoredRecord
    after: StoredRecord
    changes: tuple[FieldChange, ...]
    same_group: bool | None  # for two runs: whether they share a comparison group
    comparison_key: str | None
    latency_ratio: float | None  # after / before, for two runs of one group
    exceeds_noise: bool | None
    latencies_ns: tuple[int | None, int | None] = (None, None)  # primary latencies, for two runs
    statistics: tuple[str | None, str | None] = (None, None)  # their primary statistics
    group_differences: tuple[str, ...] = ()  # what puts two runs in different groups ("protocol family", ...)

    @property
    def equal(self) -> bool:
        return self.before.digest == self.after.digest and not self.changes

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document of this result (stdlib ``json`` types only)."""
        return {
            "type": "records",
            "equal": self.equal,
            "before": {"digest": self.before.digest, "kind": self.before.kind, "name": self.before.name},
            "after": {"digest": self.after.digest, "kind": self.after.kind, "name": self.after.name},
            "changes": [
                {
                    "path": change.path,
                    **({"before": change.before} if change.before_present else {}),
                    **({"after": change.after} if change.after_present else {}),
                }
                for change in self.changes
            ],
            "sameGroup": self.same_group,
            "comparisonKey": self.comparison_key,
            "latencyRatio": self.latency_ratio,
            "exceedsNoise": self.exceeds_noise,
            "latencyNs": {"before": self.latencies_ns[0], "after": self.latencies_ns[1]},
            "primaryStatistic": {"before": self.statistics[0], "after": self.statistics[1]},
            "groupDifferences": list(self.group_differences),
        }


def diff_records(index: QueryIndex, before_ref: str, after_ref: str, *, policy: Policy) -> RecordDiff:
    """Compare two records field by field; two runs of one group also by latency and noise.

    Raises ``NotFoundError`` (exit 3) for an unknown or ambiguous reference.
    """
    _, before_digest, _ = index.resolve_any(before_ref)
    _, after_digest, _ = index.resolve_any(after_ref)
    before, after = index.load_record(before_digest), index.load_record(after_digest)
    changes = tuple(json_changes(before.raw, after.raw))
    same_group = key = ratio = exceeds = None
    latencies: tuple[int | None, int | None] = (None, None)
    statistics: tuple[str | None, str | None] = (None, None)
    differences: tuple[str, ...] = ()
    if before.kind == "BenchmarkRun" and after.kind == "BenchmarkRun":
        runs = {run.digest: run for run in index.runs([before_digest, after_digest])}
        left, right = runs.get(before_digest), runs.get(after_digest)
        left_key = group_of(left) if left else None
        right_key = group_of(right) if right else None
        same_group = left_key is not None and left_key == right_key
        latencies = (left.latency_ns if left else None, right.latency_ns if right else None)
        statistics = (left_key.statistic if left_key else None, right_key.statistic if right_key else None)
        differences = _group_differences(left_key, right_key)
        if same_group and left and right and left_key is not None:
            key = left_key.digest
            if left.latency_ns and right.latency_ns:
                ratio = right.latency_ns / left.latency_ns
                exceeds = not ties(left, right, policy.tie_tolerance)
    return RecordDiff(
        before, after, changes, same_group, key, ratio, exceeds, latencies, statistics, differences
    )  # fmt: skip


def _group_differences(left: GroupKey | None, right: GroupKey | None) -> tuple[str, ...]:
    """Which of the four comparability values two runs do not share (all four unknown: ``("unknown",)``)."""
    if left is None or right is None:
        return () if left == right else ("a workload, protocol or environment not in the registry",)
    names = (("workload", "workload"), ("gpu", "GPU"), ("comparability", "protocol family"), ("statistic", "statistic"))
    return tuple(label for member, label in names if getattr(left, member) != getattr(right, member))


@dataclass(frozen=True, slots=True)
class RankChange:
    implementation: str
    name: str
    before_rank: int | None
    after_rank: int | None
    before_ns: int | None
    after_ns: int | None


@dataclass(frozen=True, slots=True)
class GroupChange:
    """How one comparison group's leaderboard differs between two states of the registry."""

    key: GroupKey
    definition: str | None
    workload_name: str
    before_leader: RankedRow | None
    after_leader: RankedRow | None
    rank_changes: tuple[RankChange, ...]
    became_stale: tuple[RankedRow, ...]

    @property
    def new_first(self) -> bool:
        """A different run now holds row 1."""
        before = self.before_leader.run.digest if self.before_leader else None
        after = self.after_leader.run.digest if self.after_leader else None
        return after is not None and before != after

    @property
    def margin(self) -> float | None:
        """The new record's speed-up over the previous one (previous latency / new latency)."""
        if not self.new_first or self.before_leader is None or self.after_leader is None:
            return None
        return self.before_leader.latency_ns / self.after_leader.latency_ns

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document of this result (stdlib ``json`` types only)."""
        return {
            "comparisonKey": self.key.digest,
            "definition": self.definition,
            "workload": self.key.workload,
            "workloadName": self.workload_name,
            "gpu": self.key.gpu,
            "comparabilityFamily": self.key.comparability,
            "primaryStatistic": self.key.statistic,
            "newFirst": self.new_first,
            "before": _leader_json(self.before_leader),
            "after": _leader_json(self.after_leader),
            "margin": self.margin,
            "rankChanges": [
                {
                    "implementation": rank.name,
                    "implementationDigest": rank.implementation,
                    "beforeRank": rank.before_rank,
                    "afterRank": rank.after_rank,
                    "beforeLatencyNs": rank.before_ns,
                    "afterLatencyNs": rank.after_ns,
                }
                for rank in self.rank_changes
            ],
            "becameStale": [
                {"implementation": row.implementation_label, "run": row.run.digest, "observedAt": row.run.observed_at}
                for row in self.became_stale
            ],
        }


@dataclass(frozen=True, slots=True)
class StateDiff:
    """``kictl diff REV_A REV_B``: records added and removed, and what changed per group."""

    before: str
    after: str
    added: tuple[tuple[str, str, str], ...]  # (kind, digest, name)
    removed: tuple[tuple[str, str, str], ...]
    groups: tuple[GroupChange, ...]

    @property
    def equal(self) -> bool:
        return not self.added and not self.removed

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document of this result (stdlib ``json`` types only)."""
        return {
            "type": "revisions",
            "equal": self.equal,
            "before": self.before,
            "after": self.after,
            "added": [{"kind": kind, "digest": digest, "name": name} for kind, digest, name in self.added],
            "removed": [{"kind": kind, "digest": digest, "name": name} for kind, digest, name in self.removed],
            "groups": [change.to_json() for change in self.groups],
        }


def _ranked(
    index: QueryIndex,
    keys: Iterable[GroupKey],
    *,
    policy: Policy,
    evidence: Mapping[str, str],
    now: datetime,
    min_evidence: str,
    reruns: Collection[str] = frozenset(),
) -> dict[GroupKey, RankedGroup]:
    wanted = set(keys)
    by_workload: dict[str, list[RunFacts]] = {}
    for key in wanted:
        by_workload.setdefault(key.workload, [])
    for workload in by_workload:
        by_workload[workload] = index.runs_of_workload(workload)
    out = {}
    for key in wanted:
        runs = [run for run in by_workload[key.workload] if group_of(run) == key and run.digest not in reruns]
        definition = index.definition(runs[0].definition) if runs and runs[0].definition else None
        out[key] = rank_group(
            key, runs, policy=policy, evidence=evidence, now=now, min_evidence=min_evidence, definition=definition
        )
    return out


def diff_states(
    before: QueryIndex,
    after: QueryIndex,
    *,
    policy: Policy,
    before_time: datetime,
    after_time: datetime,
    evidence: Mapping[str, str] | None = None,
    min_evidence: str = DEFAULT_EVIDENCE,
    evidence_of: EvidenceSource | None = None,
    reruns_of: Callable[[], Collection[str]] | None = None,
) -> StateDiff:
    """What changed between two states of a registry (two snapshots of the index).

    Groups compared are those whose runs were added or removed and those with a
    run that was fresh at ``before_time`` and stale at ``after_time``.
    Evidence is one map for both states (attestations are not records):
    ``evidence``, else ``evidence_of(digests)`` for the runs of the groups
    compared, else ``obtain_evidence`` (today's, from the working tree).
    """
    old, new = before.all_records(), after.all_records()
    added = tuple(sorted((new[d][0], d, new[d][1]) for d in new.keys() - old.keys()))
    removed = tuple(sorted((old[d][0], d, old[d][1]) for d in old.keys() - new.keys()))
    changed_runs = [d for kind, d, _ in added if kind == "BenchmarkRun"]
    gone_runs = [d for kind, d, _ in removed if kind == "BenchmarkRun"]
    keys: set[GroupKey] = set()
    for run in after.runs(changed_runs):
        key = group_of(run)
        if key is not None:
            keys.add(key)
    for run in before.runs(gone_runs):
        key = group_of(run)
        if key is not None:
            keys.add(key)
    window = timedelta(days=policy.stale_after_days)
    for run in after.runs_observed_between(before_time - window, after_time - window):
        key = group_of(run)
        if key is not None:
            keys.add(key)
    digests = sorted({run.digest for key in keys for run in after.runs_of_workload(key.workload)})
    digests += [run.digest for key in keys for run in before.runs_of_workload(key.workload)]
    if evidence is None:
        source = evidence_of if evidence_of is not None else partial(obtain_evidence, after.registry)
        evidence = source(sorted(set(digests)))
    # a verifier's own rerun is evidence about another run, never a contender (docs/rerun.md): the source that
    # judged the attestations names them, else the working tree's valid verifier reruns do
    if reruns_of is not None:
        reruns: Collection[str] = reruns_of()
    elif evidence_of is None:
        reruns = verifier_rerun_runs(after.registry)
    else:
        reruns = frozenset()
    ranked = partial(_ranked, keys=keys, policy=policy, evidence=evidence, min_evidence=min_evidence, reruns=reruns)
    old_groups = ranked(before, now=before_time)
    new_groups = ranked(after, now=after_time)
    changes = []
    for key in sorted(keys):
        change = _group_change(key, old_groups[key], new_groups[key], after)
        if change is not None:
            changes.append(change)
    return StateDiff(
        before=before.revision or "", after=after.revision or "", added=added, removed=removed, groups=tuple(changes)
    )


def _group_change(key: GroupKey, old: RankedGroup, new: RankedGroup, index: QueryIndex) -> GroupChange | None:
    old_rows = {row.run.implementation: row for row in old.rows}
    new_rows = {row.run.implementation: row for row in new.rows}
    rank_changes = []
    for implementation in sorted(old_rows.keys() | new_rows.keys()):
        left, right = old_rows.get(implementation), new_rows.get(implementation)
        before_state = (left.rank, left.latency_ns) if left else None
        after_state = (right.rank, right.latency_ns) if right else None
        if before_state == after_state:
            continue
        either = right or left
        label = either.implementation_label if either else implementation
        rank_changes.append(
            RankChange(
                implementation=implementation,
                name=label,
                before_rank=left.rank if left else None,
                after_rank=right.rank if right else None,
                before_ns=left.latency_ns if left else None,
                after_ns=right.latency_ns if right else None,
            )
        )
    became_stale = tuple(
        row
        for row in new.rows
        if row.stale
        and row.run.implementation in old_rows
        and old_rows[row.run.implementation].run.digest == row.run.digest
        and not old_rows[row.run.implementation].stale
    )
    leader_old, leader_new = old.leader, new.leader
    same_leader = (leader_old.run.digest if leader_old else None) == (leader_new.run.digest if leader_new else None)
    if not rank_changes and not became_stale and same_leader:
        return None
    sample = next(iter(new.rows or old.rows), None)
    definition = sample.run.definition if sample else None
    definition_name = None
    if definition:
        facts = index.definition(definition)
        definition_name = facts.name if facts else definition
    return GroupChange(
        key=key,
        definition=definition_name,
        workload_name=new.workload_name if new.rows else old.workload_name,
        before_leader=leader_old,
        after_leader=leader_new,
        rank_changes=tuple(rank_changes),
        became_stale=became_stale,
    )


def commit_time(registry: Registry, rev: str) -> datetime:
    """The author time of a commit, as an aware UTC datetime."""
    info = registry.git.commit_info(rev)
    return datetime.fromtimestamp(info.timestamp, UTC)


def diff_revisions(
    index: QueryIndex,
    before_rev: str,
    after_rev: str,
    *,
    policy: Policy,
    evidence: Mapping[str, str] | None = None,
    min_evidence: str = DEFAULT_EVIDENCE,
    evidence_of: EvidenceSource | None = None,
    reruns_of: Callable[[], Collection[str]] | None = None,
) -> StateDiff:
    """``diff_states`` of the registry at two git revisions, staleness judged at each commit's time.

    Raises ``NotFoundError`` (exit 3) for an unknown revision.
    """
    before = index.snapshot(before_rev)
    after = index.snapshot(after_rev)
    try:
        return diff_states(
            before,
            after,
            policy=policy,
            before_time=commit_time(index.registry, before.revision or before_rev),
            after_time=commit_time(index.registry, after.revision or after_rev),
            evidence=evidence,
            min_evidence=min_evidence,
            evidence_of=evidence_of,
            reruns_of=reruns_of,
        )
    finally:
        before.close()
        after.close()


def stale_groups(
    index: QueryIndex,
    run_digests: Iterable[str],
    *,
    policy: Policy,
    now: datetime,
    evidence_of: EvidenceSource | None = None,
    min_evidence: str = DEFAULT_EVIDENCE,
) -> list[RankedGroup]:
    """The groups a submitter of these runs could refresh: same definition and GPU, #1 stale at ``now``.

    For each run of ``run_digests`` in ``index``, every comparison group of its
    definition on its GPU (any workload, comparability family and statistic)
    whose rank-1 rows are all stale (observed more than
    ``policy.staleAfterDays`` before ``now``; docs/leaderboards.md), ranked as
    ``rank_group`` ranks them, ordered by group key.  Evidence comes from
    ``evidence_of`` (else ``obtain_evidence``) for the runs of groups that
    have a passed run old enough to be stale.  Raises what the evidence source raises.
    """
    gpus_of: dict[str, set[str]] = {}
    for run in index.runs(run_digests):
        definition = _definition_of(index, run)
        if definition is not None and run.gpu is not None:
            gpus_of.setdefault(definition, set()).add(run.gpu)
    cutoff = stale_cutoff(policy, now)
    candidates: dict[GroupKey, tuple[str, list[RunFacts]]] = {}
    for definition, gpus in gpus_of.items():
        groups, _ = group_runs(index.runs_of_definition(definition))
        for key, runs in groups.items():
            old = any(
                run.status == "passed" and run.latency_ns is not None and run.observed_at < cutoff for run in runs
            )
            if key.gpu in gpus and old:
                candidates[key] = (definition, runs)
    if not candidates:
        return []
    digests = sorted({run.digest for _, runs in candidates.values() for run in runs})
    source = evidence_of if evidence_of is not None else partial(obtain_evidence, index.registry)
    evidence = source(digests)
    out = []
    for key in sorted(candidates):
        definition, runs = candidates[key]
        ranked = rank_group(
            key,
            runs,
            policy=policy,
            evidence=evidence,
            now=now,
            min_evidence=min_evidence,
            definition=index.definition(definition),
        )
        first = ranked.first()
        if first and all(row.stale for row in first):
            out.append(ranked)
    return out


def _definition_of(index: QueryIndex, run: RunFacts) -> str | None:
    """A run's definition digest: its own ``definitionDigest``, else its workload's."""
    if run.definition is not None:
        return run.definition
    workload = index.workload(run.workload)
    return workload.definition if workload is not None else None


def _leader_json(row: RankedRow | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return {
        "implementation": row.implementation_label,
        "implementationDigest": row.run.implementation,
        "run": row.run.digest,
        "latencyNs": row.latency_ns,
    }
