"""``kictl rerun``: rerun published BenchmarkRuns on this machine and judge them (DESIGN §10).

``rerun_runs`` rebuilds each run's job from the registry (``job``), refuses
what this machine cannot rerun comparably (another GPU product, another
comparability family) unless forced, runs the jobs through the bench seam
(``execute``), one bench session per implementation and protocol, and judges
each rerun against its original (``verdict``).  It returns a
``RerunReport``: the unsigned results and the records the reruns made, which
``results.write_results`` writes for ``kictl attest rerun`` to check and sign.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import kictl
from kictl.errors import EnvError, UsageError
from kictl.policy import Policy
from kictl.records import BenchmarkRunSpec, StoredRecord, format_timestamp
from kictl.rerun import execute, heldout
from kictl.rerun.job import RerunJob, build_job, group_jobs, refusals, select_runs
from kictl.rerun.request import RerunRequest
from kictl.rerun.results import RerunResult, RerunResults
from kictl.rerun.verdict import judge
from kictl.store.registry import Registry
from kictl.trust.readers import reader_policy

ProgressCallback = Callable[[str], None]


class RerunRefused(EnvError):
    """This machine cannot rerun a run comparably: another GPU product or comparability family (exit 5)."""


@dataclass
class RerunReport:
    """What ``rerun_runs`` produced."""

    results: RerunResults
    records: list[StoredRecord] = field(default_factory=list)
    jobs: dict[str, RerunJob] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _run_spec(record: StoredRecord | None) -> BenchmarkRunSpec | None:
    if record is None:
        return None
    spec = record.model.spec
    assert isinstance(spec, BenchmarkRunSpec)
    return spec


def rerun_runs(
    registry: Registry,
    references: Sequence[str],
    *,
    base: str | None = None,
    device: str = "auto",
    force: bool = False,
    timeout_s: float = 600.0,
    progress: ProgressCallback | None = None,
    request: RerunRequest | None = None,
) -> RerunReport:
    """Rerun the selected runs here and judge each against its original.

    Raises ``UsageError`` for an empty selection or a run that did not pass,
    ``NotFoundError``/``RecordError`` for missing or malformed records,
    ``RerunRefused`` (exit 5) when a run was measured on another GPU product
    or would be measured in another comparability family here (nothing runs
    then; ``force`` runs them and their verdict is ``inconclusive``), and
    ``EnvError`` when the device is missing.

    With ``request`` (made by the signing side, ``kictl.rerun.request``) the
    runs are the request's (``references`` and ``base`` may only narrow them)
    and every session uses the input secret and seed salt it gives; without
    one they are drawn here, and the results can be looked at but not signed.
    """
    say = progress or (lambda _text: None)
    if request is not None:
        if request.input_secret is None or request.seed_salt is None:
            raise UsageError(
                "the rerun request carries no inputSecret and seedSalt: it is not the one made for this job"
            )
        asked = list(request.body.runs)
        digests = select_runs(registry, references, base=base) if references or base else asked
        extra = [digest for digest in digests if digest not in asked]
        if extra:
            raise UsageError(f"the rerun request does not ask for {', '.join(extra)}")
    else:
        digests = select_runs(registry, references, base=base)
    jobs = [build_job(registry, digest) for digest in digests]
    tolerance = reader_policy(registry).rerun_tolerance
    warnings = cpu_tolerance_warnings(jobs, tolerance)
    # Refuse before any submitted code runs.
    devices: dict[str, str] = {}
    products: dict[str, str] = {}
    refused: dict[str, list[str]] = {}
    for job in jobs:
        chosen = devices.setdefault(job.settings.device, execute.resolve_device(device, job.settings))
        if chosen not in products:
            products[chosen] = str(execute.machine_environment(chosen)["hardware"]["product"])
        reasons = refusals(job, products[chosen], execute.measured_family(job.settings, chosen))
        if reasons:
            refused[job.run.digest] = reasons
    if refused and not force:
        lines = [f"{digest}: {'; '.join(reasons)}" for digest, reasons in refused.items()]
        raise RerunRefused(
            f"{len(refused)} of {len(jobs)} run(s) cannot be rerun comparably on this machine "
            "(--force runs them anyway; their verdict is then inconclusive)",
            details=lines,
        )
    results: list[RerunResult] = []
    records: dict[str, StoredRecord] = {}
    groups = list(group_jobs(jobs))
    for number, group in enumerate(groups):
        first = group[0]
        chosen = devices[first.settings.device]
        say(f"{number}/{len(groups)} groups done; now {first.definition.name}: rerunning {len(group)} run(s)")
        done = execute.execute(
            registry,
            first.definition,
            [job.implementation for job in group],
            [job.workload for job in group],
            first.settings,
            device=chosen,
            timeout_s=timeout_s,
            progress=say,
            input_secret=request.input_secret if request is not None else None,
            seed_salt=request.seed_salt if request is not None else None,
        )
        held_out = heldout.check_jobs(  # issue 32: the shapes' secret is the request's where there is one
            registry,
            group,
            device=chosen,
            timeout_s=timeout_s,
            progress=say,
            secret=request.held_out_secret if request is not None else None,
        )
        for job in group:
            executed = done.runs[(job.implementation.digest, job.workload.digest)]
            made = [executed.run, executed.protocol, executed.environment]
            for record in made:
                if record is not None:
                    records.setdefault(record.digest, record)
            product = products[chosen]
            if executed.environment is not None:
                product = executed.environment.raw["spec"]["hardware"]["product"]
            reasons = refused.get(job.run.digest, [])
            if product != job.product and not reasons:  # the worker saw another device than the parent did
                reasons = [f"it ran on {job.product}, the rerun's worker ran on {product}"]
            judged = judge(
                job.run_spec,
                _run_spec(executed.run),
                tolerance=tolerance,
                comparable=not reasons,
                missing=f"no rerun: {executed.skipped}",
            )
            results.append(
                RerunResult(
                    original=job.run.digest,
                    rerun=executed.run.digest if executed.run is not None else None,
                    verdict=judged.verdict,
                    reason=judged.reason[:4096],
                    ratio=judged.ratio,
                    statistic=judged.statistic,  # type: ignore[arg-type]
                    original_ns=judged.original_ns,
                    rerun_ns=judged.rerun_ns,
                    tolerance=tolerance,
                    rerun_spread=judged.rerun_spread,
                    original_spread=judged.original_spread,
                    status=executed.run.raw["spec"]["status"] if executed.run is not None else None,
                    product=product,
                    forced=bool(reasons),
                    refusals=tuple(reasons),
                    seed_salt=done.seed_salt,
                    held_out=held_out.get(job.implementation.digest),  # issue 32
                )
            )
    order = {digest: position for position, digest in enumerate(digests)}
    results.sort(key=lambda result: order[result.original])
    document = RerunResults(
        kictl_version=kictl.__version__,
        created_at=format_timestamp(datetime.now(UTC)),
        results=tuple(results),
        request=request.body if request is not None else None,
    )
    return RerunReport(
        results=document,
        records=list(records.values()),
        jobs={job.run.digest: job for job in jobs},
        warnings=warnings,
    )


def cpu_tolerance_warnings(jobs: Sequence[RerunJob], tolerance: float) -> list[str]:
    """A CPU rerun judged at the default ``rerunTolerance`` says little: a shared CPU's timings vary more."""
    if tolerance > Policy().rerun_tolerance or not any(job.settings.device == "cpu" for job in jobs):
        return []
    return [
        f"CPU rerun at rerunTolerance ±{tolerance:.0%}, the default made for GPUs: a shared CPU's timings often vary "
        "more than that, so a slower rerun may dispute an honest run; a CPU registry sets a wider rerunTolerance"
    ]
