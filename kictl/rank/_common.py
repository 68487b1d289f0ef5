"""Constants shared by the modules of ``kictl.rank``, and what they ask ``kictl.standing`` about runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from kictl.errors import UsageError
from kictl.standing import RunRef, board_runs, evidence_levels, verifier_rerun_runs
from kictl.standing import advisory_marks as standing_marks
from kictl.store.registry import Registry

T = TypeVar("T")

#: Evidence levels from weakest to strongest (docs/trust.md); ``--evidence`` is a minimum.  ``unsigned``
#: (nobody the trust root knows vouches for the run) is above ``disputed`` (a verifier's rerun contradicts
#: it) and below ``reported`` (a valid submission signature).
EVIDENCE_LEVELS = ("disputed", "unsigned", "reported", "verified")
#: Leaderboards show every run by default: unsigned runs labelled and ranked after signed ones they tie with,
#: disputed runs labelled and ranked after every undisputed run (a verifier contradicted their claim; hiding
#: them would let a slower run look like the record without saying why).  ``--evidence`` raises the minimum.
DEFAULT_EVIDENCE = "disputed"
#: The level of a run nothing is known about: no attestation verified, so no signature.
NO_EVIDENCE = "unsigned"
_EVIDENCE_ORDER = {level: position for position, level in enumerate(EVIDENCE_LEVELS)}


def obtain_evidence(registry: Registry, digests: Sequence[str]) -> dict[str, str]:
    """The evidence level of each run digest (docs/trust.md), as ``kictl.standing`` judges it.

    Raises ``CheckFailed`` when the trust root does not verify.
    """
    return evidence_levels(registry, list(digests))


def leave_out_verifier_reruns(registry: Registry, runs: Sequence[T]) -> list[T]:
    """``runs`` without verifiers' own reruns (docs/rerun.md): a rerun is evidence about a run, not a contender.

    ``kictl.standing.verifier_rerun_runs`` names them.  Raises ``CheckFailed`` when the trust root does not verify.
    """
    reruns = verifier_rerun_runs(registry)
    if not reruns:
        return list(runs)
    return [run for run in runs if getattr(run, "digest", None) not in reruns]


def runs_and_evidence(registry: Registry, runs: Sequence[T]) -> tuple[list[T], dict[str, str]]:
    """``runs`` without those a leaderboard leaves out (verifiers' own reruns, validly retracted runs) and the
    evidence level of what is left (``kictl.standing.board_runs``).

    Raises ``CheckFailed`` when the trust root does not verify.
    """
    return board_runs(registry, runs)


def advisory_marks(registry: Registry, runs: Sequence[Any]) -> dict[str, tuple[str, ...]]:
    """Run digest → the open harness advisories that mark it (docs/advisories.md), for ``rank_group``.

    ``runs`` are ``RunFacts`` (digest, protocol, status); ``kictl.standing.advisory_marks`` judges them.
    Raises ``CheckFailed`` when there are advisories and the trust root does not verify.
    """
    return standing_marks(registry, [RunRef(run.digest, run.protocol, run.status) for run in runs])


#: ``digests -> {digest: level}``: where a caller's evidence levels come from when not from the
#: working tree (``kictl review`` judges the head's attestations by the base's trust root).
EvidenceSource = Callable[[Sequence[str]], Mapping[str, str]]


def evidence_rank(level: str) -> int:
    """Position of ``level`` in ``EVIDENCE_LEVELS`` (higher is stronger); an unknown level counts as unsigned."""
    return _EVIDENCE_ORDER.get(level, _EVIDENCE_ORDER[NO_EVIDENCE])


def check_evidence_level(level: str) -> str:
    """``level`` when it is one of ``EVIDENCE_LEVELS``; raises ``UsageError`` (exit 2)."""
    if level not in _EVIDENCE_ORDER:
        raise UsageError(f"unknown evidence level {level!r}; expected one of {', '.join(EVIDENCE_LEVELS)}")
    return level
