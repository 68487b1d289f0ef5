"""Comparison groups, ranking, floors, leaderboard summaries, diffs and histories (DESIGN §6).

The reader's question is "what is the fastest correct implementation of this
kernel, for this exact workload, on this GPU, and how sure are we?".  This
module answers it from the query index (``kictl.index``) and never prints.

Comparison groups (DESIGN §6).  Two runs are compared only when they share
the workload digest, the GPU product (``families.gpus.normalize_product`` of
the environment's ``hardware.product``), the protocol's comparability family
and the run's primary statistic.  The group's *comparison key* is
``sha256:`` + hex sha256 of the JCS bytes of ``{"comparabilityFamily",
"gpu", "primaryStatistic", "workloadDigest"}``.  A run whose workload,
protocol or environment is not in the registry belongs to no group.

Ranking a group.
1. Only runs with status ``passed`` and evidence at or above the chosen
   minimum (``disputed`` < ``reported`` < ``verified``) take part.
2. Each implementation (record digest) keeps its best run: the lowest primary
   latency, then the earlier ``observedAt``, then the smaller digest.
3. Rows are ordered by latency.  *Ties within noise*: a run's noise is half
   the width of its 10–90 % band, ``(p90 − p10) / 2``, taken from its samples
   when it has at least two, else from its ``latencyNs.p10`` and ``p90``, else
   ``policy.tieTolerance × latency``.  Two runs tie when their latencies differ
   by no more than the larger of their two noises.  Walking down the sorted
   rows, a row shares the rank of the first row of the current rank (its
   *leader*) when it ties with that leader; otherwise it opens a new rank
   numbered by its position (competition ranking: 1, 1, 3).
4. Each row says its ratio to row 1 (``× vs #1``), its speed-up over the
   definition's reference where known (the best passed run in the group of an
   implementation that *is* the reference — its entry file's sha256 equals
   that of the definition's ``reference``, or it is named ``reference`` —,
   else the reference latency the source harness reported with the run,
   ``sourceNative.metrics.reference_latency_ms``), its evidence level, its
   observed date, ``stale`` (observed more than ``policy.staleAfterDays``
   before now) and whether it is below the physical floor.

Floors are estimates, never evidence: ``families.work`` and
``families.floor`` give bytes over datasheet bandwidth and FLOPs over
datasheet peak; a run faster than its floor is flagged wherever it is shown.

Evidence levels come from ``kictl.trust`` (DESIGN §5) through
``obtain_evidence``, the one place that asks for them, unless a caller brings
its own ``EvidenceSource`` (``kictl review`` judges a PR head's attestations).

Diffs and stale groups serve ``kictl diff`` and ``kictl review``: what changed
per group between two revisions (``diff_revisions``), and the groups of a
PR's definitions and GPUs whose #1 is stale, which a new run could refresh
(``stale_groups``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache, partial
from typing import Any

from kictl import canon, families
from kictl.errors import NotFoundError, RecordError, RegistryError, UsageError
from kictl.families.gpus import GPUS, find_gpu, normalize_product
from kictl.index import DefinitionFacts, QueryIndex, RunFacts, WorkFacts, WorkloadFacts
from kictl.lookup import closest
from kictl.policy import Policy
from kictl.records import DefinitionSpec, StoredRecord, WorkloadSpec, format_timestamp
from kictl.store import Registry

#: Evidence levels from weakest to strongest (DESIGN §5); ``--evidence`` is a minimum.
EVIDENCE_LEVELS = ("disputed", "reported", "verified")
DEFAULT_EVIDENCE = "reported"
_EVIDENCE_ORDER = {level: position for position, level in enumerate(EVIDENCE_LEVELS)}


def obtain_evidence(registry: Registry, digests: Sequence[str]) -> dict[str, str]:
    """The evidence level of each run digest (DESIGN §5): the one place that asks for it.

    ``kictl.trust.evidence_levels(registry, digests)`` computes it from the
    attestations once the trust module provides it; until then every run is
    ``reported``.  Raises whatever the trust module raises.
    """
    from kictl import trust

    levels = getattr(trust, "evidence_levels", None)
    if levels is None:
        return dict.fromkeys(digests, "reported")
    return dict(levels(registry, list(digests)))


#: ``digests -> {digest: level}``: where a caller's evidence levels come from when not from the
#: working tree (``kictl review`` judges the head's attestations by the base's trust root).
EvidenceSource = Callable[[Sequence[str]], Mapping[str, str]]


def check_evidence_level(level: str) -> str:
    """``level`` when it is one of ``EVIDENCE_LEVELS``; raises ``UsageError`` (exit 2)."""
    if level not in _EVIDENCE_ORDER:
        raise UsageError(f"unknown evidence level {level!r}; expected one of {', '.join(EVIDENCE_LEVELS)}")
    return level


# --------------------------------------------------------------------------- groups


@lru_cache(maxsize=65536)
def comparison_key(workload_digest: str, gpu: str, comparability_family: str, primary_statistic: str) -> str:
    """The digest naming a comparison group (DESIGN §6)."""
    value = {
        "comparabilityFamily": comparability_family,
        "gpu": gpu,
        "primaryStatistic": primary_statistic,
        "workloadDigest": workload_digest,
    }
    return canon.DIGEST_PREFIX + canon.sha256_hex(canon.canonical_bytes(value))


@dataclass(frozen=True, slots=True, order=True)
class GroupKey:
    """The four values that make runs comparable."""

    workload: str
    gpu: str
    comparability: str
    statistic: str

    @property
    def digest(self) -> str:
        return comparison_key(self.workload, self.gpu, self.comparability, self.statistic)


def group_of(run: RunFacts) -> GroupKey | None:
    """The comparison group of a run, ``None`` when a record it names is missing."""
    if run.gpu is None or run.comparability is None or run.statistic is None or run.workload_name is None:
        return None
    return GroupKey(run.workload, run.gpu, run.comparability, run.statistic)


def group_runs(runs: Iterable[RunFacts]) -> tuple[dict[GroupKey, list[RunFacts]], list[RunFacts]]:
    """Runs by comparison group, and the runs that belong to none."""
    groups: dict[GroupKey, list[RunFacts]] = {}
    loose: list[RunFacts] = []
    for run in runs:
        key = group_of(run)
        if key is None:
            loose.append(run)
        else:
            groups.setdefault(key, []).append(run)
    return groups, loose


# --------------------------------------------------------------------------- noise and ties


def noise_ns(run: RunFacts, tie_tolerance: float) -> float:
    """Half the width of the run's 10-90 % band, or the policy's tolerance × its latency."""
    if run.noise_ns is not None:
        return run.noise_ns
    assert run.latency_ns is not None
    return tie_tolerance * run.latency_ns


def ties(a: RunFacts, b: RunFacts, tie_tolerance: float) -> bool:
    """Whether two runs' latencies differ by no more than the larger of their noises."""
    assert a.latency_ns is not None
    assert b.latency_ns is not None
    return abs(a.latency_ns - b.latency_ns) <= max(noise_ns(a, tie_tolerance), noise_ns(b, tie_tolerance))


