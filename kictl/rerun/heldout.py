"""Held-out shapes in controlled reruns: does a kernel generalize beyond the benchmarked shapes? (DESIGN §10, §15)

A kernel tuned to the workloads it was benchmarked on (a hard-coded batch
size, a grid sized for one shape) is right on those shapes only.  A verifier's
rerun therefore also checks correctness, not speed, on shapes the submitter
never saw:

* the shapes are drawn from the definition's legal axis values
  (``kictl.families.legal``: ranges, multiples and choices stated as
  ``constraints``) and are none of the submitted workloads' shapes;
* the draw is seeded by a secret made when the rerun starts and disclosed in
  the rerun attestation afterwards, so anyone can redraw the same shapes and
  nobody could know them in advance;
* the verdict is ``generalizes`` or ``fails on held-out shapes`` (with the
  shapes that failed); where the definition states no legal values the check
  says so and is ``skipped``.

The verdict travels in the ``rerun`` attestation's predicate as ``heldOut``;
``generalizing`` reads it back for ``kictl export flashinfer-trace
--require-generalizes``.
"""

from __future__ import annotations

from collections.abc import Callable

from kictl.store import Registry

GENERALIZES = "generalizes"
FAILS = "fails on held-out shapes"
SKIPPED = "skipped"


def generalizing(registry: Registry) -> Callable[[str], bool]:
    """``run digest -> True`` when a valid verifier ``rerun`` attestation says it generalizes and none says otherwise.

    Reads each asked-for run's attestations through ``kictl.trust.check_record``
    (every signature verified, the trust root's roles applied) and caches
    the answer.  A run without a held-out verdict does not generalize.
    """
    from kictl import trust

    cache: dict[str, bool] = {}

    def generalizes(run: str) -> bool:
        if run not in cache:
            report = trust.check_record(registry, run)
            verdicts = [
                result.attestation.predicate_json.get("heldOut", {}).get("verdict")
                for result in report.attestations
                if result.valid
                and result.counts_for == "evidence"
                and result.predicate_type == "rerun"
                and result.attestation is not None
            ]
            cache[run] = GENERALIZES in verdicts and FAILS not in verdicts
        return cache[run]

    return generalizes
