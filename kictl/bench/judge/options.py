"""What ``kictl bench`` is asked to do, checked before anything runs.

Kept apart from ``session`` so that ``results`` (which records the options
in the protocol) and ``session`` (which runs them) both import it and not
each other.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from kictl.bench.judge.cgroup import GIB, MIB, Limits
from kictl.bench.wire import timers
from kictl.bench.wire.lazy import torch_module
from kictl.errors import EnvError, UsageError
from kictl.records import STATISTICS

#: (warmup, iterations, trials); ``None`` iterations: adaptive, to the target error or the time budget.
DEFAULTS: dict[str, tuple[int, int | None, int]] = {"cpu": (1, None, 1), "cuda": (10, 100, 3)}
DEFAULT_ROUNDS = 3
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_TARGET_ERROR = 0.02
DEFAULT_TIME_BUDGET_S = 2.0
#: What caps the GPU's default fixed count (``fixed_count_budget``): 0.3 s of timed calls (the parent's wall
#: time of its timed-call requests; staging and audits not counted), as a profiler's repetition is capped by
#: time (``triton.testing.do_bench``: 100 ms).  On the H200 a kernel's call takes 1.2-2.1 ms with the harness,
#: so a kernel makes 130-300 calls (medians' relative errors 0.1-0.9%, calls AQ and AY of
#: benchmarks/HISTORY-2026-12-01.md); a host-bound reference (3-20 ms a call) stops after
#: ``loop.MIN_CALLS_UNDER_BUDGET``.  1 s until session 7 (call AQ: the
#: suite 33.5 s at 1 s, 24.7 s at 0.3 s, FlashInfer's medians the same within 1.6%).
GPU_COUNT_BUDGET_S = 0.3
DEFAULT_INPUT_SETS = 4


@dataclass(frozen=True)
class BenchOptions:
    """What the command line asks for; ``None`` counts take the device's defaults."""

    device: str = "auto"
    warmup: int | None = None
    iterations: int | None = None
    trials: int | None = None
    rounds: int = DEFAULT_ROUNDS
    cuda_graph: bool = False
    time_setup: bool = False
    statistic: str = "median"
    timeout_s: float = DEFAULT_TIMEOUT_S
    atol: float | None = None
    rtol: float | None = None
    matched_ratio: float | None = None
    workloads: tuple[str, ...] = ()
    no_sandbox: bool = False
    threads: int = 1
    target_error: float = DEFAULT_TARGET_ERROR
    #: seconds of timed calls per run at most; ``None``: the device's default (``adaptive_budget``,
    #: ``fixed_count_budget``)
    time_budget_s: float | None = None
    #: whether a time budget that caps the timed calls' count caps the warm-up too (``warmup_budget``); a rerun of
    #: a protocol that records no warm-up budget (kictl before stop 55) makes the exact count
    warmup_budget: bool = True
    input_sets: int = DEFAULT_INPUT_SETS
    #: GPU timer: auto (CUPTI where it attaches, else events, said on stderr), cupti, events or graph
    timer: str = "auto"
    #: the session's input secret, given by a rerun request (``kictl.rerun.request``); ``None``: drawn afresh
    input_secret: str | None = None
    #: latency, or energy (issue 31: kictl/bench/judge/energy_loop.py; its own family, kictl-nvml-energy)
    measure: str = "latency"
    #: energy: seconds per back-to-back loop and how many loops (trials)
    energy_loop_s: float = 1.5
    energy_trials: int = 3
    #: what each worker's sandbox may hold (``--worker-limits``, ``parse_limits``); ``None``: ``Limits.default()``
    worker_limits: str | None = None
    #: start no workload after this many seconds of the session (``--stop-after``): the workloads done keep their
    #: records, the rest are named in ``BenchReport.left``.  Not part of the protocol: it decides which runs are made,
    #: never how one is measured
    stop_after_s: float | None = None


TIMERS = timers.OPTIONS
_LIMIT_NAMES = {"memory": "memory_bytes", "tasks": "tasks", "tmpfs": "tmpfs_bytes", "log": "log_bytes"}
_UNITS = {"": 1, "k": 1024, "kib": 1024, "m": MIB, "mib": MIB, "g": GIB, "gib": GIB}


