"""Which runs an advisory marks, which controlled reruns clear a mark, and what the policy does with the rest.

A BenchmarkRun is *marked* by an open advisory when its protocol matches the
advisory's ``affects`` (``document.protocol_matches``) and, for an advisory of
``impact: failures`` (a false positive: only failing verdicts may be wrong),
when the run did not pass.  A mark is *cleared* for that run when a
``verifier``-role ``rerun`` attestation about it verifies and names a rerun
BenchmarkRun in the registry whose own protocol the advisory does not match:
an unaffected harness measured it again.  Community reruns never clear.

The registry's policy (``advisedRuns``) then decides what a leaderboard does
with a marked run: ``rank`` (it ranks, labelled), ``apart`` (it ranks below
every unmarked run of its group, labelled; the default) or ``drop`` (it is
left out until a rerun clears it).  ``verify``, ``show``, ``cite``, the site
and ``--json`` show the marks whatever the policy.

This module holds the rules (``marks_run``, ``clears``); ``kictl.standing`` applies them to a registry's runs
(``kictl.standing.run_marks``), since clearing needs the verifier reruns it judges.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kictl.advisories.document import Advisory, protocol_matches
from kictl.render import with_advisories

#: ``policy.advisedRuns``: what a leaderboard does with a run under an open advisory.
ADVISED_RUNS = ("rank", "apart", "drop")


@dataclass(frozen=True, slots=True)
class RunRef:
    """What matching needs of a run: its digest, its protocol's digest and its status."""

    digest: str
    protocol: str
    status: str


@dataclass
class Marks:
    """Per run digest, the open advisories that mark it (ids, sorted) and the ones a rerun cleared."""

    marked: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: run → ``(advisory id, the rerun run that cleared it)``
    cleared: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    advisories: dict[str, Advisory] = field(default_factory=dict)

    def of(self, digest: str) -> tuple[str, ...]:
        return self.marked.get(digest, ())

    def __bool__(self) -> bool:
        return bool(self.marked or self.cleared)

    def run_json(self, digest: str) -> dict[str, Any]:
        """The ``advisories`` member readers add to a run's ``--json`` document."""
        return {
            "marked": [
                {"id": advisory_id, "version": self.advisories[advisory_id].version,
                 "summary": self.advisories[advisory_id].summary, "impact": self.advisories[advisory_id].impact}
                for advisory_id in self.of(digest)
            ],
            "cleared": [{"id": advisory_id, "byRerun": rerun} for advisory_id, rerun in self.cleared.get(digest, ())],
        }  # fmt: skip


def label(level: str, ids: Iterable[str]) -> str:
    """``verified · harness advisory KI-2026-0001``: the evidence level with the marks, as readers print it."""
    return with_advisories(level, tuple(ids))


def marks_run(advisory: Advisory, spec: Mapping[str, Any] | None, status: str) -> bool:
    """Whether ``advisory`` marks a run of protocol ``spec`` and ``status``: the one rule for readers and review.

    Its protocol matches ``affects``, and for ``impact: failures`` (a false positive) the run did not pass.
    A protocol that cannot be read (``None``) matches nothing.
    """
    if spec is None or not protocol_matches(advisory.affects, spec):
        return False
    return advisory.impact == "results" or status != "passed"


def clears(advisory: Advisory, rerun_spec: Mapping[str, Any] | None) -> bool:
    """Whether a verifier's rerun measured with protocol ``rerun_spec`` clears ``advisory``'s mark on the run it
    reran: the one rule (module docstring).  An unaffected harness measured it again; an unreadable protocol
    (``None``) clears nothing."""
    return rerun_spec is not None and not protocol_matches(advisory.affects, rerun_spec)
