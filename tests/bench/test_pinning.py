"""The timed calls run pinned to one CPU; the start, the import and the correctness rounds are not held to it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import Result

from tests.bench.conftest import rows
from tests.conftest import MACHINE_CPUS

ASSET = Path(__file__).parent / "assets" / "affinity_rmsnorm.py"


@pytest.fixture(scope="module")
def pinned_session(bench_module: Callable[..., Result]) -> tuple[Result, list[int], int]:
    """One session on every CPU of the machine, torch's pool as large as the machine: its result, the thread
    counts ``options.parent_threads`` gave the session, and the pool's size after it.  Both tests below read it
    (one session where there were two: the second ran b1 with the adaptive count, about 9 s on the 2-core VM)."""
    import torch

    from kictl.bench.judge import options, session

    narrowed = os.sched_getaffinity(0)
    before = torch.get_num_threads()
    seen: list[int] = []

    @contextlib.contextmanager
    def watched(pinned: tuple[int, ...]) -> Iterator[int]:
        with options.parent_threads(pinned) as count:
            seen.append(count)
            yield count

    os.sched_setaffinity(0, MACHINE_CPUS)  # as the every_cpu fixture does, for the module's one session
    try:
        torch.set_num_threads(len(MACHINE_CPUS))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(session, "parent_threads", watched)
            result = bench_module(
                "rmsnorm_h4096",
                "--impl",
                ASSET,
                "--workload",
                "b1",
                "--device",
                "cpu",
                "--rounds",
                "2",
                "--warmup",
                "2",
                "--iterations",
                "5",
            )
        after = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
        os.sched_setaffinity(0, narrowed)
    return result, seen, after


@pytest.mark.skipif(len(MACHINE_CPUS) < 2, reason="needs two CPUs to tell pinned from not")
def test_threads_are_pinned_from_arming_on(pinned_session: tuple[Result, list[int], int]) -> None:
    result, _, _ = pinned_session
    (row,) = rows(result)
    assert row["status"] == "passed", row["statusDetail"]
    assert result.exit_code == 0, result.output


@pytest.mark.skipif(len(MACHINE_CPUS) < 2, reason="needs two CPUs: one for the workers, one for the parent")
@pytest.mark.usefixtures("every_cpu")
def test_the_parent_leaves_its_workers_cpu_while_a_session_runs(pinned_session: tuple[Result, list[int], int]) -> None:
    """kictl's own torch threads (comparisons, staged inputs) use the CPUs its workers are not pinned to, and
    the pool is as it was after the session (``options.parent_threads``)."""
    import torch

    from kictl.bench.judge import options

    machine = len(MACHINE_CPUS)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(machine)
        with options.parent_threads(options.pinned_cpus(1)) as inside:
            assert inside == torch.get_num_threads() == machine - 1
        assert torch.get_num_threads() == machine
        with options.parent_threads(tuple(MACHINE_CPUS)) as inside:  # every CPU pinned: one thread is left
            assert inside == 1
        torch.set_num_threads(1)
        with options.parent_threads(()) as inside:  # never more threads than the process had
            assert inside == 1
    finally:
        torch.set_num_threads(before)
    result, seen, after = pinned_session  # the session: the pool left the workers' CPU, and came back after
    assert result.exit_code == 0, result.output
    assert seen == [machine - 1]
    assert after == machine
