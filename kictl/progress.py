"""Progress of long commands on stderr: a live line on a terminal, plain timed lines elsewhere.

``progress()`` gives a ``say(text)`` callable.  Where stderr is a terminal
it drives rich's one-line live status; where it is
not (CI logs, ``nohup``, ``| tee``, a file), each ``say`` writes one line
``t=12.3s text``: the seconds since the command started, then what it is
doing.  ``lines=True`` writes the plain lines on a terminal too (``kictl
bench --timings``).  stdout is never touched: it carries the command's data.

A step that says how far it is, ``K/N`` in its text (``session 2/5``, ``40/122
pages``), also says what is left: on a line ``(K of N, ~12 s left)``, the time
estimated from the steps so far; on a terminal a bar beside the text.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.markup import escape

from kictl.errors import KictlError
from kictl.families import Work
from kictl.families.gpus import find_gpu
from kictl.families.practical import calls_per_job, estimate_job
from kictl.index.query import QueryIndex
from kictl.rank.floors import workload_work

if TYPE_CHECKING:
    from kictl.store.registry import Registry

Say = Callable[[str], None]


def stamped(text: str, began: float) -> str:
    """One plain progress line: ``t=SECONDS text``."""
    return f"t={time.perf_counter() - began:.1f}s {text}"


#: How far a step is, in its text: ``3/10`` (not part of a date, a path or a larger number).
_STEP = re.compile(r"(?<![\w/.])(\d+)/(\d+)(?![\w/.])")
_BAR_WIDTH = 20


def remaining(text: str, elapsed_s: float) -> tuple[int, int, str] | None:
    """``(done, total, "~12 s left")`` for a text naming step ``K/N`` (K ≤ N), ``None`` otherwise.

    What is left is the time so far times the steps left over the steps done (``?`` before the first).
    """
    found = _STEP.search(text)
    if found is None:
        return None
    done, total = int(found.group(1)), int(found.group(2))
    if total <= 0 or done > total:
        return None
    if done == total:
        return done, total, "last step"
    if done == 0 or elapsed_s <= 0:
        return done, total, "time left unknown yet"
    left = elapsed_s * (total - done) / done
    text_left = f"~{left:.0f} s left" if left < 120 else f"~{left / 60:.0f} min left"
    return done, total, text_left


def bar(done: int, total: int, width: int = _BAR_WIDTH) -> str:
    """``[#####---------------]``: ``done`` of ``total`` as a bar of ``width`` cells."""
    filled = round(width * done / total) if total else 0
    return "[" + "#" * filled + "-" * (width - filled) + "]"


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
            step = remaining(text, time.perf_counter() - began)
            suffix = f" ({step[0]} of {step[1]}, {step[2]})" if step is not None else ""
            with lock:
                target.write(stamped(text + suffix, began) + "\n")
                target.flush()

        yield say
        return
    began = time.perf_counter()
    with Console(file=target).status("starting") as status:

        def live(text: str) -> None:
            step = remaining(text, time.perf_counter() - began)
            shown = escape(text) if step is None else f"{escape(bar(step[0], step[1]))} {escape(text)} · {step[2]}"
            status.update(shown)

        yield live


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
    gpu = None
    if device != "cpu":
        import torch  # a GPU-only question: torch is imported where a GPU is named, never for the CPU

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