def stale_cutoff(policy: Policy, now: datetime) -> str:
    """The record timestamp before which a run is stale at ``now``.

    Record timestamps are fixed-width UTC (``YYYY-MM-DDTHH:MM:SS.mmmZ``), so
    they order as strings do.
    """
    return format_timestamp(now - timedelta(days=policy.stale_after_days))


def is_stale(run: RunFacts, policy: Policy, now: datetime) -> bool:
    """Observed longer ago than the policy's window."""
    return run.observed_at < stale_cutoff(policy, now)


def is_reference(run: RunFacts, definition: DefinitionFacts | None) -> bool:
    """Whether the run's implementation is the definition's own reference."""
    if definition is not None and run.implementation_entry_sha256 == definition.reference_sha256:
        return True
    return run.implementation_name == "reference"


# --------------------------------------------------------------------------- floors


@dataclass(frozen=True, slots=True)
class FloorEstimate:
    """The physical floor of one workload on one datasheet GPU (DESIGN §6)."""

    workload: str
    workload_name: str
    axes: dict[str, int]
    gpu: str
    bytes: int
    flops: int | None
    compute_dtype: str
    bandwidth_bound_ns: float
    compute_bound_ns: float | None
    floor_ns: float
    bound: str
    sources: tuple[str, ...]
    synthesized: tuple[str, ...]

    @property
    def method(self) -> str:
        return "bandwidth-bound" if self.bound == "bandwidth" else "compute-bound"

    def to_json(self) -> dict[str, Any]:
        """Exactly the members ``kictl floor --json`` publishes."""
        return {
            "workload": self.workload,
            "axes": self.axes,
            "gpu": self.gpu,
            "bytes": self.bytes,
            "flops": self.flops,
            "bandwidthBoundNs": _round_ns(self.bandwidth_bound_ns),
            "computeBoundNs": _round_ns(self.compute_bound_ns),
            "floorNs": _round_ns(self.floor_ns),
            "bound": self.bound,
            "sources": list(self.sources),
        }


