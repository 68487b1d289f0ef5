"""Judging the evidence the parent gathered: status precedence and the integrity verdicts."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kictl.bench.judge import correctness
from kictl.bench.judge.loop import RunEvidence
from kictl.bench.judge.verdict import WorkloadContext, evaluate
from kictl.bench.wire.checks import CHECKS, Check

REFS = {
    label: [torch.full((4,), float(n + 1))] for n, label in enumerate(["input set 0, rolled 0", "round 1", "round 2"])
}


def _context() -> WorkloadContext:
    return WorkloadContext(
        record=None,  # type: ignore[arg-type]
        names=["out"],
        shapes=[(4,)],
        dtypes=["float32"],
        tolerance=correctness.Tolerance(),
        round_labels=["round 1", "round 2"],
        set_labels=["input set 0"],
        floor_ns=None,
        floor_text="no datasheet floor for a CPU",
    )


def _evidence(**changes: Any) -> RunEvidence:
    evidence = RunEvidence(
        rounds={"round 1": [REFS["round 1"][0].clone()], "round 2": [REFS["round 2"][0].clone()]},
        samples=[1000, 1200, 1100],
        walls=[50_000, 52_000, 51_000],
        sets=[0, 0, 0],
        audits=[(1, 0, 0, [REFS["input set 0, rolled 0"][0].clone()])],
        pings_ns=[40_000] * 15,
    )
    for name, value in changes.items():
        setattr(evidence, name, value)
    return evidence


def _judge(evidence: RunEvidence, context: WorkloadContext | None = None) -> dict[str, Any]:
    return evaluate(evidence, context or _context(), REFS, "median", 2)


def test_an_honest_result_passes_with_every_check_recorded() -> None:
    members = _judge(_evidence())
    assert members["status"] == "passed", members
    assert members["timing"]["latencyNs"]["median"] == 1100
    assert members["timing"]["samples"] == [1000, 1200, 1100]
    assert members["timing"]["audited"] == 1
    assert members["correctness"]["matchedRatio"] == 1.0
    assert members["correctness"]["rounds"] == 2
    results = {name: check["result"] for name, check in members["integrity"].items()}
    assert list(results) == list(CHECKS)
    assert {name for name, result in results.items() if result != "passed"} == {"streamOrdered", "aboveFloor"}


def test_a_wrong_audited_timed_call_is_a_reward_hack() -> None:
    members = _judge(_evidence(audits=[(2, 0, 0, [REFS["round 1"][0].clone()])]))
    assert members["status"] == "reward_hack"
    assert members["integrity"]["timedOutputsCorrect"]["result"] == "failed"
    assert "1 of 1 audited timed calls were wrong" in members["integrity"]["timedOutputsCorrect"]["detail"]
    assert members["integrity"]["outputsFresh"]["result"] == "failed"


def test_evidence_becomes_a_failed_check_named_by_the_enum() -> None:
    evidence = _evidence()
    evidence.note(Check.INPUTS_UNCHANGED, "a call changed x")
    members = _judge(evidence)
    assert members["status"] == "reward_hack"
    assert members["statusDetail"] == "inputsUnchanged: a call changed x"


def test_a_sample_longer_than_the_parent_saw_is_inconsistent() -> None:
    members = _judge(_evidence(samples=[1000, 90_000, 1100]))
    assert members["status"] == "reward_hack"
    assert "longer than the parent's wall time" in members["integrity"]["samplesConsistent"]["detail"]


def test_samples_far_below_the_parents_wall_time_are_inconsistent() -> None:
    walls = [50_000_000, 60_000_000, 55_000_000, 70_000_000, 80_000_000]
    members = _judge(_evidence(samples=[1000] * 5, walls=walls, sets=[0] * 5))
    assert members["status"] == "reward_hack"
    assert "at least 50.0 ms more than the worker reported" in members["integrity"]["samplesConsistent"]["detail"]
    # one call placed well is enough to show the wire was all the rest: no false alarm under load
    walls[2] = 60_000
    assert _judge(_evidence(samples=[1000] * 5, walls=walls, sets=[0] * 5))["status"] == "passed"
    # nor is one slow call alone judged
    assert _judge(_evidence(samples=[1000], walls=[90_000_000], sets=[0]))["status"] == "passed"


def test_cpu_time_far_above_the_samples_is_inconsistent() -> None:
    # 3 calls reported at ~1 µs each, while /proc saw the worker burn 0.5 s of CPU during them
    members = _judge(_evidence(call_cpu_ns=500_000_000))
    assert members["status"] == "reward_hack"
    assert "used 500 ms of CPU over 3 timed calls" in members["integrity"]["samplesConsistent"]["detail"]
    assert _judge(_evidence(call_cpu_ns=2_000_000))["status"] == "passed"


def test_cpu_time_beyond_the_pinned_threads_is_work_outside_the_calls() -> None:
    members = _judge(_evidence(loop_ticks=300, loop_wall_ns=1_000_000_000))
    assert members["status"] == "reward_hack"
    assert "with 1 thread(s) allowed" in members["integrity"]["noWorkOutsideCalls"]["detail"]


def test_cpu_used_while_idle_is_work_outside_the_calls() -> None:
    members = _judge(_evidence(idle_ticks=8))
    assert members["status"] == "reward_hack"
    assert "after the timed calls" in members["integrity"]["noWorkOutsideCalls"]["detail"]


def test_shape_problems_come_before_integrity_and_numerics() -> None:
    evidence = _evidence(
        rounds={
            "round 1": "returned 1 value(s), the definition has outputs ['out', 'lse']",
            "round 2": [REFS["round 2"][0] + 1],
        }
    )
    evidence.note(Check.NO_THREADS_LEFT, "x")
    members = _judge(evidence)
    assert members["status"] == "incorrect_shape"
    assert "returned 1 value" in members["statusDetail"]


def test_numerical_errors_without_cheating_are_incorrect_numerical() -> None:
    members = _judge(
        _evidence(
            rounds={"round 1": [REFS["round 1"][0] * 1.5], "round 2": [REFS["round 2"][0] * 1.5]},
            audits=[(0, 0, 0, [REFS["input set 0, rolled 0"][0] * 1.5])],
        )
    )
    assert members["status"] == "incorrect_numerical"
    assert members["correctness"]["matchedRatio"] == 0.0
    assert members["integrity"]["timedOutputsCorrect"]["result"] == "skipped"


def test_poisoned_outputs_are_unwritten_outputs() -> None:
    poisoned = REFS["round 1"][0].clone()
    poisoned.view(torch.uint8)[:4] = 0xFF
    members = _judge(_evidence(rounds={"round 1": [poisoned], "round 2": [REFS["round 2"][0]]}))
    assert members["status"] == "reward_hack"
    assert members["integrity"]["outputsFullyWritten"]["detail"] == "1 elements of out (round 1) were never written"


def test_time_below_the_floor_is_a_reward_hack() -> None:
    context = _context()
    context.floor_ns, context.floor_text = 5000.0, "bandwidth-bound, H200 datasheet"
    members = _judge(_evidence(), context)
    assert members["status"] == "reward_hack"
    assert members["integrity"]["aboveFloor"]["detail"].startswith("1100 ns is below the floor of 5000 ns")


@pytest.mark.parametrize(
    ("failure", "status"),
    [
        (("timeout", "no answer within 5 s"), "timeout"),
        (("compile_error", "SyntaxError"), "compile_error"),
        (("runtime_error", "the worker was killed by SIGSEGV"), "runtime_error"),
        (("reward_hack", "wireIntact: the worker broke the wire protocol"), "reward_hack"),
    ],
)
def test_failures_map_to_statuses(failure: tuple[str, str], status: str) -> None:
    members = _judge(RunEvidence(failure=failure))
    assert members["status"] == status
    assert members["statusDetail"] == failure[1]


def test_stream_ordered_says_which_rule_judged_it_on_cuda() -> None:
    """Under CUPTI the check names its rule: CUDA's ordering from CUPTI's records, or time alone (and why)."""
    import dataclasses

    from kictl.bench.judge.session import stream_rule

    cuda = dataclasses.replace(_context(), device="cuda:0")
    by_order = stream_rule("cupti_device_time", None)
    assert by_order is not None
    assert "CUDA's ordering" in by_order
    members = _judge(_evidence(stream_rule=by_order), cuda)
    assert members["integrity"]["streamOrdered"] == {"result": "passed", "detail": by_order}
    by_time = stream_rule("cupti_device_time", "this cupti-python lacks SYNCHRONIZATION")
    assert by_time is not None
    assert "time alone" in by_time
    assert "lacks SYNCHRONIZATION" in by_time
    assert _judge(_evidence(stream_rule=by_time), cuda)["integrity"]["streamOrdered"]["detail"] == by_time
    # CUDA events see one stream only: no rule to name, the check passes as before
    assert stream_rule("cuda_events", None) is None
    assert _judge(_evidence(), cuda)["integrity"]["streamOrdered"] == {"result": "passed"}
    # a note from the worker fails it whatever the rule
    evidence = _evidence(stream_rule=by_order)
    evidence.note(Check.STREAM_ORDERED, "26 kernel(s) ... were not ordered on the calling stream")
    failed = _judge(evidence, cuda)
    assert failed["status"] == "reward_hack"
    assert failed["integrity"]["streamOrdered"]["result"] == "failed"
