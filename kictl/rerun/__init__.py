"""Controlled reruns: ``kictl rerun`` and ``kictl attest rerun`` (DESIGN §5, §10, issue 14).

A verifier reruns a submitted BenchmarkRun on the same GPU product under the
same protocol, from the registry's own records, with fresh secret seeds for
the correctness rounds, and signs the verdict as a ``rerun`` attestation with
a ``verifier``-role key; ``kictl.trust`` turns those attestations into the
evidence levels ``verified`` and ``disputed``.  The machine that runs
submitted code never holds the key: ``kictl rerun --out DIR`` writes unsigned
results, ``kictl attest rerun DIR --key K`` checks and signs them elsewhere.

* ``job``: the original run's job, rebuilt from the registry; run selection
  (digests, ``--base REV``); refusals (another GPU, another family).
* ``execute``: the one seam to the bench machinery.
* ``verdict``: agrees / disagrees / failed / inconclusive.
* ``session``: ``rerun_runs``, the whole of ``kictl rerun``.
* ``results``: the unsigned results folder.
* ``attest``: ``check_results`` and ``sign_results``, the whole of ``kictl attest rerun``.
* ``heldout``: drawing and judging held-out shapes (readers read the verdicts through ``kictl.standing``).

Which runs are verifiers' reruns, and what readers believe about a run, is ``kictl.standing``'s.
"""

from __future__ import annotations

from kictl.rerun.attest import AttestReport, CheckedRerun, check_results, sign_results
from kictl.rerun.job import ProtocolSettings, RerunJob, build_job, runs_added, select_runs
from kictl.rerun.results import RerunResult, RerunResults, read_results, write_results
from kictl.rerun.session import RerunRefused, RerunReport, rerun_runs
from kictl.rerun.verdict import Judgement, judge

__all__ = [
    "AttestReport",
    "CheckedRerun",
    "Judgement",
    "ProtocolSettings",
    "RerunJob",
    "RerunRefused",
    "RerunReport",
    "RerunResult",
    "RerunResults",
    "build_job",
    "check_results",
    "judge",
    "read_results",
    "rerun_runs",
    "runs_added",
    "select_runs",
    "sign_results",
    "write_results",
]
