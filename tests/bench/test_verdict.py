"""Judging an outcome: status precedence and the integrity verdicts."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kictl.bench import correctness
from kictl.bench.runner import CRASHED, FAILED, RESULT, TIMEOUT, Outcome
from kictl.bench.verdict import WorkloadContext, evaluate

REFS = {offset: [torch.full((4,), float(offset + 1))] for offset in (0, 1, 2)}


def _context() -> WorkloadContext:
    return WorkloadContext(
        record=None,  # type: ignore[arg-type]
        plans={},
        names=["out"],
        shapes=[(4,)],
        dtypes=["float32"],
        tolerance=correctness.Tolerance(),
        round_offsets=[1, 2],
        floor_ns=None,
        floor_text="no datasheet floor for a CPU",
    )


def _payload(**changes: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "rounds": {
            1: {"outputs": [REFS[1][0].clone()], "error": None},
            2: {"outputs": [REFS[2][0].clone()], "error": None},
        },
        "audit": [REFS[0][0].clone()],
        "audit_error": None,
        "timing": {"samples": [1000, 1200, 1100], "enqueued_ahead": None, "device_spin_ns": None},
        "notes": {},
        "skipped": {"streamOrdered": "no CUDA streams on the CPU"},
    }
    payload.update(changes)
    return payload


def _judge(payload: dict[str, Any]) -> dict[str, Any]:
    return evaluate(Outcome(RESULT, payload), _context(), REFS, "median", 2)


def test_an_honest_result_passes_with_every_check_recorded() -> None:
    members = _judge(_payload())
    assert members["status"] == "passed"
    assert members["timing"]["latencyNs"]["median"] == 1100
    assert members["timing"]["samples"] == [1000, 1200, 1100]
    assert members["correctness"]["matchedRatio"] == 1.0
    assert members["correctness"]["rounds"] == 2
    results = {name: check["result"] for name, check in members["integrity"].items()}
    assert results == {
        "inputsUnchanged": "passed",
        "outputsNotAliasInputs": "passed",
        "plainTensorOutputs": "passed",
        "noThreadsLeft": "passed",
        "timerNotPatched": "passed",
        "streamOrdered": "skipped",
        "outputsFullyWritten": "passed",
        "outputsFresh": "passed",
        "timedOutputsCorrect": "passed",
        "aboveFloor": "skipped",
    }


def test_a_wrong_timed_call_is_a_reward_hack() -> None:
    members = _judge(_payload(audit=[REFS[1][0].clone()]))
    assert members["status"] == "reward_hack"
    assert members["integrity"]["timedOutputsCorrect"]["result"] == "failed"
    assert members["integrity"]["outputsFresh"]["result"] == "failed"


def test_worker_evidence_becomes_a_failed_check() -> None:
    members = _judge(_payload(notes={"inputsUnchanged": ["a call changed x"]}))
    assert members["status"] == "reward_hack"
    assert members["statusDetail"] == "inputsUnchanged: a call changed x"


def test_shape_problems_come_before_integrity_and_numerics() -> None:
    rounds = {
        1: {"outputs": None, "error": "returned 1 value(s), the definition has outputs ['out', 'lse']"},
        2: {"outputs": [REFS[2][0] + 1], "error": None},
    }
    members = _judge(_payload(rounds=rounds, notes={"noThreadsLeft": ["x"]}))
    assert members["status"] == "incorrect_shape"
    assert "returned 1 value" in members["statusDetail"]


def test_numerical_errors_without_cheating_are_incorrect_numerical() -> None:
    rounds = {1: {"outputs": [REFS[1][0] * 1.5], "error": None}, 2: {"outputs": [REFS[2][0] * 1.5], "error": None}}
    members = _judge(_payload(rounds=rounds, audit=[REFS[0][0] * 1.5]))
    assert members["status"] == "incorrect_numerical"
    assert members["correctness"]["matchedRatio"] == 0.0
    assert members["integrity"]["timedOutputsCorrect"]["result"] == "skipped"


def test_poisoned_outputs_are_unwritten_outputs() -> None:
    poisoned = REFS[1][0].clone()
    poisoned.view(torch.uint8)[:4] = 0xFF
    members = _judge(
        _payload(rounds={1: {"outputs": [poisoned], "error": None}, 2: {"outputs": [REFS[2][0]], "error": None}})
    )
    assert members["status"] == "reward_hack"
    assert members["integrity"]["outputsFullyWritten"]["detail"] == "1 elements of out (inputs 1) were never written"


def test_time_below_the_floor_is_a_reward_hack() -> None:
    context = _context()
    context.floor_ns, context.floor_text = 5000.0, "bandwidth-bound, H200 datasheet"
    members = evaluate(Outcome(RESULT, _payload()), context, REFS, "median", 2)
    assert members["status"] == "reward_hack"
    assert members["integrity"]["aboveFloor"]["detail"].startswith("1100 ns is below the floor of 5000 ns")


@pytest.mark.parametrize(
    ("outcome", "status"),
    [
        (Outcome(TIMEOUT, detail="no answer within 5 s"), "timeout"),
        (Outcome(FAILED, {"status": "compile_error"}, detail="SyntaxError"), "compile_error"),
        (Outcome(FAILED, {"status": "runtime_error"}, detail="ValueError"), "runtime_error"),
        (Outcome(CRASHED, detail="the worker was killed by SIGSEGV"), "runtime_error"),
    ],
)
def test_failures_map_to_statuses(outcome: Outcome, status: str) -> None:
    members = evaluate(outcome, _context(), None, "median", 2)
    assert members["status"] == status
    assert members["statusDetail"]
