"""Constants shared by the modules of ``kictl.rank``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from kictl.errors import UsageError
from kictl.store import Registry

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
    """The evidence level of each run digest (docs/trust.md): the one place that asks for it.

    ``kictl.trust.evidence_levels(registry, digests)`` computes it from the
    attestations once the trust module provides it; until then every run is
    ``unsigned``.  Raises whatever the trust module raises.
    """
    from kictl import trust

    levels = getattr(trust, "evidence_levels", None)
    if levels is None:
        return dict.fromkeys(digests, NO_EVIDENCE)
    return dict(levels(registry, list(digests)))


def leave_out_verifier_reruns(registry: Registry, runs: Sequence[T]) -> list[T]:
    """``runs`` without verifiers' own reruns (docs/rerun.md): a rerun is evidence about a run, not a contender.

    ``kictl.trust.verifier_rerun_runs`` names them from the valid verifier
    ``rerun`` attestations.  Raises ``CheckFailed`` when the trust root does not verify.
    """
    from kictl import trust

    reruns = trust.verifier_rerun_runs(registry)
    if not reruns:
        return list(runs)
    return [run for run in runs if getattr(run, "digest", None) not in reruns]


def runs_and_evidence(registry: Registry, runs: Sequence[T]) -> tuple[list[T], dict[str, str]]:
    """``leave_out_verifier_reruns`` (and validly retracted runs) and ``obtain_evidence`` of what is left, from one
    pass over the attestations.

    Raises ``CheckFailed`` when the trust root does not verify.
    """
    from kictl import trust

    levels, reruns = trust.ranking_trust(registry, [getattr(run, "digest", "") for run in runs])
    kept = [run for run in runs if getattr(run, "digest", None) not in reruns]
    return kept, cap_levels(kept, {digest: level for digest, level in levels.items() if digest not in reruns})


def cap_levels(runs: Sequence[Any], levels: Mapping[str, str]) -> dict[str, str]:
    """``levels`` with each run that keeps no samples held to ``reported`` at best (``kictl.derived.cap_evidence``).

    ``runs`` are ``RunFacts`` (``samples``: how many the record keeps); a level of a run not among them is kept.
    """
    from kictl.derived import cap_evidence

    capped = dict(levels)
    for run in runs:
        digest = getattr(run, "digest", None)
        if digest in capped and getattr(run, "samples", 1) == 0:
            capped[digest] = cap_evidence(capped[digest], False)
    return capped


def advisory_marks(registry: Registry, runs: Sequence[Any]) -> dict[str, tuple[str, ...]]:
    """Run digest → the open harness advisories that mark it (docs/advisories.md), for ``rank_group``.

    ``runs`` are ``RunFacts`` (digest, protocol, status).  Nothing is imported or verified when the
    registry has, and had, no advisory file.  Raises ``CheckFailed`` when there are advisories and the
    trust root does not verify.
    """
    from kictl.advisories.memory import traces  # light: also what git history or this machine saw deleted

    if not traces(registry.root):
        return {}
    from kictl.advisories import RunRef, run_marks

    refs = [RunRef(run.digest, run.protocol, run.status) for run in runs]
    return run_marks(registry, refs).marked


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
