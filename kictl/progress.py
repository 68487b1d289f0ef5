"""Progress of long commands on stderr: a live line on a terminal, plain timed lines elsewhere.

``progress()`` gives a ``say(text)`` callable.  Where stderr is a terminal
(and rich is installed) it drives rich's one-line live status; where it is
not (CI logs, ``nohup``, ``| tee``, a file), each ``say`` writes one line
``t=12.3s text``: the seconds since the command started, then what it is
doing.  ``lines=True`` writes the plain lines on a terminal too (``kictl
bench --timings``).  stdout is never touched: it carries the command's data.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from kictl.store import Registry

Say = Callable[[str], None]


def stamped(text: str, began: float) -> str:
    """One plain progress line: ``t=SECONDS text``."""
    return f"t={time.perf_counter() - began:.1f}s {text}"


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except ValueError:  # a closed stream
        return False


@contextlib.contextmanager
def progress(*, lines: bool = False, stream: TextIO | None = None) -> Iterator[Say]:
    """A ``say(text)`` for the duration of the block (this module's docstring); thread-safe."""
    target = sys.stderr if stream is None else stream
    if lines or not _is_terminal(target):
        began = time.perf_counter()
        lock = threading.Lock()

        def say(text: str) -> None:
            with lock:
                target.write(stamped(text, began) + "\n")
                target.flush()

        yield say
        return
    try:
        from rich.console import Console
    except ImportError:  # rich is a dependency; a trimmed install still gets lines
        with progress(lines=True, stream=target) as plain:
            yield plain
        return
    with Console(file=target).status("starting") as status:
        yield lambda text: status.update(text)


def size_warnings(
    registry: Registry,
    definition: str,
    workloads: list[str] | tuple[str, ...],
    *,
    device: str,
    threads: int,
    warmup: int | None,
    rounds: int,
    iterations: int | None,
    trials: int | None,
) -> list[str]:
    """A warning for each job of a bench that is impractical on ``device`` (``kictl.families.practical``).

    ``device`` is resolved (``cpu`` or ``cuda:N``).  Says nothing where the
    estimate cannot be made (an unknown name, a GPU the datasheet table does
    not list): the bench itself reports what is wrong.
    """
    from kictl.errors import KictlError
    from kictl.families import Work
    from kictl.families.gpus import find_gpu
    from kictl.families.practical import calls_per_job, estimate_job
    from kictl.index import QueryIndex
    from kictl.rank.floors import workload_work

    gpu = None
    if device != "cpu":
        import torch

        gpu = find_gpu(torch.cuda.get_device_name(int(device.partition(":")[2] or 0)))
        if gpu is None:
            return []
    calls = calls_per_job(
        warmup=(1 if gpu is None else 10) if warmup is None else warmup,
        rounds=rounds,
        iterations=iterations,
        trials=1 if trials is None else trials,
    )
    warnings: list[str] = []
    try:
        with QueryIndex.open(registry) as index:
            facts = index.resolve_definition(definition)
            chosen = [index.resolve_workload(facts.digest, ref) for ref in workloads] or index.workloads(facts.digest)
            for workload in chosen:
                work = workload_work(index, facts, workload)
                amount = Work(work.bytes, work.flops, work.compute_dtype, work.notes)
                estimate = estimate_job(workload.name, amount, gpu=gpu, threads=threads, calls=calls)
                if estimate.impractical:
                    warnings.append(estimate.warning())
    except KictlError:
        return []
    return warnings