def _round_ns(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def resolve_gpu(name: str, known: Iterable[str] = (), *, datasheet_only: bool = False) -> str:
    """The index's product name for ``--gpu``: a datasheet product or alias, or a product the registry names.

    Raises ``UsageError`` (exit 2: the option's value is not one of a known set)
    with the closest known names.
    """
    listed = find_gpu(name)
    if listed is not None:
        return listed.product
    product = normalize_product(name)
    registry_products = sorted(set(known))
    if not datasheet_only:
        for candidate in registry_products:
            if candidate.lower() == product.lower():
                return candidate
    choices = [gpu.product for gpu in GPUS] + ([] if datasheet_only else registry_products)
    aliases = [alias for gpu in GPUS for alias in gpu.aliases]
    near = closest(name, sorted(set(choices + aliases)))
    where = "in the datasheet table" if datasheet_only else "in the datasheet table or the registry"
    details = [f"closest known: {', '.join(near)}"] if near else [f"known: {', '.join(sorted(set(choices)))}"]
    raise UsageError(f"unknown GPU {name!r} ({where})", details=details)


def _spec_of(record: StoredRecord, kind: type[Any]) -> Any:
    spec = record.model.spec
    if not isinstance(spec, kind):
        raise RecordError(f"{record.digest} is a {record.kind}, not a {kind.__name__.removesuffix('Spec')}")
    return spec


def workload_work(index: QueryIndex, definition: DefinitionFacts, workload: WorkloadFacts) -> WorkFacts:
    """Bytes and FLOPs of a workload by its family's formulas, cached in the index.

    Raises ``RecordError`` when the workload does not fit its definition and
    ``RegistryError``/``NotFoundError`` when a record cannot be read.
    """
    cached = index.cached_work(workload.digest)
    if cached is not None:
        return cached
    definition_spec: DefinitionSpec = _spec_of(index.load_record(definition.digest), DefinitionSpec)
    workload_spec: WorkloadSpec = _spec_of(index.load_record(workload.digest), WorkloadSpec)
    made = families.structure(definition_spec, workload_spec, index.registry.read_blob, source=workload.name)
    family = families.family_for(definition_spec.family)
    work = WorkFacts(
        bytes=family.bytes_moved(definition_spec, made),
        flops=family.flops(definition_spec, made),
        compute_dtype=families.compute_dtype(definition_spec),
        synthesized=made.synthesized,
        notes=family.notes(definition_spec, made),
    )
    index.store_work(workload.digest, work)
    return work


def full_axes(index: QueryIndex, definition: DefinitionFacts, workload: WorkloadFacts) -> dict[str, int]:
    """The constant axes of the definition merged with the workload's variable ones."""
    spec: DefinitionSpec = _spec_of(index.load_record(definition.digest), DefinitionSpec)
    return families.full_axes(spec, workload.axes, source=workload.name)


def estimate_floor(
    index: QueryIndex, definition: DefinitionFacts, workload: WorkloadFacts, gpu: str
) -> FloorEstimate | None:
    """The floor of ``workload`` on ``gpu``, ``None`` when the GPU is not in the datasheet table.

    Raises ``RecordError`` when the workload does not fit its definition.
    """
    part = find_gpu(gpu)
    if part is None:
        return None
    work = workload_work(index, definition, workload)
    estimate = families.floor(families.Work(work.bytes, work.flops, work.compute_dtype, work.notes), part)
    return FloorEstimate(
        workload=workload.digest,
        workload_name=workload.name,
        axes=full_axes(index, definition, workload),
        gpu=part.product,
        bytes=work.bytes,
        flops=work.flops,
        compute_dtype=work.compute_dtype,
        bandwidth_bound_ns=estimate.bandwidth_bound_ns,
        compute_bound_ns=estimate.compute_bound_ns,
        floor_ns=estimate.floor_ns,
        bound=estimate.bound,
        sources=estimate.sources,
        synthesized=work.synthesized,
    )


def floors(
    index: QueryIndex, definition_ref: str, gpu_name: str, workload_ref: str | None = None
) -> tuple[DefinitionFacts, list[FloorEstimate]]:
    """``kictl floor``: the floor of every workload of a definition (or one) on a datasheet GPU.

    Raises ``NotFoundError`` (exit 3) for an unknown definition or workload,
    ``UsageError`` (exit 2) for a GPU not in the datasheet table, and
    ``RecordError`` for a workload that does not fit its definition.
    """
    definition = index.resolve_definition(definition_ref)
    gpu = resolve_gpu(gpu_name, datasheet_only=True)
    if workload_ref is not None:
        chosen = [index.resolve_workload(definition.digest, workload_ref)]
    else:
        chosen = index.workloads(definition.digest)
    out = []
    for workload in chosen:
        estimate = estimate_floor(index, definition, workload, gpu)
        assert estimate is not None
        out.append(estimate)
    return definition, out


# --------------------------------------------------------------------------- ranking a group


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

    @property
    def implementation_label(self) -> str:
        return self.run.implementation_name or self.run.implementation


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


def _evidence_ok(level: str, minimum: str) -> bool:
    return _EVIDENCE_ORDER.get(level, _EVIDENCE_ORDER["reported"]) >= _EVIDENCE_ORDER[minimum]


def _run_order(run: RunFacts) -> tuple[int, str, str]:
    assert run.latency_ns is not None
    return (run.latency_ns, run.observed_at, run.digest)


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
) -> RankedGroup:
    """The leaderboard of one comparison group, by the rules in this module's docstring."""
    excluded = {"notPassed": 0, "evidence": 0, "notBest": 0}
    passed = []
    for run in runs:
        if group_of(run) != key:
            raise ValueError(f"run {run.digest} is not in group {key.digest}")
        if run.status != "passed" or run.latency_ns is None:
            excluded["notPassed"] += 1
        elif not _evidence_ok(evidence.get(run.digest, "reported"), min_evidence):
            excluded["evidence"] += 1
        else:
            passed.append(run)
    references = [run for run in runs if run.status == "passed" and run.latency_ns and is_reference(run, definition)]
    reference_ns = min(run.latency_ns for run in references if run.latency_ns) if references else None
    best: dict[str, RunFacts] = {}
    for run in sorted(passed, key=_run_order):
        if run.implementation in best:
            excluded["notBest"] += 1
        else:
            best[run.implementation] = run
    ordered = sorted(best.values(), key=_run_order)
    cutoff = stale_cutoff(policy, now)
    rows: list[RankedRow] = []
    leader: RunFacts | None = None
    rank = 0
    for position, run in enumerate(ordered, start=1):
        assert run.latency_ns is not None
        tied = leader is not None and ties(leader, run, policy.tie_tolerance)
        if not tied:
            leader, rank = run, position
        first_ns = ordered[0].latency_ns
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
                evidence=evidence.get(run.digest, "reported"),
                stale=run.observed_at < cutoff,
                below_floor=None if floor is None else run.latency_ns < floor.floor_ns,
                tied=tied,
            )
        )
    name = runs[0].workload_name if runs and runs[0].workload_name else key.workload
    return RankedGroup(key, name, tuple(rows), reference_ns, floor, excluded)


