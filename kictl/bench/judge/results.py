"""The records a bench session produces, and how they are written (DESIGN §3).

``environment_record`` and ``protocol_record`` turn what a worker captured
and what the command line asked for into ExecutionEnvironment and
BenchmarkProtocol records; ``build_run`` makes the BenchmarkRun of one
implementation on one workload; ``write_manifest`` writes every record of a
session as one manifest file that ``kictl add`` reads.  The protocol says
what a reader needs to judge a number: the timer, what lay in the timed
region, warm-up, iterations, trials, the flush, graph use, the input policy
and whether stateful setup was timed.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kictl
from kictl import canon
from kictl.bench.judge import correctness
from kictl.bench.judge.implementation import LoadedImplementation
from kictl.bench.judge.options import BenchOptions, adaptive_budget, fixed_count_budget, warmup_budget
from kictl.bench.wire import timers
from kictl.bench.worker.timing import LAUNCH_PHASES
from kictl.errors import RegistryError
from kictl.records import (
    BenchmarkProtocolSpec,
    BenchmarkRunSpec,
    StoredRecord,
    format_timestamp,
    record_from_value,
)
from kictl.store.files import write_atomic

HARNESS = {"name": "kictl", "version": kictl.__version__}


#: A definition name used in a manifest's file name as it is; any other name gives its digest.
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@functools.lru_cache(maxsize=1)
def harness_identity() -> dict[str, str]:
    """kictl's name, version and repository, and the commit when kictl runs from a git checkout."""
    identity = dict(HARNESS)
    commit = _source_commit()
    if commit:
        identity["commit"] = commit
    return identity


#: A source manifest: the first line a commit, then ``git ls-tree -r <commit> -- kictl`` (``mode blob sha\tpath``).
#: A copy of kictl without its git history (a device machine's copy of the working tree, whose ``.git`` is stale)
#: names one here, and the harness commit is that commit, or that commit "+dirty" when a file differs from it.
SOURCE_MANIFEST_ENV = "KICTL_SOURCE_MANIFEST"


