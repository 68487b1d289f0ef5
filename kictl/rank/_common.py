"""Constants shared by the modules of ``kictl.rank``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kictl.errors import UsageError
from kictl.store import Registry

#: Evidence levels from weakest to strongest (docs/trust.md); ``--evidence`` is a minimum.
EVIDENCE_LEVELS = ("disputed", "reported", "verified")
DEFAULT_EVIDENCE = "reported"
_EVIDENCE_ORDER = {level: position for position, level in enumerate(EVIDENCE_LEVELS)}


def obtain_evidence(registry: Registry, digests: Sequence[str]) -> dict[str, str]:
    """The evidence level of each run digest (docs/trust.md): the one place that asks for it.

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
