"""Judging what a worker reported: correctness, integrity and the run's status (DESIGN §3, §7).

``evaluate`` turns one worker outcome into the members of a BenchmarkRun
spec: the worst correctness round, every integrity check with its verdict,
the timing statistics, and the status, by precedence: ``timeout`` /
``runtime_error`` / ``compile_error``, then ``incorrect_shape`` /
``incorrect_dtype``, then ``reward_hack`` (any failed integrity check), then
``incorrect_numerical``, else ``passed``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kictl.bench import correctness, integrity
from kictl.bench.inputs import InputPlan
from kictl.bench.runner import CRASHED, FAILED, RESULT, TIMEOUT, Outcome
from kictl.bench.timing import summarize
from kictl.records import StoredRecord


@dataclass
class WorkloadContext:
    """Everything about one workload that evaluation needs."""

    record: StoredRecord
    plans: dict[int, InputPlan]
    names: list[str]
    shapes: list[tuple[int, ...]]
    dtypes: list[str]
    tolerance: correctness.Tolerance
    round_offsets: list[int]
    floor_ns: float | None = None
    floor_text: str | None = None


def integrity_checks(
    result: dict[str, Any],
    context: WorkloadContext,
    refs: dict[int, list[Any]],
    rounds: list[Any],
    primary_ns: int | None,
) -> dict[str, dict[str, str]]:
    notes: dict[str, list[str]] = result.get("notes", {})
    skipped: dict[str, str] = result.get("skipped", {})
    checks: dict[str, dict[str, str]] = {}
    for name in (
        "inputsUnchanged",
        "outputsNotAliasInputs",
        "plainTensorOutputs",
        "noThreadsLeft",
        "timerNotPatched",
        "streamOrdered",
    ):
        if notes.get(name):
            checks[name] = integrity.result(integrity.FAILED, "; ".join(notes[name])[:1000])
        elif name in skipped:
            checks[name] = integrity.result(integrity.SKIPPED, skipped[name])
        else:
            checks[name] = integrity.result(integrity.PASSED)
    # outputs fully written: no element still holds the poison pattern
    calls: dict[int, list[Any]] = {
        offset: entry["outputs"] for offset, entry in result["rounds"].items() if entry.get("outputs") is not None
    }
    audit = result.get("audit")
    poisoned = []
    for offset, outputs in [*calls.items(), *([(0, audit)] if audit is not None else [])]:
        for name, tensor, want in zip(context.names, outputs, refs.get(offset, [None] * len(outputs)), strict=False):
            count = integrity.poisoned_elements(tensor, want)
            if count:
                poisoned.append(f"{count} elements of {name} (inputs {offset}) were never written")
    checks["outputsFullyWritten"] = (
        integrity.result(integrity.FAILED, "; ".join(poisoned)) if poisoned else integrity.result(integrity.PASSED)
    )
    # outputs fresh: different inputs never gave bit-identical outputs (unless the references agree too)
    seen = [*calls.items(), *([(0, audit)] if audit is not None else [])]
    stale = []
    for position, (offset_a, outputs_a) in enumerate(seen):
        for offset_b, outputs_b in seen[position + 1 :]:
            if offset_a == offset_b or offset_a not in refs or offset_b not in refs:
                continue
            if correctness.outputs_identical(outputs_a, outputs_b) and not correctness.outputs_identical(
                refs[offset_a], refs[offset_b]
            ):
                stale.append(f"inputs {offset_a} and {offset_b} gave identical outputs")
    if len({offset for offset, _ in seen}) < 2:
        checks["outputsFresh"] = integrity.result(integrity.SKIPPED, "fewer than two different inputs were called")
    elif stale:
        checks["outputsFresh"] = integrity.result(integrity.FAILED, "; ".join(stale))
    else:
        checks["outputsFresh"] = integrity.result(integrity.PASSED)
    # a timed call, chosen at random, returned correct outputs
    rounds_passed = bool(rounds) and all(r.status == "passed" for r in rounds)
    if result.get("audit_error"):
        checks["timedOutputsCorrect"] = integrity.result(integrity.FAILED, f"a timed call {result['audit_error']}")
    elif audit is None or 0 not in refs:
        checks["timedOutputsCorrect"] = integrity.result(integrity.SKIPPED, "no timed call was audited")
    elif not rounds_passed:
        checks["timedOutputsCorrect"] = integrity.result(integrity.SKIPPED, "the correctness rounds did not pass")
    else:
        audited = correctness.compare_round(
            0, context.names, audit, refs[0], shapes=context.shapes, dtypes=context.dtypes, tolerance=context.tolerance
        )
        if audited.status == "passed":
            checks["timedOutputsCorrect"] = integrity.result(integrity.PASSED)
        else:
            checks["timedOutputsCorrect"] = integrity.result(
                integrity.FAILED, f"a timed call returned wrong outputs: {audited.detail}"
            )
    # not faster than physics allows
    if context.floor_ns is None:
        checks["aboveFloor"] = integrity.result(integrity.SKIPPED, context.floor_text or "no floor for this device")
    elif primary_ns is None:
        checks["aboveFloor"] = integrity.result(integrity.SKIPPED, "no timing")
    elif primary_ns < context.floor_ns:
        checks["aboveFloor"] = integrity.result(
            integrity.FAILED, f"{primary_ns} ns is below the floor of {context.floor_ns:.0f} ns ({context.floor_text})"
        )
    else:
        checks["aboveFloor"] = integrity.result(
            integrity.PASSED, f"floor {context.floor_ns:.0f} ns ({context.floor_text})"
        )
    return checks


def evaluate(
    outcome: Outcome,
    context: WorkloadContext,
    refs: dict[int, list[Any]] | None,
    statistic: str,
    rounds_count: int,
) -> dict[str, Any]:
    """The BenchmarkRun spec members (without digests) an outcome earns."""
    if outcome.kind == TIMEOUT:
        return {"status": "timeout", "statusDetail": outcome.detail or "timeout"}
    if outcome.kind == FAILED:
        status = outcome.payload.get("status", "runtime_error")
        return {"status": status, "statusDetail": outcome.detail or status}
    if outcome.kind == CRASHED:
        return {"status": "runtime_error", "statusDetail": outcome.detail or "the worker died"}
    assert outcome.kind == RESULT
    assert refs is not None
    result: dict[str, Any] = outcome.payload
    members: dict[str, Any] = {}
    compared = []
    shape_problem = None
    for offset in context.round_offsets:
        entry = result["rounds"].get(offset, {})
        if entry.get("outputs") is None:
            shape_problem = entry.get("error") or "no outputs"
            continue
        compared.append(
            correctness.compare_round(
                offset,
                context.names,
                entry["outputs"],
                refs[offset],
                shapes=context.shapes,
                dtypes=context.dtypes,
                tolerance=context.tolerance,
            )
        )
    timing_data = result["timing"]
    samples = [int(value) for value in timing_data["samples"]]
    primary_ns = None
    if samples:
        stats = summarize(samples)
        primary_ns = stats[statistic]
        timing: dict[str, Any] = {"latencyNs": stats, "samples": samples, "primaryStatistic": statistic}
        if timing_data.get("enqueued_ahead") is not None:
            timing["enqueuedAhead"] = int(timing_data["enqueued_ahead"])
        if timing_data.get("device_spin_ns") is not None:
            timing["deviceSpinNs"] = int(timing_data["device_spin_ns"])
        members["timing"] = timing
    checks = integrity_checks(result, context, refs, compared, primary_ns)
    members["integrity"] = checks
    worst = correctness.worst_round(compared) if compared else None
    record_correctness: dict[str, Any] = {"comparator": correctness.COMPARATOR, "rounds": rounds_count}
    if worst is not None:
        for key, value in (
            ("maximumAbsoluteError", worst.maximum_absolute_error),
            ("maximumRelativeError", worst.maximum_relative_error),
            ("matchedRatio", worst.matched_ratio),
        ):
            if value is not None and math.isfinite(value):
                record_correctness[key] = float(value)
    members["correctness"] = record_correctness
    failed = sorted(name for name, check in checks.items() if check["result"] == integrity.FAILED)
    if shape_problem is not None:
        members["status"], members["statusDetail"] = "incorrect_shape", shape_problem
    elif worst is not None and worst.status in ("incorrect_shape", "incorrect_dtype"):
        members["status"], members["statusDetail"] = worst.status, worst.detail
    elif failed:
        members["status"] = "reward_hack"
        members["statusDetail"] = "; ".join(f"{name}: {checks[name].get('detail', 'failed')}" for name in failed)[:2000]
    elif worst is not None and worst.status == "incorrect_numerical":
        members["status"], members["statusDetail"] = "incorrect_numerical", worst.detail
    else:
        members["status"] = "passed"
    return members


# --------------------------------------------------------------------------- the session