# --------------------------------------------------------------------------- leaderboards


@dataclass(frozen=True, slots=True)
class Baseline:
    """The implementation (by name) a definition's speed-ups are over, and why it was chosen."""

    name: str
    source: str  # "policy", "flashinfer" or "reference"


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


@dataclass(frozen=True, slots=True)
class WorkloadBoard:
    """``kictl leaderboard DEFINITION --workload ID``: every group of one workload, in full."""

    definition: DefinitionFacts
    workload: WorkloadFacts
    groups: tuple[RankedGroup, ...]
    min_evidence: str
    unranked: int
    gpu: str | None = None


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


def definition_leaderboard(
    index: QueryIndex,
    definition_ref: str,
    *,
    policy: Policy,
    gpu: str | None = None,
    min_evidence: str = DEFAULT_EVIDENCE,
    evidence: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> DefinitionBoard:
    """The summary leaderboard of a definition, per GPU (DESIGN §6).

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
    if evidence is None:
        evidence = obtain_evidence(index.registry, [run.digest for run in runs])
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
        )
        if ranked.rows:
            sections.setdefault((key.gpu, key.comparability, key.statistic), []).append(ranked)
    boards = [
        _board(section, ranked_groups, len(workloads), baseline, definition)
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


def _board(
    section: tuple[str, str, str],
    ranked_groups: list[RankedGroup],
    total: int,
    baseline: Baseline | None,
    definition: DefinitionFacts,
) -> Board:
    records = []
    covered: dict[str, set[str]] = {}
    wins: dict[str, int] = {}
    names: dict[str, str] = {}
    logs: dict[str, list[float]] = {}
    by_reference = baseline is not None and baseline.source == "reference"
    for group in sorted(ranked_groups, key=lambda g: g.workload_name):
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
    return Board(gpu, comparability, statistic, tuple(records), tuple(summaries))


def workload_leaderboard(
    index: QueryIndex,
    definition_ref: str,
    workload_ref: str,
    *,
    policy: Policy,
    gpu: str | None = None,
    min_evidence: str = DEFAULT_EVIDENCE,
    evidence: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> WorkloadBoard:
    """Every comparison group of one workload (on one GPU when given), ranked in full.

    Raises ``NotFoundError`` (exit 3) for an unknown definition or workload and
    ``UsageError`` (exit 2) for an unknown GPU or evidence level.
    """
    check_evidence_level(min_evidence)
    definition = index.resolve_definition(definition_ref)
    workload = index.resolve_workload(definition.digest, workload_ref)
    product = resolve_gpu(gpu, index.gpu_products()) if gpu is not None else None
    runs = [run for run in index.runs_of_workload(workload.digest) if product is None or run.gpu == product]
    if evidence is None:
        evidence = obtain_evidence(index.registry, [run.digest for run in runs])
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
        )
        for key in sorted(groups)
    ]
    return WorkloadBoard(definition, workload, tuple(ranked), min_evidence, len(loose), product)


# --------------------------------------------------------------------------- diffs


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

    @property
    def equal(self) -> bool:
        return self.before.digest == self.after.digest and not self.changes


def diff_records(index: QueryIndex, before_ref: str, after_ref: str, *, policy: Policy) -> RecordDiff:
    """Compare two records field by field; two runs of one group also by latency and noise.

    Raises ``NotFoundError`` (exit 3) for an unknown or ambiguous reference.
    """
    _, before_digest, _ = index.resolve_any(before_ref)
    _, after_digest, _ = index.resolve_any(after_ref)
    before, after = index.load_record(before_digest), index.load_record(after_digest)
    changes = tuple(json_changes(before.raw, after.raw))
    same_group = key = ratio = exceeds = None
    if before.kind == "BenchmarkRun" and after.kind == "BenchmarkRun":
        runs = {run.digest: run for run in index.runs([before_digest, after_digest])}
        left, right = runs.get(before_digest), runs.get(after_digest)
        left_key = group_of(left) if left else None
        right_key = group_of(right) if right else None
        same_group = left_key is not None and left_key == right_key
        if same_group and left and right and left_key is not None:
            key = left_key.digest
            if left.latency_ns and right.latency_ns:
                ratio = right.latency_ns / left.latency_ns
                exceeds = not ties(left, right, policy.tie_tolerance)
    return RecordDiff(before, after, changes, same_group, key, ratio, exceeds)


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


def _ranked(
    index: QueryIndex,
    keys: Iterable[GroupKey],
    *,
    policy: Policy,
    evidence: Mapping[str, str],
    now: datetime,
    min_evidence: str,
) -> dict[GroupKey, RankedGroup]:
    wanted = set(keys)
    by_workload: dict[str, list[RunFacts]] = {}
    for key in wanted:
        by_workload.setdefault(key.workload, [])
    for workload in by_workload:
        by_workload[workload] = index.runs_of_workload(workload)
    out = {}
    for key in wanted:
        runs = [run for run in by_workload[key.workload] if group_of(run) == key]
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
    old_groups = _ranked(before, keys, policy=policy, evidence=evidence, now=before_time, min_evidence=min_evidence)
    new_groups = _ranked(after, keys, policy=policy, evidence=evidence, now=after_time, min_evidence=min_evidence)
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
    ``policy.staleAfterDays`` before ``now``; DESIGN §6), ranked as
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


# --------------------------------------------------------------------------- history


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
) -> History:
    """When each record related to ``target`` entered the registry, and how each group's #1 changed.

    ``target`` is a definition, implementation or any record (name, digest or
    prefix).  Entry times come from git: the commit that first added the
    record's file.  Raises ``NotFoundError`` (exit 3) for an unknown target.
    """
    kind, digest, name = index.resolve_any(target)
    related, runs = _related(index, kind, digest)
    registry = index.registry
    added: dict[str, Any] = {}
    order: dict[str, int] = {}
    if registry.is_git_repository() and index.commit is not None:
        added = registry.git.first_added("registry/records")
        order = {info.sha: position for position, info in enumerate(registry.git.commits())}
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
    entries.sort(key=lambda e: (order.get(e.commit or "", len(order)), e.digest != digest, e.kind, e.name))
    if evidence is None:
        evidence = obtain_evidence(registry, [run.digest for run in runs])

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
    groups_out.sort(key=lambda group: (group.workload_name, group.key))
    return History(kind, digest, name, tuple(entries), tuple(groups_out))


# --------------------------------------------------------------------------- citation


@dataclass(frozen=True, slots=True)
class Citation:
    """``kictl cite``: how to cite one record."""

    kind: str
    digest: str
    name: str
    title: str
    permalink: str
    commit: str | None
    committed: str | None  # the commit's date
    accessed: str  # YYYY-MM-DD

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "digest": self.digest,
            "name": self.name,
            "title": self.title,
            "permalink": self.permalink,
            "commit": self.commit,
            "committed": self.committed,
            "accessed": self.accessed,
        }


def _default_title(index: QueryIndex, record: StoredRecord) -> str:
    if record.kind != "BenchmarkRun":
        return f"KernelIndex {record.kind} {record.name}"
    (run,) = index.runs([record.digest])
    definition = index.definition(run.definition) if run.definition else None
    parts = [
        run.implementation_name or run.implementation,
        "on",
        f"{definition.name if definition else '?'}/{run.workload_name or '?'},",
        run.gpu or "unknown GPU",
    ]
    if run.latency_ns is not None and run.statistic is not None:
        parts.append(f"({run.statistic} {run.latency_ns} ns)")
    return "KernelIndex run: " + " ".join(parts)


def citation(index: QueryIndex, ref: str, *, policy: Policy, accessed: datetime | None = None) -> Citation:
    """Title, digest, permalink, adding commit and access date of a record.

    Raises ``NotFoundError`` (exit 3) for an unknown or ambiguous reference.
    """
    kind, digest, name = index.resolve_any(ref)
    record = index.load_record(digest)
    title = record.title or _default_title(index, record)
    commit = date = None
    registry = index.registry
    path = index.path_of(digest)
    if registry.is_git_repository() and index.commit is not None and path is not None:
        info = registry.git.first_added(path).get(path)
        if info is not None:
            commit, date = info.sha, info.date
    moment = _now(accessed)
    return Citation(
        kind=kind,
        digest=digest,
        name=name,
        title=title,
        permalink=policy.permalink_base + digest,
        commit=commit,
        committed=date,
        accessed=moment.strftime("%Y-%m-%d"),
    )


_BIBTEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "%": r"\%",
    "&": r"\&",
    "#": r"\#",
    "_": r"\_",
    "$": r"\$",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def bibtex_escape(text: str) -> str:
    """Text safe inside a BibTeX field (LaTeX special characters escaped)."""
    return "".join(_BIBTEX_SPECIAL.get(char, char) for char in text)


def bibtex(cite: Citation) -> str:
    """A ``@misc`` BibTeX entry for the citation."""
    hex_digest = canon.digest_hex(cite.digest)
    year = (cite.committed or cite.accessed)[:4]
    added = (
        f"added in commit {cite.commit[:12]} ({cite.committed[:10]})"
        if cite.commit and cite.committed
        else ("not yet committed")
    )
    lines = [
        f"@misc{{kernelindex_{hex_digest[:12]},",
        f"  title        = {{{{{bibtex_escape(cite.title)}}}}},",
        "  author       = {{KernelIndex}},",
        f"  year         = {{{year}}},",
        f"  howpublished = {{\\url{{{cite.permalink}}}}},",
        f"  note         = {{{bibtex_escape(cite.kind)} {cite.digest}, {added}; accessed {cite.accessed}}},",
        f"  urldate      = {{{cite.accessed}}}",
        "}",
    ]
    return "\n".join(lines)
