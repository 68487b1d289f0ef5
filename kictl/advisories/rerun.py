"""``kictl rerun --advisory ID``: the runs an advisory marks that this machine can rerun comparably.

A marked run is rerun here when it passed (only passed runs are rerun) and
``kictl rerun`` would not refuse it: its kind of device is here (a CPU run on
any machine, a GPU run where a GPU is) and this machine's product and
comparability family are the original's.  The others are listed with the
reason, for a machine that can.
"""

from __future__ import annotations

from kictl.errors import KictlError
from kictl.rerun import execute
from kictl.rerun.job import build_job, refusals
from kictl.standing import affected_runs
from kictl.store.registry import Registry


def runnable_advised_runs(registry: Registry, advisory_id: str) -> tuple[list[str], list[tuple[str, str]]]:
    """``(digests to rerun here, [(digest, why not here)])`` of the runs ``advisory_id`` marks now.

    Raises ``NotFoundError`` for an unknown advisory, ``CheckFailed`` when the trust root does not verify.
    """

    _, marks = affected_runs(registry, advisory_id)
    here: list[str] = []
    elsewhere: list[tuple[str, str]] = []
    products: dict[str, str] = {}
    for digest in sorted(marks.marked):
        try:
            job = build_job(registry, digest)
            if job.run.raw["spec"].get("status") != "passed":
                elsewhere.append((digest, "it did not pass: only passed runs are rerun"))
                continue
            device = execute.resolve_device("auto", job.settings)
            if device not in products:
                products[device] = str(execute.machine_environment(device)["hardware"]["product"])
            reasons = refusals(job, products[device], execute.measured_family(job.settings, device))
        except KictlError as exc:
            elsewhere.append((digest, exc.message))
            continue
        if reasons:
            elsewhere.append((digest, "; ".join(reasons)))
        else:
            here.append(digest)
    return here, elsewhere