def _source_commit() -> str | None:
    """HEAD of the git checkout kictl's package lies in ("+dirty" when its files changed), else None."""
    package = Path(kictl.__file__).resolve().parent
    manifest = os.environ.get(SOURCE_MANIFEST_ENV)
    if manifest:
        return manifest_commit(Path(manifest), package)
    try:
        head = subprocess.run(
            ["git", "-C", str(package), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(package), "status", "--porcelain", "--", "."],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if len(head) != 40:
        return None
    return head + ("+dirty" if dirty else "")


def manifest_commit(manifest: Path, package: Path) -> str | None:
    """The manifest's commit, "+dirty" unless ``package``'s files are exactly the blobs it lists; None if either
    cannot be read.

    Files git ignores (``__pycache__``, ``*.pyc``) are not compared; any other file added, missing or changed is
    dirt.  A manifest that cannot be read or parsed gives None: no commit is claimed rather than a wrong one.
    """
    try:
        commit, *lines = manifest.read_text(encoding="utf-8").splitlines()
        listed = {}
        for line in lines:
            meta, name = line.split("\t", 1)
            _mode, kind, blob = meta.split()
            if kind == "blob":
                listed[name] = blob
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        return None
    root = package.parent
    present: dict[str, str] = {}
    try:
        for path in sorted(package.rglob("*")):
            if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            data = path.read_bytes()
            present[path.relative_to(root).as_posix()] = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    except OSError:  # a file that cannot be read cannot be vouched for
        return None
    return commit + ("" if present == listed else "+dirty")


INPUT_POLICY = (
    "timed calls rotate over {sets} input set(s) of the workload's structure with fresh values, copied into the "
    "same tensors outside the timed region; setup() sees another set that is never timed; correctness rounds use "
    "fresh tensors; every value is seeded from a secret drawn at bench time and recorded in the run afterwards{drawn}; "
    "timed calls are audited at random, decided after each returned"
)
#: Where random values are drawn, on a GPU (``inputs.drawn_on``); nothing is added for the CPU's generator.
GPU_DRAW = (
    " (random values drawn on the GPU by torch's CUDA generator: the same secret gives the same values on the same "
    "GPU model)"
)
#: What the input policy adds for a definition whose reference writes some of its inputs (docs/bench.md, "Inputs the
#: reference writes").
WRITTEN_POLICY = (
    "; the definition's reference writes {names}: staged afresh before every call like any random input, judged as "
    "outputs after the call (in the correctness rounds, and in audited timed calls as kictl's parent reads them back "
    "where it staged them), not held to inputsUnchanged"
)
REFERENCE_TEXT = "definition reference implementation, in kictl's own worker, on the same inputs"


@dataclass
class RunSummary:
    """One implementation on one workload, as the summary table shows it."""

    implementation: str
    workload: str
    workload_digest: str
    status: str
    detail: str | None = None
    latency_ns: int | None = None
    speedup: float | None = None
    maximum_absolute_error: float | None = None
    maximum_relative_error: float | None = None
    matched_ratio: float | None = None
    run: StoredRecord | None = None

    @classmethod
    def from_spec(cls, implementation: str, workload: str, spec: BenchmarkRunSpec, run: StoredRecord) -> RunSummary:
        """The summary of the BenchmarkRun ``run`` (whose spec is ``spec``): its status, figure and errors."""
        correctness = spec.correctness
        return cls(
            implementation=implementation,
            workload=workload,
            workload_digest=spec.workload_digest,
            status=spec.status,
            detail=spec.status_detail,
            latency_ns=spec.timing.primary_ns() if spec.timing is not None else None,
            maximum_absolute_error=correctness.maximum_absolute_error if correctness is not None else None,
            maximum_relative_error=correctness.maximum_relative_error if correctness is not None else None,
            matched_ratio=correctness.matched_ratio if correctness is not None else None,
            run=run,
        )


@dataclass
class BenchReport:
    """What a session produced: the records to store and one summary per run."""

    definition: StoredRecord
    records: list[StoredRecord] = field(default_factory=list)
    runs: list[RunSummary] = field(default_factory=list)
    #: (workload label, why) for workloads that produced no runs: the reference or kictl's worker failed
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: what the user must know about how the session measured (e.g. CUPTI missing: CUDA events instead)
    warnings: list[str] = field(default_factory=list)
    #: seconds of the session's wall time per phase (``phases.PhaseClock``), for ``kictl bench --timings``
    phases: dict[str, float] = field(default_factory=dict)
    #: implementation name -> request type -> [count, parent's wall ns] over the session's runs
    #: (``loop.RunDriver.requests``), for ``kictl bench --timings``
    requests: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    #: workload labels not started: the session was past ``--stop-after`` (``BenchOptions.stop_after_s``), or not
    #: finished: it was interrupted (``interrupted``)
    left: list[str] = field(default_factory=list)
    #: an interrupt (Ctrl-C, or the SIGTERM ``kictl bench`` turns into one) ended the session between or inside
    #: workloads: the workloads finished keep their records, the one running has none
    interrupted: bool = False

    @property
    def all_passed(self) -> bool:
        return bool(self.runs) and not self.skipped and all(run.status == "passed" for run in self.runs)


def _ascii_name(*parts: str) -> str:
    text = ".".join(re.sub(r"[^!-~]+", "-", part).strip("-") for part in parts if part)
    return text[:256]


def environment_record(spec: dict[str, Any]) -> StoredRecord:
    """The ExecutionEnvironment record of what a worker captured."""
    hardware, software = spec["hardware"], spec["software"]
    framework = software.get("framework", {})
    parts = [hardware["product"], f"{framework.get('name', '')}-{framework.get('version', '')}"]
    if software.get("cudaToolkit"):
        parts.append(f"cuda-{software['cudaToolkit']}")
    if software.get("driver"):
        parts.append(f"driver-{software['driver']}")
    title = ", ".join(str(value) for value in (hardware["product"], hardware.get("architecture")) if value)
    raw = {
        "apiVersion": "kernelindex.dev/v1alpha1",
        "kind": "ExecutionEnvironment",
        "metadata": {"name": _ascii_name(*parts), "title": title},
        "spec": spec,
    }
    return record_from_value(raw, source="environment")


def protocol_spec(
    device: str,
    counts: tuple[int, int | None, int],
    options: BenchOptions,
    tolerance: correctness.Tolerance,
    flush_bytes: int,
    isolation: str = "unrecorded",
    input_sets: int = 1,
    timer_name: str | None = None,
    default_tolerance: correctness.Tolerance | None = None,
    written: Sequence[str] = (),
) -> dict[str, Any]:
    """The BenchmarkProtocol spec (JSON members) of this session's measurement.

    ``written`` names the inputs the definition's reference writes (``WRITTEN_POLICY``).

    ``timer_name`` is the timer the session resolved (``cupti_device_time`` where CUPTI attached).
    CUPTI's figures are a comparability family of their own, ``kictl-cupti-device-time``: on the
    H200 CUDA events (and graph replays between events) read a steady 1.2–3.5 µs more than CUPTI
    on the same calls of every bundled attention workload (benchmarks/RESULTS.md), which is 40% of
    a 6 µs kernel, so a CUPTI run and an events run are not ranked against each other.

    ``default_tolerance`` is what the workload's runs are judged at without ``--atol``, ``--rtol`` or
    ``--matched-ratio``: a ``tolerance`` looser than it adds ``correctness.LOOSER_TOLERANCE`` to the family.
    """
    warmup, iterations, trials = counts
    on_gpu = device != "cpu"
    rows = timers.choices(device, options.timer, options.cuda_graph, options.time_setup)
    row = next((row for row in rows if row.name == timer_name), rows[-1])
    timer, region = row.recorded, row.region
    family = row.setup_family if options.time_setup and row.setup_family else row.family
    if options.time_setup:
        if row.time_setup is None:  # a timer that times setup() with run() when asked
            region += "; setup() and run() both inside the timed region"
    else:
        region += "; setup(), if the module has one, called once before, outside the timed region"
    if on_gpu:
        region += (
            f"; the persisting L2 reset before each timed call, after 0 to {LAUNCH_PHASES - 1} one-element kernels "
            "(the count drawn at random per call) so that the call's launches fall at a random phase of the GPU's "
            "launch cycle"
        )
    measurement: dict[str, Any] = {
        "timer": timer,
        "primaryStatistic": options.statistic,
        "warmup": warmup,
        "trials": trials,
        "l2Flush": on_gpu and flush_bytes > 0,
        "cudaGraph": options.cuda_graph,
        "inputPolicy": INPUT_POLICY.format(sets=input_sets, drawn=GPU_DRAW if on_gpu else "")
        + (WRITTEN_POLICY.format(names=", ".join(written)) if written else ""),
        "setupInTimedRegion": options.time_setup,
        "device": "cuda" if on_gpu else "cpu",
        "timedRegion": region,
        "isolation": isolation,
        "threads": options.threads,
        "inputSets": input_sets,
    }
    if iterations is not None:
        measurement["iterations"] = iterations
        budget = fixed_count_budget(options, device)
        if budget is not None:
            measurement["timeBudgetS"] = budget
        budget = warmup_budget(options, device, iterations)
        if budget is not None and warmup > 3:  # a shorter warm-up has no call to spare (three at least)
            measurement["warmupTimeBudgetS"] = budget
    else:
        measurement["targetRelativeError"] = options.target_error
        measurement["timeBudgetS"] = adaptive_budget(options)
    if on_gpu and flush_bytes > 0:
        measurement["l2FlushBytes"] = flush_bytes
    return {
        "harness": dict(harness_identity()),
        "correctness": {
            "reference": REFERENCE_TEXT,
            "comparator": tolerance.comparator,
            "atol": tolerance.atol,
            "rtol": tolerance.rtol,
            "requiredMatchedRatio": tolerance.required_matched_ratio,
            "rounds": options.rounds,
        },
        "measurement": measurement,
        "comparability": {"family": loosened(family, tolerance, default_tolerance)},
    }


def loosened(family: str, tolerance: correctness.Tolerance, default: correctness.Tolerance | None) -> str:
    """``family``, with ``correctness.LOOSER_TOLERANCE`` added when ``tolerance`` is looser than ``default``."""
    if default is not None and tolerance.looser_than(default) and not family.endswith(correctness.LOOSER_TOLERANCE):
        return family + correctness.LOOSER_TOLERANCE
    return family


def protocol_record(spec: dict[str, Any]) -> StoredRecord:
    measurement = spec["measurement"]
    name = _ascii_name(
        "kictl-bench",
        measurement["device"],
        measurement["timer"],
        measurement["primaryStatistic"],
        "setup-timed" if measurement["setupInTimedRegion"] else "",
    )
    if "iterations" not in measurement:
        count = f"calls until ±{measurement['targetRelativeError']:g} or {measurement['timeBudgetS']:g} s"
    elif "timeBudgetS" in measurement:
        count = f"{measurement['iterations']}x{measurement['trials']} (or {measurement['timeBudgetS']:g} s)"
    else:
        count = f"{measurement['iterations']}x{measurement['trials']}"
    warm = f"{measurement['warmup']} warm-up"
    if "warmupTimeBudgetS" in measurement:
        warm += f" (or {measurement['warmupTimeBudgetS']:g} s after the first)"
    title = f"kictl bench: {measurement['timer']}, {measurement['primaryStatistic']} of {count} after {warm}"
    if not measurement.get("isolation", "").startswith("bubblewrap"):
        name += ".unsandboxed"
    raw = {
        "apiVersion": "kernelindex.dev/v1alpha1",
        "kind": "BenchmarkProtocol",
        "metadata": {"name": name, "title": title},
        "spec": spec,
    }
    record = record_from_value(raw, source="protocol")
    assert isinstance(record.model.spec, BenchmarkProtocolSpec)
    return record


def build_run(
    members: dict[str, Any],
    impl: LoadedImplementation,
    workload: StoredRecord,
    definition: StoredRecord,
    protocol: StoredRecord,
    environment: StoredRecord,
    synthesized: Sequence[str],
    input_secret: str | None = None,
) -> RunSummary:
    """The BenchmarkRun record (and its summary) of ``members`` judged by ``verdict.evaluate``."""
    observed = datetime.now(UTC)
    spec_members = {
        **members,
        "observedAt": format_timestamp(observed),
        "definitionDigest": definition.digest,
        "workloadDigest": workload.digest,
        "implementationDigest": impl.record.digest,
        "protocolDigest": protocol.digest,
        "environmentDigest": environment.digest,
    }
    if synthesized:
        spec_members["synthesizedInputs"] = list(synthesized)
    if input_secret is not None:
        spec_members["inputSecret"] = input_secret
    stamp = observed.strftime("%Y%m%dT%H%M%S") + f"{observed.microsecond // 1000:03d}Z"
    raw = {
        "apiVersion": "kernelindex.dev/v1alpha1",
        "kind": "BenchmarkRun",
        "metadata": {
            "name": _ascii_name(impl.name, workload.name, stamp),
            "title": f"{impl.name} on {definition.name} / {workload.name}",
        },
        "spec": spec_members,
    }
    record = record_from_value(raw, source="run")
    assert isinstance(record.model.spec, BenchmarkRunSpec)
    return RunSummary.from_spec(impl.name, workload.name, record.model.spec, record)


def speedups(runs: Sequence[RunSummary], implementations: Sequence[LoadedImplementation]) -> None:
    reference_names = {impl.name for impl in implementations if impl.is_reference}
    baseline = next(
        (r for r in runs if r.implementation in reference_names and r.status == "passed" and r.latency_ns), None
    )
    if baseline is None or not baseline.latency_ns:
        return
    for run in runs:
        if run.status == "passed" and run.latency_ns:
            run.speedup = baseline.latency_ns / run.latency_ns


def write_manifest(report: BenchReport, folder: Path) -> Path:
    """Write every record of the report as one manifest ``{<kind>/<hex>: record}`` in ``folder``.

    ``kictl add FOLDER`` reads it back.  Raises ``RegistryError`` when the
    folder cannot be written.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RegistryError(f"cannot create {folder}: {exc.strerror}") from exc
    manifest: dict[str, Any] = {}
    for record in report.records:
        manifest.setdefault(f"{record.kind}/{canon.digest_hex(record.digest)}", record.raw)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    name = report.definition.name
    if not _PLAIN_NAME.match(name):  # a name with '/' or '..' never becomes a path: the record's digest instead
        name = canon.digest_hex(report.definition.digest)
    path = folder / f"bench-{name}-{stamp}.json"
    write_atomic(path, canon.pretty_bytes(manifest))
    return path
