"""``kictl bench``: benchmark implementations of a definition and write the records."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kictl import render, trust
from kictl.bench.judge.energy_loop import MEASURE_NAMES
from kictl.bench.judge.options import resolve_device
from kictl.bench.judge.phases import format_phases, format_requests
from kictl.bench.judge.session import BenchOptions, run_bench, write_manifest
from kictl.cli._common import JsonOption, RegistryOption, emit_json, err, format_ns, guarded, open_registry, out, table
from kictl.errors import CheckFailed, EnvError, KictlError, RegistryError, UsageError
from kictl.executors import run_bench_jobs
from kictl.progress import progress, size_warnings
from kictl.store.files import write_hint

if TYPE_CHECKING:
    from kictl.store.registry import Registry


def _progress(lines: bool = False) -> contextlib.AbstractContextManager[Callable[[str], None]]:
    """Progress on stderr (kictl/progress.py): a live line on a terminal, ``t=SECONDS text`` lines elsewhere.

    ``lines``: the plain lines on a terminal too (``--timings``), so that a session that stalls shows where.
    """
    return progress(lines=lines)


def _size_warnings(target: Registry, definition: str, workloads: list[str] | None, device: str, **counts: Any) -> None:
    """Warn before jobs too large for the device (kictl/families/practical.py); silent where it cannot tell."""
    try:
        resolved = resolve_device(device)
    except KictlError:
        return  # the bench says what is wrong with the device
    for line in size_warnings(target, definition, tuple(workloads or ()), device=resolved, **counts):
        err(line)


#: A frame of a Python traceback or of faulthandler's dump: ``File "x.py", line 8, in run`` / ``... line 8 in run``.
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:,? in (?P<function>\S+))?')
#: Files that are kictl's, Python's or a library's, never the implementation's.
_NOT_THE_IMPLEMENTATION = re.compile(r"^<|/kictl-worker/|/kictl/|site-packages/|dist-packages/|/lib/python3")


def failure_reason(detail: str | None, *, width: int = 240) -> str:
    """One line saying why a run did not pass: the reason first, then where in the implementation.

    ``statusDetail`` keeps the whole text (a traceback, faulthandler's dump of a stuck worker); the summary
    shows its reason (the exception's line, or the harness's first line, e.g. "no answer within 10 s to
    check; the worker was stopped") and the implementation's own file and line where a frame names one:
    the innermost of a traceback, the one a stuck worker was in.
    """
    lines = [line.rstrip() for line in (detail or "").strip().splitlines() if line.strip()]
    if not lines:
        return "no detail recorded"
    frames = [match for match in (_FRAME.match(line) for line in lines) if match is not None]
    if lines[0].startswith("Traceback (most recent call last)"):
        reason = next((line.strip() for line in reversed(lines) if not line.startswith((" ", "\t"))), lines[-1])
        frames.reverse()  # innermost first
    else:
        reason = lines[0].strip()  # the harness's own words; a stack dump (most recent call first) follows
    where = next((frame for frame in frames if not _NOT_THE_IMPLEMENTATION.search(frame["file"])), None)
    if where is not None:
        name = re.sub(r"^.*/kictl-sources-[^/]+/", "", where["file"])
        place = f"{name}:{where['line']}" + (f" in {where['function']}" if where["function"] else "")
        reason = f"{reason} ({'stuck at ' if ' stopped' in reason else 'at '}{place})"
    if len(reason) > width:
        reason = reason[: width - 1] + "…"
    return reason


def _writable_or_refuse(folder: Path) -> None:
    """``RegistryError`` (exit 4) now when the records could not be written after the bench (a read-only registry)."""

    existing = next((place for place in (folder, *folder.parents) if place.exists()), None)
    if existing is not None and not os.access(existing, os.W_OK):
        reason = OSError(errno.EROFS if _read_only_mount(existing) else errno.EACCES, "")
        raise RegistryError(f"{existing}: cannot write the runs' records{write_hint(reason)}")


def _read_only_mount(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


@guarded
def bench(
    definition: Annotated[str, typer.Argument(help="Definition name, digest or digest prefix.", show_default=False)],
    impl: Annotated[
        list[str],
        typer.Option(
            "--impl",
            help="A .py file with run(...), a folder with implementation.json, or an Implementation digest. "
            "Repeat to compare several; the definition's reference, if given, runs first.",
            show_default=False,
        ),
    ],
    workload: Annotated[
        list[str] | None,
        typer.Option(
            "--workload", help="Workload label or digest prefix (repeatable); default all.", show_default=False
        ),
    ] = None,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    warmup: Annotated[
        int | None, typer.Option(help="Untimed calls first (default: CUDA 10, CPU 1).", show_default=False)
    ] = None,
    iterations: Annotated[
        int | None,
        typer.Option(
            help="Timed calls per trial (default: CUDA 100; CPU adaptive, see --target-error).", show_default=False
        ),
    ] = None,
    trials: Annotated[int | None, typer.Option(help="Trials (default: CUDA 3, CPU 1).", show_default=False)] = None,
    rounds: Annotated[int, typer.Option(help="Correctness rounds, each on fresh inputs.")] = 3,
    cuda_graph: Annotated[bool, typer.Option("--cuda-graph", help="Same as --timer graph.")] = False,
    timer: Annotated[
        str,
        typer.Option(
            help="GPU timer: auto (CUPTI's device time of every kernel the call caused, on any stream, where "
            "CUPTI attaches; else CUDA events, said on stderr), cupti, events (CUDA events around the call), "
            "graph (events around a CUDA-graph replay)."
        ),
    ] = "auto",
    measure: Annotated[
        str,
        typer.Option(
            help="What to measure: latency (the timer's figure per call), or energy (NVML's energy counter "
            "over back-to-back loops after the timed calls, idle draw subtracted: its own family, "
            "kictl-nvml-energy; exit 5 where the GPU has no energy counter).",
        ),
    ] = "latency",
    energy_loop: Annotated[
        float,
        typer.Option(help="--measure energy: seconds of each back-to-back loop (the counter steps every ~0.1 s)."),
    ] = 1.5,
    energy_trials: Annotated[int, typer.Option(help="--measure energy: back-to-back loops (trials) per run.")] = 3,
    time_setup: Annotated[
        bool, typer.Option("--time-setup", help="Time setup() (e.g. a FlashInfer plan) together with run().")
    ] = False,
    statistic: Annotated[str, typer.Option(help="Primary statistic: mean, median, min, max, p10, p90.")] = "median",
    target_error: Annotated[
        float,
        typer.Option(help="Without --iterations: time calls until the median's relative error is below this."),
    ] = 0.02,
    time_budget: Annotated[
        float | None,
        typer.Option(
            help="Seconds of timed calls per run at most (default: the CPU's adaptive count stops at 2, the "
            "GPU's default 100x3 at 0.3, after at least 20 calls); with --iterations it caps that count."
        ),
    ] = None,
    stop_after: Annotated[
        float | None,
        typer.Option(
            help="Start no workload after this many seconds (the first always starts): the workloads done keep their "
            "records, the rest are named on stderr (one local session; a device call's budget)."
        ),
    ] = None,
    threads: Annotated[int, typer.Option(help="CPU threads each worker is pinned to (and torch may use).")] = 1,
    input_sets: Annotated[
        int, typer.Option(help="Input sets (same structure, fresh values) the timed calls rotate over.")
    ] = 4,
    worker_limits: Annotated[
        str | None,
        typer.Option(
            help="What each worker's sandbox may hold, e.g. memory=4GiB,tasks=256,tmpfs=512MiB,log=8MiB (any of "
            "them; default: half the memory, 512 tasks, 2 GiB /tmp, 16 MiB log).",
        ),
    ] = None,
    no_sandbox: Annotated[
        bool,
        typer.Option(
            "--no-sandbox",
            help="Run implementations without bubblewrap (unconfined; the protocol records it).",
        ),
    ] = False,
    timeout: Annotated[
        float, typer.Option(help="Seconds allowed per request to a worker (an import, a setup, one call).")
    ] = 600.0,
    atol: Annotated[float | None, typer.Option(help="Absolute tolerance (default: the workload's, else 1e-2).")] = None,
    rtol: Annotated[float | None, typer.Option(help="Relative tolerance (default: the workload's, else 1e-2).")] = None,
    matched_ratio: Annotated[
        float | None, typer.Option(help="Share of elements that must match (default: the workload's, else 1).")
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="Write the records as one manifest file in this folder instead of the registry."),
    ] = None,
    sign: Annotated[
        Path | None,
        typer.Option(
            "--sign",
            metavar="KEY",
            help="Sign every new run with a submission attestation by this private key (registry mode only).",
        ),
    ] = None,
    devices: Annotated[
        str | None,
        typer.Option(
            "--devices",
            help="Run on several local devices, one long-lived worker each: all (every GPU), a list "
            "(cuda:0,cuda:2), or N (the first N GPUs; N CPU workers with --device cpu).",
            show_default=False,
        ),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            metavar="i/N",
            help="Run only slice i of N of the jobs (0 <= i < N): the N slices are disjoint and hold every job.",
            show_default=False,
        ),
    ] = None,
    executor: Annotated[
        str, typer.Option(help="local (this machine's devices) or ray (a Ray cluster: pip install 'kictl[cluster]').")
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option(help="The Ray cluster to join (auto, ray://head:10001); default a local Ray.", show_default=False),
    ] = None,
    skip_existing: Annotated[
        bool,
        typer.Option(
            "--skip-existing", help="Skip jobs whose run is in the registry already, for this environment and protocol."
        ),
    ] = False,
    timings: Annotated[
        bool,
        typer.Option(
            "--timings",
            help="On stderr: each step as it happens ('t=SECONDS what'), then where the wall time went "
            "('timing PHASE SECONDS' lines). Also with KICTL_TIMINGS=1.",
        ),
    ] = False,
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Benchmark implementations of DEFINITION on its workloads and record the results.

    Each implementation runs in its own sandboxed process (bubblewrap; --no-sandbox
    to waive) with a timeout; its outputs are checked against the definition's
    reference on fresh inputs, integrity checks look for gamed results, and the
    timing is recorded sample by sample, driven and checked by kictl. The
    BenchmarkRun records and the records they name are added to the registry, or
    written to --out. Exit 0 when every run passed, 1 when some did not (the
    records are written all the same), 2 usage, 3 unknown names, 4 I/O, 5 no GPU;
    interrupted (Ctrl-C, SIGTERM), 130 or 143 after writing the workloads finished.
    """
    began = time.perf_counter()
    if out_dir is not None and out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir}: not a folder")
    target = open_registry(registry)
    if out_dir is None:
        _writable_or_refuse(target.root / "registry" / "records")  # before minutes of benchmarking, not after
    if sign is not None:
        if out_dir is not None:
            raise UsageError("--sign signs runs added to the registry; sign an --out folder with `kictl submit`")
        trust.load_private_key(sign)  # a missing, loose or locked key fails now, not after the benchmark
    if measure not in MEASURE_NAMES:
        raise UsageError(f"--measure {measure}: not one of {', '.join(MEASURE_NAMES)}")
    if measure == "energy":
        if timer == "cupti" or time_setup:
            raise UsageError("--measure energy times with CUDA events or graph replays (--timer events|graph)")
        if timer == "auto":  # energy workers run without CUPTI: its records would cost the loop host time
            timer = "events"
        if energy_loop < 0.8 or energy_trials < 1:
            raise UsageError(
                "--energy-loop must be at least 0.8 s (five counter steps after the ramp), --energy-trials at least 1"
            )
        if resolve_device(device) == "cpu":
            raise EnvError(
                "--measure energy needs a GPU with an energy counter and the CPU has none "
                "(kictl does not estimate energy from power samples)"
            )
    options = BenchOptions(
        device=device,
        warmup=warmup,
        iterations=iterations,
        trials=trials,
        rounds=rounds,
        cuda_graph=cuda_graph or timer == "graph",
        timer=timer,
        time_setup=time_setup,
        statistic=statistic,
        timeout_s=timeout,
        atol=atol,
        rtol=rtol,
        matched_ratio=matched_ratio,
        workloads=tuple(workload or ()),
        no_sandbox=no_sandbox,
        threads=threads,
        target_error=target_error,
        time_budget_s=time_budget,
        input_sets=input_sets,
        measure=measure,
        energy_loop_s=energy_loop,
        energy_trials=energy_trials,
        worker_limits=worker_limits,
        stop_after_s=stop_after,
    )
    scaled = devices is not None or shard is not None or executor != "local" or ray_address is not None
    if scaled and stop_after is not None:
        raise UsageError("--stop-after stops one local session; it cannot take --devices, --shard or an executor")
    if not scaled and device.strip().lower().startswith("cuda"):
        resolve_device(device)  # no GPU: exit 5 now, before any worker starts (the session would spawn them first)
    timings = timings or os.environ.get("KICTL_TIMINGS", "") not in ("", "0")
    if devices is None and executor == "local":  # one device known here; scale-out workers pick theirs
        _size_warnings(
            target,
            definition,
            workload,
            device,
            threads=threads,
            warmup=warmup,
            rounds=rounds,
            iterations=iterations,
            trials=trials,
        )
    caught = _Caught()  # the signal that interrupts a local session (``_interruptible``)
    with _progress(lines=timings) as say:
        if scaled or skip_existing:
            report, outcome = run_bench_jobs(
                target,
                definition,
                impl,
                options,
                devices=devices,
                shard_text=shard,
                executor=executor,
                ray_address=ray_address,
                skip_done=skip_existing,
                progress=say,
            )
            if shard is not None:
                err(f"shard {shard}: {outcome.in_shard} of {outcome.planned} jobs")
            if skip_existing:
                err(f"{outcome.already_done} job(s) already in the registry for this environment, skipped")
            for failure in outcome.device_failures:
                err(f"warning: worker {failure.worker} failed, its job retried elsewhere: {failure.detail[:200]}")
        else:
            with _interruptible(caught):
                try:
                    report = run_bench(target, definition, impl, options, progress=say)
                except KeyboardInterrupt:  # while the workers started, or a second interrupt while they stopped
                    err(f"interrupted ({caught.name}): nothing written")
                    raise typer.Exit(128 + caught.value) from None
            if report.interrupted and not report.runs:
                for warning in report.warnings:
                    err(f"warning: {warning}")
                err(f"interrupted ({caught.name}): no workload finished, nothing written")
                raise typer.Exit(128 + caught.value)
    if device.strip().lower() == "auto":  # said once the run is done, so that an error stays the first line
        if resolve_device(device) == "cpu":
            err("note: no CUDA GPU is available: --device auto ran on the CPU (--device cpu says so quietly)")
    writing = time.perf_counter()
    if out_dir is not None:
        path = write_manifest(report, out_dir)
        err(f"wrote {len(report.records)} records to {path}")
    else:
        results = target.add(report.records)
        created = sum(1 for result in results if result.created)
        err(f"{created} records added to {target.root}, {len(results) - created} already present")
        if sign is not None:
            signed = [trust.sign_record(target, run.run.digest, sign) for run in report.runs if run.run is not None]
            err(f"signed {len(signed)} run(s) with a submission attestation")
    if timings:
        phases = {**report.phases, "write": round(time.perf_counter() - writing, 3)}
        for line in format_phases(phases, total=round(time.perf_counter() - began, 3)):
            err(line)
        for line in format_requests(report.requests):
            err(line)
    if as_json:
        emit_json(
            [
                {
                    "implementation": run.implementation,
                    "workload": run.workload,
                    "workloadDigest": run.workload_digest,
                    "status": run.status,
                    "statusDetail": run.detail,
                    "primaryStatistic": options.statistic,
                    "latencyNs": run.latency_ns,
                    "speedupVsReference": run.speedup,
                    "maximumAbsoluteError": run.maximum_absolute_error,
                    "maximumRelativeError": run.maximum_relative_error,
                    "matchedRatio": run.matched_ratio,
                    "run": run.run.digest if run.run is not None else None,
                    **_energy_json(run),
                }
                for run in report.runs
            ]
        )
    else:
        implementations = list(dict.fromkeys(run.implementation for run in report.runs))
        for number, name in enumerate(implementations):
            if number:
                out()
            out(name)
            rows = [
                [
                    run.workload,
                    run.status,
                    format_ns(run.latency_ns),
                    "-" if run.speedup is None else f"{run.speedup:.2f}x",
                    _number(run.maximum_absolute_error),
                    _number(run.maximum_relative_error),
                    *(_energy_cells(run) if measure == "energy" else []),
                ]
                for run in report.runs
                if run.implementation == name
            ]
            headers = ["workload", "status", options.statistic, "vs ref", "max abs err", "max rel err"]
            if measure == "energy":
                headers += ["J/call", "W", "idle W", "spread"]
            for line in table(headers, rows, right=tuple(range(2, len(headers)))):
                out(line)
    failed = [run for run in report.runs if run.status != "passed"]
    verbose = os.environ.get("KICTL_VERBOSE", "") not in ("", "0")
    for run in failed:
        err(f"{run.implementation} on {run.workload}: {run.status}: {failure_reason(run.detail)}")
        if verbose and run.detail and "\n" in run.detail.strip():
            for line in run.detail.strip().splitlines():
                err(f"    {line}")
    for warning in report.warnings:
        err(f"warning: {warning}")
    for label, reason in report.skipped:
        err(f"warning: workload {label} skipped, no runs recorded: {reason}")
    sys.stdout.flush()
    if report.interrupted:  # the workloads finished are written above; the shell's status for the signal
        raise typer.Exit(128 + caught.value)
    if report.skipped:
        raise CheckFailed(
            f"{len(report.skipped)} workload(s) skipped, {len(failed)} of {len(report.runs)} runs did not pass"
        )
    if failed:
        raise CheckFailed(f"{len(failed)} of {len(report.runs)} runs did not pass")


class _Caught:
    """The signal that interrupted a session: SIGINT (Ctrl-C's) unless the handler says otherwise."""

    def __init__(self) -> None:
        self.signal = signal.SIGINT
        self.came = False

    @property
    def name(self) -> str:
        return self.signal.name

    @property
    def value(self) -> int:
        return int(self.signal)


@contextlib.contextmanager
def _interruptible(caught: _Caught) -> Iterator[None]:
    """While one local session runs, SIGTERM (a job runner's or a budget's stop) interrupts it as Ctrl-C does: the
    session keeps the workloads it finished (``BenchReport.interrupted``), and ``caught`` says which signal came.
    After the first, both signals are ignored until kictl exits: a second Ctrl-C while the workers stop would
    otherwise lose the records about to be written (SIGKILL still ends it at once).  Without an interrupt the
    handlers before are restored on leaving.  A SIGINT the process was started with ignored stays ignored."""
    watched = [signal.SIGTERM]
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        watched.append(signal.SIGINT)
    previous = {signum: signal.getsignal(signum) for signum in watched}

    def on_signal(signum: int, _frame: object) -> None:
        caught.signal, caught.came = signal.Signals(signum), True
        for each in watched:
            signal.signal(each, signal.SIG_IGN)
        raise KeyboardInterrupt

    try:
        for signum in watched:
            signal.signal(signum, on_signal)
    except ValueError:  # not the main thread (kictl called from a library's thread): the signals keep their action
        yield
        return
    try:
        yield
    finally:
        if not caught.came:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def _run_energy(run: object) -> dict[str, object] | None:
    record = getattr(run, "run", None)
    energy = getattr(getattr(getattr(record, "model", None), "spec", None), "energy", None)
    return None if energy is None else energy.model_dump(mode="json", by_alias=True, exclude_none=True)


def _energy_json(run: object) -> dict[str, object]:
    """``--json`` members of an energy run (issue 31): the record's ``energy`` member as published."""
    energy = _run_energy(run)
    return {} if energy is None else {"energy": energy}


def _energy_cells(run: object) -> list[str]:
    energy = _run_energy(run)
    if energy is None:
        return ["-", "-", "-", "-"]
    return [
        render.joules(float(energy["joulesPerCall"])),  # type: ignore[arg-type]
        f"{float(energy['averageWatts']):.0f}",  # type: ignore[arg-type]
        f"{float(energy['idleWatts']):.1f}",  # type: ignore[arg-type]
        f"{100 * float(energy['spread']):.1f}%",  # type: ignore[arg-type]
    ]


def register(app: typer.Typer) -> None:
    app.command()(bench)
