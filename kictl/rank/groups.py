"""Comparison groups (runs of one workload on one GPU under one protocol family and statistic) and the
noise that decides ties.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache

from kictl import canon
from kictl.index.facts import DefinitionFacts, RunFacts
from kictl.policy import Policy
from kictl.records import format_timestamp


@lru_cache(maxsize=65536)
def comparison_key(workload_digest: str, gpu: str, comparability_family: str, primary_statistic: str) -> str:
    """The digest naming a comparison group (docs/leaderboards.md)."""
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
