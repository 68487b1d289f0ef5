"""The registry's policy: ``registry/policy.json``.

It holds the numbers that ranking, review and citation need and that a
registry's maintainers may choose: how old a run may be before it is shown as
stale, the tolerance under which two latencies tie when their samples are not
known, which implementation is the baseline of each definition, and the base
URL of permalinks.  The policy is a small closed document, validated like a
record (unknown members are errors), but it is not a record and has no digest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from kictl import canon
from kictl.errors import RecordError, RegistryError
from kictl.records import WireModel


class FloorPolicy(WireModel):
    #: "datasheet": bytes over datasheet bandwidth, FLOPs over datasheet dense peak.
    model: Literal["datasheet"] = "datasheet"


class EnergyPolicy(WireModel):
    """What energy runs (family ``kictl-nvml-energy``, issue 31) must show to rank: ``None`` asks nothing."""

    #: Only runs whose board's enforced power limit was exactly this (mW) rank.
    power_limit_milliwatts: int | None = Field(default=None, ge=1)
    #: Only runs whose clocks held during the loops (no throttling, SM clock within 5%) rank.
    steady_clocks: bool = False
    #: Relative difference under which two energy figures tie (raised to the runs' own spread).
    tie_tolerance: float = Field(default=0.03, ge=0.0, le=1.0)


class Policy(WireModel):
    api_version: Literal["kernelindex.dev/v1alpha1"] = "kernelindex.dev/v1alpha1"
    kind: Literal["Policy"] = "Policy"
    #: A run observed longer ago than this is shown as stale.
    stale_after_days: int = Field(default=365, ge=1)
    #: Relative difference under which two latencies tie when samples are unknown.
    tie_tolerance: float = Field(default=0.02, ge=0.0, le=1.0)
    #: A verifier's rerun agrees when its latency is within this ratio of the run's.
    rerun_tolerance: float = Field(default=0.10, ge=0.0, le=10.0)
    #: Per definition name, the implementation name the leaderboard's speed-ups are over.
    baselines: dict[str, str] = Field(default_factory=dict)
    #: Prefix of a record's permalink; the digest is appended.
    permalink_base: str = "https://kernelindex.dev/r/"
    floor: FloorPolicy = Field(default_factory=FloorPolicy)
    #: How energy runs rank (issue 31); absent: the defaults of ``EnergyPolicy``.
    energy: EnergyPolicy | None = None
    #: What a leaderboard does with a run under an open harness advisory (docs/advisories.md): "rank" (it
    #: ranks, labelled), "apart" (below every unmarked run of its group, labelled) or "drop" (left out until
    #: a controlled rerun by an unaffected harness clears it).
    advised_runs: Literal["rank", "apart", "drop"] = "apart"


def default_policy_document() -> dict[str, object]:
    """The policy a new registry starts with, as JSON."""
    return Policy().model_dump(mode="json", by_alias=True, exclude_none=True)


def load_policy(path: Path) -> Policy:
    """Read ``registry/policy.json``; a missing file means the defaults.

    Raises ``RecordError`` for an invalid document and ``RegistryError`` when
    the file cannot be read.
    """
    if not path.exists():
        return Policy()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RegistryError(f"cannot read: {exc.strerror}", path=str(path)) from exc
    return parse_policy(data, str(path))


def parse_policy(data: bytes, source: str) -> Policy:
    """The policy in ``data`` (strict JSON); raises ``RecordError`` naming ``source``."""
    canon.parse_json(data, source=source)
    try:
        return Policy.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = canon.format_path(tuple(first["loc"]))
        raise RecordError(first["msg"], path=source, pointer=where) from exc
