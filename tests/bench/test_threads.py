"""Threads an implementation keeps are judged by what they do, not by being alive (issue 40, ``noThreadsLeft``).

The corpus's ``threads-cpu`` session (tests/assets/cheats/corpus.json) runs the definition's reference, the torch
implementation, honest entries that keep a watchdog thread, a helper blocked on a queue or signal handlers of
their own, and the cheats whose threads work outside their calls: a thread started by a call and alive at its
return, one that spins between calls, one handed spinning after each call, one that finishes the outputs after
the return (caught by the audit that reads them at the stop) or in the moment between the answer and the stop.
The rules themselves are driven with figures here, without a worker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import Result

from kictl.bench.judge import loop
from kictl.bench.wire.checks import Check
from kictl.selftest import judge, load_corpus
from tests.bench.conftest import CHEATS, IMPLEMENTATIONS, SANDBOX, rows

CORPUS = load_corpus(CHEATS)
SESSION = "threads-cpu"


def _evidence(**figures: int) -> loop.RunEvidence:
    evidence = loop.RunEvidence(samples=[1_000_000] * 12, walls=[1_000_000] * 12)
    for name, value in figures.items():
        setattr(evidence, name, value)
    return evidence


def _thread_notes(evidence: loop.RunEvidence) -> list[str]:
    loop.consistency_notes(evidence, True, 100)
    return evidence.notes.get(Check.NO_THREADS_LEFT.value, [])


def test_an_idle_thread_passes_and_a_busy_one_fails() -> None:
    # a watchdog waking every 50 ms: 0.14% of the wall time between calls on the loaded VM
    assert _thread_notes(_evidence(thread_outside_ns=3_000_000, thread_outside_wall_ns=2_000_000_000)) == []
    # one that spins a fifth of the time between calls
    found = _thread_notes(_evidence(thread_outside_ns=80_000_000, thread_outside_wall_ns=400_000_000))
    assert found, "a thread spinning 20% of the time between calls passed"
    assert "80.0 ms of CPU in 400 ms between its timed calls" in found[0]


def test_the_share_is_of_the_wall_time_between_calls_plus_a_slack() -> None:
    wall = 1_000_000_000
    edge = int(loop.THREAD_SHARE * wall) + loop.THREAD_SLACK_NS
    assert _thread_notes(_evidence(thread_outside_ns=edge, thread_outside_wall_ns=wall)) == []
    assert _thread_notes(_evidence(thread_outside_ns=edge + 1, thread_outside_wall_ns=wall))


def test_work_between_the_answer_and_the_stop_fails() -> None:
    allowed = 12 * loop.THREAD_WINDOW_PER_CALL_NS + loop.THREAD_WINDOW_SLACK_NS
    assert _thread_notes(_evidence(thread_window_ns=allowed)) == []
    found = _thread_notes(_evidence(thread_window_ns=36_000_000))
    assert found
    assert "between its timed calls' answers and the worker's stops" in found[0]


def _outside_notes(evidence: loop.RunEvidence) -> list[str]:
    loop.consistency_notes(evidence, True, 100)
    return evidence.notes.get(Check.NO_WORK_OUTSIDE_CALLS.value, [])


def test_an_idle_thread_on_a_long_wall_between_calls_is_judged_by_its_share_not_by_kictl_s_allowance() -> None:
    # the corpus's honest watchdog at load 11-14: 89 ms of the sandbox's CPU between 12 calls, all but ~2 ms of it
    # the watchdog's wake-ups over 12 s of wall between the calls (0.7%); kictl's checks alone may use 62 ms
    honest = _evidence(
        outside_cpu_ns=89_000_000, thread_between_ns=87_000_000,
        thread_outside_ns=87_000_000, thread_outside_wall_ns=12_000_000_000,
    )  # fmt: skip
    assert _outside_notes(honest) == []
    assert honest.notes == {}


def test_work_between_calls_that_no_thread_of_the_implementation_did_still_fails() -> None:
    # the same CPU, done by a helper process or kictl's own thread: the threads' share does not cover it
    found = _outside_notes(_evidence(outside_cpu_ns=89_000_000, thread_between_ns=0))
    assert found
    assert "used 89 ms of CPU between its 12 timed calls besides the 0 ms of the implementation's threads" in found[0]
    # threads that used little leave the rest judged; the threads' count can never exceed what the sandbox used
    assert _outside_notes(_evidence(outside_cpu_ns=200_000_000, thread_between_ns=100_000_000))
    assert _outside_notes(_evidence(outside_cpu_ns=89_000_000, thread_between_ns=10**12)) == []


def test_a_thread_that_works_between_calls_is_still_caught_when_kictl_s_allowance_no_longer_holds_it() -> None:
    # 60 ms of spinning between 12 calls of 1 ms on a short wall: under kictl's allowance before, over the share now
    busy = _evidence(
        outside_cpu_ns=62_000_000, thread_between_ns=60_000_000,
        thread_outside_ns=60_000_000, thread_outside_wall_ns=300_000_000,
    )  # fmt: skip
    assert _outside_notes(busy) == []
    assert busy.notes.get(Check.NO_THREADS_LEFT.value)


def test_threads_are_not_judged_by_cpu_off_the_cpu() -> None:
    evidence = _evidence(thread_outside_ns=10**9, thread_outside_wall_ns=10**9, thread_window_ns=10**9)
    loop.consistency_notes(evidence, False, 100)
    assert Check.NO_THREADS_LEFT.value not in evidence.notes


def _by_implementation(result: Result) -> dict[str, dict[str, Any]]:
    return {row["implementation"].rsplit("_", 1)[0]: row for row in rows(result)}


@pytest.fixture(scope="module")
def threads_session(bench_module: Callable[..., Result]) -> Result:
    spec = CORPUS.corpus.sessions[SESSION]
    members = sorted(name for name, entry in CORPUS.corpus.entries.items() if SESSION in entry.expect)
    impls = [arg for name in members for arg in ("--impl", CHEATS / f"{name}.py")]
    folder = IMPLEMENTATIONS / spec.definition
    options = ["--rounds", "1", "--warmup", "1", "--iterations", "12", "--timeout", "20"]
    assert spec.options == {"rounds": 1, "warmup": 1, "iterations": 12, "timeoutS": 20}
    workloads = [arg for workload in spec.workloads for arg in ("--workload", workload)]
    return bench_module(
        spec.definition,
        "--impl",
        folder / "reference",
        "--impl",
        folder / "torch_rmsnorm",
        *impls,
        "--device",
        spec.device,
        *workloads,
        *options,
    )


@pytest.mark.skipif(not SANDBOX, reason="needs bubblewrap (apt-get install bubblewrap)")
@pytest.mark.slow
def test_kept_threads_pass_when_idle_and_fail_when_they_work(threads_session: Result) -> None:
    found = _by_implementation(threads_session)
    for name in ("reference", "torch_rmsnorm"):
        assert found[name]["status"] == "passed", found[name]
    missed = {
        name: (found[name]["status"], found[name]["statusDetail"])
        for name, entry in CORPUS.corpus.entries.items()
        if SESSION in entry.expect
        and not judge(entry.expect[SESSION], found[name]["status"], found[name]["statusDetail"])
    }
    assert missed == {}, "\n".join(f"{name}: {status}: {detail}" for name, (status, detail) in missed.items())
    assert all(row["run"] for row in found.values()), "a run lost its record"