def parse_limits(text: str) -> Limits:
    """``--worker-limits memory=4GiB,tasks=256,tmpfs=512MiB,log=8MiB`` (any subset; the rest keep their
    defaults) as ``Limits``.  Raises ``UsageError``."""
    values: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, _, raw = item.partition("=")
        found = re.fullmatch(r"(\d+)\s*([a-zA-Z]*)", raw.strip())
        if name.strip() not in _LIMIT_NAMES or found is None or found.group(2).lower() not in _UNITS:
            raise UsageError(
                f"--worker-limits {item!r}: expected NAME=SIZE with NAME one of {', '.join(_LIMIT_NAMES)} "
                "and SIZE a number with an optional unit (KiB, MiB, GiB)"
            )
        unit = 1 if name.strip() == "tasks" else _UNITS[found.group(2).lower()]
        values[_LIMIT_NAMES[name.strip()]] = int(found.group(1)) * unit
    limits = Limits.default()
    limits = Limits(**{**{key: getattr(limits, key) for key in _LIMIT_NAMES.values()}, **values})
    if limits.memory_bytes < 256 * MIB or limits.tasks < 16 or limits.tmpfs_bytes < MIB or limits.log_bytes < 64 * 1024:
        raise UsageError(
            "--worker-limits: at least memory=256MiB, tasks=16, tmpfs=1MiB, log=64KiB (a worker's own needs)"
        )
    return limits


def adaptive_budget(options: BenchOptions) -> float:
    """Seconds of timed calls an adaptive count (no ``--iterations``: the CPU's default) may spend at most."""
    return options.time_budget_s if options.time_budget_s is not None else DEFAULT_TIME_BUDGET_S


def fixed_count_budget(options: BenchOptions, device: str) -> float | None:
    """Seconds of timed calls after which a *fixed* count stops early (``None``: the count is exact).

    ``--time-budget`` given caps any count. Without it, the GPU's default count (100 × 3) is capped by
    :data:`GPU_COUNT_BUDGET_S`, as a profiler's timed repetition is by time: an implementation slower
    than a few milliseconds a call (a host-bound reference) stops once the budget is spent, after at least
    ``loop.MIN_CALLS_UNDER_BUDGET`` calls; a fast one makes its 300 calls. An ``--iterations`` given
    without ``--time-budget`` is exact.
    """
    if options.time_budget_s is not None:
        return options.time_budget_s
    if device == "cpu" or options.iterations is not None:
        return None
    return GPU_COUNT_BUDGET_S


def warmup_budget(options: BenchOptions, device: str, iterations: int | None) -> float | None:
    """Seconds of warm-up calls after which a fixed count's warm-up ends early (``None``: the count is exact).

    Where a time budget caps the timed calls' fixed count (``fixed_count_budget``), it caps the warm-up too,
    counted from the end of the first warm-up call (a JIT build, a lazy start) and then one more call: at least
    three calls.  A host-bound reference of seconds a call made its ten warm-up calls in 40 s of one 150 s
    workload on the H100 (stop 55, `gqa_paged_prefill_causal_h5_kv1_d128_ps64`); a kernel of microseconds makes
    all ten.  An adaptive count's warm-up (the CPU's default) is exact.
    """
    return None if iterations is None or not options.warmup_budget else fixed_count_budget(options, device)


def resolve_device(requested: str) -> str:
    """``cpu`` or ``cuda:N``; ``auto`` is the first GPU if there is one.

    Raises ``UsageError`` for an unknown device and ``EnvError`` when a GPU is asked for and absent.
    """
    text = requested.strip().lower()
    if text == "cpu":
        return "cpu"
    if text not in ("auto", "cuda") and not re.fullmatch(r"cuda:\d+", text):
        raise UsageError(f"--device {requested!r}: expected auto, cpu, cuda or cuda:N")
    torch = torch_module()

    available = torch.cuda.is_available()
    if text == "auto":
        return "cuda:0" if available else "cpu"
    if not available:
        raise EnvError(f"--device {requested}: no CUDA GPU is available (torch {torch.__version__})")
    index = int(text.split(":")[1]) if ":" in text else 0
    if index >= torch.cuda.device_count():
        raise EnvError(f"--device {requested}: there are {torch.cuda.device_count()} CUDA device(s)")
    return f"cuda:{index}"


