"""Comparison groups, ranking, floors, leaderboard summaries, diffs and histories (docs/leaderboards.md).

The reader's question is "what is the fastest correct implementation of this
kernel, for this exact workload, on this GPU, and how sure are we?".  This
module answers it from the query index (``kictl.index``) and never prints.

Comparison groups (docs/leaderboards.md).  Two runs are compared only when they share
the workload digest, the GPU product (``families.gpus.normalize_product`` of
the environment's ``hardware.product``), the protocol's comparability family
and the run's primary statistic.  The group's *comparison key* is
``sha256:`` + hex sha256 of the JCS bytes of ``{"comparabilityFamily",
"gpu", "primaryStatistic", "workloadDigest"}``.  A run whose workload,
protocol or environment is not in the registry belongs to no group.

Ranking a group.
1. Only runs with status ``passed`` and evidence at or above the chosen
   minimum (``disputed`` < ``unsigned`` < ``reported`` < ``verified``) take
   part; the default minimum is ``unsigned``.
2. Each implementation (record digest) keeps its best run: the lowest primary
   latency, then the stronger evidence, then the earlier ``observedAt``, then
   the smaller digest.
3. Rows are ordered by latency.  *Ties within noise*: a run's noise is half
   the width of its 10–90 % band, ``(p90 − p10) / 2``, taken from its samples
   when it has at least two, else from its ``latencyNs.p10`` and ``p90``, else
   ``policy.tieTolerance × latency``.  Two runs tie when their latencies differ
   by no more than the larger of their two noises.  Walking down the sorted
   rows, a row shares the rank of the first row of the current rank (its
   *leader*) when it ties with that leader; otherwise it opens a new rank
   numbered by its position (competition ranking: 1, 1, 3).  Evidence breaks
   ties: among the rows that tie with one leader, the stronger level comes
   first and only rows of the same level share a rank, so an unsigned run
   ranks below a signed (``reported``) one it ties with.
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

Evidence levels, verifier reruns, retractions and advisory marks come from
``kictl.standing`` (docs/trust.md) through ``_common`` (``obtain_evidence``,
``runs_and_evidence``, ``advisory_marks``), unless a caller brings its own
``EvidenceSource`` (``kictl review`` judges a PR head's attestations).

Diffs and stale groups serve ``kictl diff`` and ``kictl review``: what changed
per group between two revisions (``diff_revisions``), and the groups of a
PR's definitions and GPUs whose #1 is stale, which a new run could refresh
(``stale_groups``).

The package, by concern (every public name is re-exported here)::

    _common       evidence levels and what the boards ask ``kictl.standing``
    groups        comparison groups, noise and ties
    floors        physical floors (``kictl floor``)
    ranking       ranking one group
    leaderboards  definition and workload leaderboards
    diffs         ``kictl diff`` of records and of revisions
    history       ``kictl history``
    citation      ``kictl cite``
"""

from __future__ import annotations

from kictl.rank._common import (
    DEFAULT_EVIDENCE,
    EVIDENCE_LEVELS,
    NO_EVIDENCE,
    EvidenceSource,
    check_evidence_level,
    evidence_rank,
    leave_out_verifier_reruns,
    obtain_evidence,
)
from kictl.rank.citation import Citation, bibtex, bibtex_escape, citation
from kictl.rank.diffs import (
    FieldChange,
    GroupChange,
    RankChange,
    RecordDiff,
    StateDiff,
    commit_time,
    diff_records,
    diff_revisions,
    diff_states,
    json_changes,
    stale_groups,
)
from kictl.rank.floors import (
    FloorEstimate,
    estimate_floor,
    floors,
    full_axes,
    resolve_gpu,
    workload_work,
)
from kictl.rank.groups import (
    GroupKey,
    comparison_key,
    group_of,
    group_runs,
    is_reference,
    is_stale,
    noise_ns,
    stale_cutoff,
    ties,
)
from kictl.rank.history import Entry, GroupHistory, History, LeaderChange, history
from kictl.rank.leaderboards import (
    Baseline,
    Board,
    DefinitionBoard,
    ImplementationSummary,
    WorkloadBoard,
    WorkloadRecord,
    _now,
    axes_key,
    axes_label,
    choose_baseline,
    definition_leaderboard,
    distinguishing_axes,
    workload_leaderboard,
)
from kictl.rank.ranking import RankedGroup, RankedRow, rank_group

__all__ = [
    "DEFAULT_EVIDENCE",
    "EVIDENCE_LEVELS",
    "NO_EVIDENCE",
    "Baseline",
    "Board",
    "Citation",
    "DefinitionBoard",
    "Entry",
    "EvidenceSource",
    "FieldChange",
    "FloorEstimate",
    "GroupChange",
    "GroupHistory",
    "GroupKey",
    "History",
    "ImplementationSummary",
    "LeaderChange",
    "RankChange",
    "RankedGroup",
    "RankedRow",
    "RecordDiff",
    "StateDiff",
    "WorkloadBoard",
    "WorkloadRecord",
    "_now",
    "axes_key",
    "axes_label",
    "bibtex",
    "bibtex_escape",
    "check_evidence_level",
    "choose_baseline",
    "citation",
    "commit_time",
    "comparison_key",
    "definition_leaderboard",
    "diff_records",
    "diff_revisions",
    "diff_states",
    "distinguishing_axes",
    "estimate_floor",
    "evidence_rank",
    "floors",
    "full_axes",
    "group_of",
    "group_runs",
    "history",
    "is_reference",
    "is_stale",
    "json_changes",
    "leave_out_verifier_reruns",
    "noise_ns",
    "obtain_evidence",
    "rank_group",
    "resolve_gpu",
    "stale_cutoff",
    "stale_groups",
    "ties",
    "workload_leaderboard",
    "workload_work",
]
