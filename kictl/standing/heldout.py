"""What verifiers' reruns found on held-out shapes (issue 32, DESIGN §10, §15): a run's held-out verdict.

A verifier's ``rerun`` attestation may carry ``heldOut``: the kernel's
correctness on shapes drawn after it was submitted (``kictl.rerun.heldout``
draws and judges them; this module only reads the signed verdicts back).  A
run *generalizes* when a valid verifier rerun says so and none says it
``fails on held-out shapes``; a run no rerun judged has no verdict.  Every
envelope is verified as ``kictl verify`` verifies it (``trust.check_record``:
every signature, the trust root's roles, the signed policy).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from kictl.errors import KictlError
from kictl.store.registry import Registry
from kictl.trust import VerifyReport, check_record

Verdict = Literal["generalizes", "fails on held-out shapes", "skipped"]
GENERALIZES: Verdict = "generalizes"
FAILS: Verdict = "fails on held-out shapes"
SKIPPED: Verdict = "skipped"


def claims_held_out(path: Path) -> bool:
    """Whether an envelope's (unverified) payload carries a held-out verdict other than skipped; never raises."""
    try:
        statement = json.loads(base64.b64decode(json.loads(path.read_bytes())["payload"]))
        verdict = statement["predicate"]["heldOut"]["verdict"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return verdict in (GENERALIZES, FAILS)


def report_verdicts(report: VerifyReport) -> list[Any]:
    """The ``heldOut`` verdicts of a record's valid verifier ``rerun`` attestations (``trust.check_record``)."""
    return [
        result.attestation.predicate_json.get("heldOut", {}).get("verdict")
        for result in report.attestations
        if result.valid
        and result.counts_for == "evidence"
        and result.predicate_type == "rerun"
        and result.attestation is not None
    ]


def verdict_of(verdicts: Sequence[Any]) -> str | None:
    """The one rule: ``fails on held-out shapes`` when any verifier rerun says so, else ``generalizes`` when
    one says that, else no verdict."""
    if FAILS in verdicts:
        return FAILS
    if GENERALIZES in verdicts:
        return GENERALIZES
    return None


def held_out_verdicts(registry: Registry, runs: Sequence[str]) -> dict[str, str]:
    """``run digest -> generalizes | fails on held-out shapes`` from valid verifier ``rerun`` attestations.

    A run appears only when such an attestation judges it (``verdict_of``).
    Only runs with an envelope that claims a held-out verdict are verified,
    so readers of a registry without held-out checks pay one directory
    listing a run.  Never raises for a run that cannot be checked.
    """
    found: dict[str, str] = {}
    for run in dict.fromkeys(runs):
        folder = registry.attestation_folder(run)
        try:
            claims = folder.is_dir() and any(claims_held_out(path) for path in sorted(folder.glob("*.dsse.json")))
        except OSError:
            claims = False
        if not claims:
            continue
        try:
            report = check_record(registry, run)
        except KictlError:
            continue
        verdict = verdict_of(report_verdicts(report))
        if verdict is not None:
            found[run] = verdict
    return found


def with_held_out(group: dict[str, Any], verdicts: Mapping[str, str]) -> dict[str, Any]:
    """A comparison group's ``--json`` document with each row's ``heldOut`` verdict (``null`` where none)."""
    for row in group.get("rows", []):
        row["heldOut"] = verdicts.get(row["run"])
    return group


def generalizing(registry: Registry) -> Callable[[str], bool]:
    """``run digest -> True`` when ``verdict_of`` its verifier reruns is ``generalizes``.

    Reads each asked-for run's attestations through ``trust.check_record`` and
    caches the answer.  A run without a held-out verdict does not generalize.
    Raises what ``check_record`` raises.
    """
    cache: dict[str, bool] = {}

    def generalizes(run: str) -> bool:
        if run not in cache:
            cache[run] = verdict_of(report_verdicts(check_record(registry, run))) == GENERALIZES
        return cache[run]

    return generalizes