def check_options(options: BenchOptions, device: str) -> tuple[int, int | None, int]:
    """(warmup, iterations or ``None`` for adaptive, trials) for ``device``; raises ``UsageError``."""
    kind = "cpu" if device == "cpu" else "cuda"
    default_warmup, default_iterations, default_trials = DEFAULTS[kind]
    warmup = options.warmup if options.warmup is not None else default_warmup
    iterations = options.iterations if options.iterations is not None else default_iterations
    trials = options.trials if options.trials is not None else default_trials
    if warmup < 0 or (iterations is not None and iterations < 1) or trials < 1:
        raise UsageError("--warmup must be >= 0, --iterations and --trials >= 1")
    if options.rounds < 1:
        raise UsageError("--rounds must be >= 1: every run is checked against the reference")
    if options.statistic not in STATISTICS:
        raise UsageError(f"--statistic {options.statistic!r}: expected one of {', '.join(STATISTICS)}")
    if options.timer not in TIMERS:
        raise UsageError(f"--timer {options.timer!r}: expected one of {', '.join(TIMERS)}")
    if options.timer not in ("auto", "graph") and options.cuda_graph:
        raise UsageError(f"--cuda-graph is --timer graph; it cannot be combined with --timer {options.timer}")
    if options.timer in ("cupti", "events", "graph") and kind == "cpu":
        raise UsageError(f"--timer {options.timer} needs a CUDA device (the CPU's timer is perf_counter_ns)")
    if options.timer in ("cupti", "graph") and options.time_setup:
        raise UsageError(
            "--time-setup times setup() and run() with CUDA events; it cannot take --timer " + options.timer
        )
    if options.cuda_graph and kind == "cpu":
        raise UsageError("--cuda-graph needs a CUDA device")
    if options.cuda_graph and options.time_setup:
        raise UsageError("--time-setup cannot be combined with --cuda-graph (setup cannot be captured in a graph)")
    if options.timeout_s <= 0:
        raise UsageError("--timeout must be positive")
    if options.threads < 1:
        raise UsageError("--threads must be >= 1")
    if not 0 < options.target_error < 1:
        raise UsageError("--target-error must be between 0 and 1 (e.g. 0.02 for 2%)")
    if options.time_budget_s is not None and options.time_budget_s <= 0:
        raise UsageError("--time-budget must be positive")
    if options.stop_after_s is not None and not options.stop_after_s >= 0:  # NaN too: it would never stop
        raise UsageError("--stop-after must be zero or more seconds")
    if not 1 <= options.input_sets <= 64:
        raise UsageError("--input-sets must be between 1 and 64")
    if options.worker_limits is not None:
        parse_limits(options.worker_limits)
    return warmup, iterations, trials


def usable_cpus() -> int:
    """How many CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - Linux has it
        return os.cpu_count() or 1


def pinned_cpus(threads: int) -> tuple[int, ...]:
    """The CPUs a worker is pinned to: the last ``threads`` of those kictl may use (CPU 0 takes interrupts)."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - Linux has it
        return ()
    return tuple(allowed[-threads:]) if threads <= len(allowed) else tuple(allowed)


@contextlib.contextmanager
def parent_threads(pinned: tuple[int, ...]) -> Iterator[int]:
    """While a session runs, torch's threads in kictl's own process leave its workers' CPUs; restored after.

    The parent compares outputs and, on the CPU, writes the timed inputs with torch's thread pool. A pool as
    large as the machine keeps a thread on the CPU the workers are pinned to, and every parallel operation
    then waits for it whenever anything runs there between calls: in the exploit corpus's CPU session
    (threads that an implementation starts and leaves spinning), judging 53 runs took 45 s of a 140 s
    session on 2 CPUs, and the pytest module 173 s against 106 s with one thread. The pool gets the CPUs this
    process may use less ``pinned`` (at least one) when that is fewer than it has. Yields the count in force.
    """
    torch = torch_module()

    before = torch.get_num_threads()
    try:
        allowed = set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - Linux has it
        allowed = set()
    wanted = max(1, len(allowed - set(pinned))) if allowed else before
    if wanted < before:
        torch.set_num_threads(wanted)
    try:
        yield torch.get_num_threads()
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


#: The L2 flush when the environment does not report the L2's size.
FALLBACK_FLUSH_BYTES = 256 * 1024 * 1024


def flush_bytes(device: str, hardware: Mapping[str, object]) -> int:
    """Twice the L2 cache (issue 4: a write to a buffer of twice the L2 size); 0 on the CPU."""
    if device == "cpu":
        return 0
    l2 = hardware.get("l2CacheBytes", 0)
    return 2 * int(l2) if isinstance(l2, int) and l2 > 0 else FALLBACK_FLUSH_BYTES
