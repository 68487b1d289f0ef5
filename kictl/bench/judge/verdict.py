"""Judging what the parent gathered: correctness, integrity and the run's status (DESIGN §3, §7).

``evaluate`` turns one ``loop.RunEvidence`` into the members of a
BenchmarkRun spec: the worst correctness round, every integrity check
(``integrity.Check``, each recorded as passed, failed or skipped), the
timing statistics, and the status, by precedence: ``timeout`` /
``runtime_error`` / ``compile_error``, then ``incorrect_shape`` /
``incorrect_dtype``, then ``reward_hack`` (any failed integrity check), then
``incorrect_numerical``, else ``passed``.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kictl.bench.judge import audits as audit_findings
from kictl.bench.judge import correctness
from kictl.bench.judge.loop import RunEvidence, consistency_notes
from kictl.bench.wire.checks import FAILED, PASSED, SKIPPED, Check, poisoned_elements, result
from kictl.bench.worker.gpu_state import GpuReading, clocks_steady
from kictl.bench.worker.timing import summarize
from kictl.families import judges
from kictl.records import StoredRecord

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
#: Checks judged from the notes the worker and the parent made.
NOTED = (
    Check.INPUTS_UNCHANGED,
    Check.OUTPUTS_NOT_ALIAS_INPUTS,
    Check.PLAIN_TENSOR_OUTPUTS,
    Check.NO_THREADS_LEFT,
    Check.NO_PROCESSES_LEFT,
    Check.TIMER_NOT_PATCHED,
    Check.STREAM_ORDERED,
    Check.SAMPLES_CONSISTENT,
    Check.NO_WORK_OUTSIDE_CALLS,
    Check.WIRE_INTACT,
)


@dataclass
class WorkloadContext:
    """Everything about one workload that evaluation needs."""

    record: StoredRecord
    names: list[str]
    shapes: list[tuple[int, ...]]
    dtypes: list[str]
    tolerance: correctness.Tolerance
    round_labels: list[str]
    set_labels: list[str]
    synthesized: tuple[str, ...] = ()
    device: str = "cpu"
    floor_ns: float | None = None
    floor_text: str | None = None
    #: how many of ``names`` are the definition's outputs: the rest are the inputs its reference writes, compared
    #: as outputs are but neither poisoned nor digested (``None``: all are outputs)
    declared: int | None = None
    #: the inputs by name of the distribution judge's trials ("trials": they share one) or of the timed calls
    #: ("timed": every input set has the same generated inputs), made on demand
    judge_inputs: Callable[[str], dict[str, Any]] | None = None


def _reading_fields(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "sm_clock_mhz": item["smClockMhz"],
        "memory_clock_mhz": item["memoryClockMhz"],
        "temperature_c": item["temperatureC"],
        "power_mw": item["powerMilliwatts"],
        "reasons": tuple(item["throttleReasons"]),
    }


def audit_label(set_label: str, shift: int, perturb: int = 0) -> str:
    """The name of an audited call's inputs: an input set, its random values rolled by ``shift`` (and for a
    probe, a few of them swapped by ``perturb``)."""
    return f"{set_label}, rolled {shift}" + (f", swapped {perturb}" if perturb else "")


def _poisoned(context: WorkloadContext, labelled: list[tuple[str, list[Any]]], refs: dict[str, list[Any]]) -> list[str]:
    found = []
    for label, outputs in labelled:
        wants = refs.get(label, [None] * len(outputs))
        for name, tensor, want in zip(context.names[: context.declared], outputs, wants, strict=False):
            count = poisoned_elements(tensor, want)
            if count:
                found.append(f"{count} elements of {name} ({label}) were never written")
    return found


def _stale(digests: list[tuple[str, str, str]]) -> list[str]:
    """Pairs of calls on different inputs (``(label, outputs' digest, reference's digest)``) whose outputs are
    bit-identical while the reference's are not (``audits.digest``)."""
    stale = []
    for position, (label_a, digest_a, want_a) in enumerate(digests):
        for label_b, digest_b, want_b in digests[position + 1 :]:
            if label_a != label_b and digest_a == digest_b and want_a != want_b:
                stale.append(f"{label_a} and {label_b} gave identical outputs")
    return stale[:5]


def audit_finding(
    context: WorkloadContext, label: str, outputs: list[Any], reference: list[Any]
) -> audit_findings.AuditFinding:
    """An audited call's outputs judged against the reference's (``audits.judge``), its tensors no longer needed."""
    distribution = None
    if context.tolerance.judge == "distribution" and context.judge_inputs is not None:
        timed = context.judge_inputs("timed")
        if timed:

            def distribution(sample: Any) -> str | None:
                found = judges.judge_distribution(timed, [sample], limit=1.0)
                return found.detail if found.status != "passed" else None

    return audit_findings.judge(
        label,
        outputs,
        reference,
        names=context.names,
        shapes=context.shapes,
        dtypes=context.dtypes,
        tolerance=context.tolerance,
        distribution=distribution,
        declared=context.declared,
    )


def integrity_checks(
    evidence: RunEvidence,
    context: WorkloadContext,
    refs: dict[str, list[Any]],
    rounds: list[correctness.RoundComparison],
    primary_ns: int | None,
) -> dict[str, dict[str, str]]:
    """Every check of ``integrity.Check``, judged."""
    consistency_notes(evidence, context.device == "cpu", _CLOCK_TICKS)
    checks: dict[str, dict[str, str]] = {}
    for check in NOTED:
        lines = evidence.notes.get(check.value)
        if lines:
            checks[check.value] = result(FAILED, "; ".join(lines)[:1000])
        elif check is Check.STREAM_ORDERED and not context.device.startswith("cuda"):
            checks[check.value] = result(SKIPPED, "no CUDA streams on the CPU")
        elif check is Check.STREAM_ORDERED and evidence.stream_rule:
            checks[check.value] = result(PASSED, evidence.stream_rule)
        else:
            checks[check.value] = result(PASSED)
    calls = [(label, out) for label, out in evidence.rounds.items() if isinstance(out, list)]
    # every audited call's finding: judged as its outputs came (the session's ``audits.Pending``), else now
    findings: list[tuple[str, audit_findings.AuditFinding]] = []
    for index, chosen, shift, out in evidence.audits:
        key = audit_label(context.set_labels[chosen], shift, evidence.probes.get(index, 0))
        if isinstance(out, audit_findings.AuditFinding):
            findings.append((key, out))
        elif isinstance(out, list) and key in refs:
            findings.append((key, audit_finding(context, f"timed call {index}", out, refs[key])))
    audited = sum(1 for *_, out in evidence.audits if not isinstance(out, str))
    poisoned = _poisoned(context, calls, refs) + [line for _, found in findings for line in found.poisoned]
    checks[Check.OUTPUTS_FULLY_WRITTEN.value] = result(FAILED, "; ".join(poisoned)) if poisoned else result(PASSED)
    # outputs fresh: different inputs never gave bit-identical outputs (unless the references agree too)
    cut = context.declared
    digests = [(label, *audit_findings.digests(out[:cut], refs[label][:cut])) for label, out in calls if label in refs]
    seen: set[str] = set()
    for key, found in findings:
        if key not in seen:
            seen.add(key)
            digests.append((key, found.digest, found.reference_digest))
    stale = _stale(digests)
    fresh = digests
    samples = context.tolerance.judge == "distribution"
    if samples:  # a random process: references differ call to call; repeats are the distribution test's
        checks[Check.OUTPUTS_FRESH.value] = result(SKIPPED, "outputs are samples, judged by the distribution test")
    elif len(fresh) < 2:
        checks[Check.OUTPUTS_FRESH.value] = result(SKIPPED, "fewer than two different inputs were called")
    elif stale:
        checks[Check.OUTPUTS_FRESH.value] = result(FAILED, "; ".join(stale))
    else:
        checks[Check.OUTPUTS_FRESH.value] = result(PASSED)
    # timed calls, chosen at random after they returned, gave correct outputs for the values they got
    rounds_passed = bool(rounds) and all(r.status == "passed" for r in rounds)
    errors = [out for _, _, _, out in evidence.audits if isinstance(out, str)]
    wrong = [found.wrong for _, found in findings if found.wrong is not None]
    key = Check.TIMED_OUTPUTS_CORRECT.value
    if errors:
        checks[key] = result(FAILED, f"a timed call {errors[0]}")
    elif not evidence.audits:
        checks[key] = result(SKIPPED, "no timed call was audited")
    elif not rounds_passed:
        checks[key] = result(SKIPPED, "the correctness rounds did not pass")
    elif wrong:
        checks[key] = result(FAILED, f"{len(wrong)} of {audited} audited timed calls were wrong: {wrong[0]}"[:1000])
    else:
        checks[key] = result(PASSED, f"{audited} timed call(s) audited")
    # not faster than physics allows
    key = Check.ABOVE_FLOOR.value
    if context.floor_ns is None:
        checks[key] = result(SKIPPED, context.floor_text or "no floor for this device")
    elif primary_ns is None:
        checks[key] = result(SKIPPED, "no timing")
    elif primary_ns < context.floor_ns:
        checks[key] = result(
            FAILED, f"{primary_ns} ns is below the floor of {context.floor_ns:.0f} ns ({context.floor_text})"
        )
    else:
        checks[key] = result(PASSED, f"floor {context.floor_ns:.0f} ns ({context.floor_text})")
    return {check.value: checks[check.value] for check in Check}


def evaluate(
    evidence: RunEvidence,
    context: WorkloadContext,
    refs: dict[str, list[Any]],
    statistic: str,
    rounds_count: int,
) -> dict[str, Any]:
    """The BenchmarkRun spec members (without digests) the evidence earns."""
    if evidence.failure is not None and evidence.failure[0] != "reward_hack":
        status, detail = evidence.failure
        return {"status": status, "statusDetail": detail or status}
    members: dict[str, Any] = {}
    compared = []
    shape_problem = None
    for label in context.round_labels:
        outputs = evidence.rounds.get(label)
        if not isinstance(outputs, list):
            shape_problem = outputs or "no outputs"
            continue
        compared.append(
            correctness.compare_round(
                0,
                context.names,
                outputs,
                refs[label],
                shapes=context.shapes,
                dtypes=context.dtypes,
                tolerance=context.tolerance,
                declared=context.declared,
            )
        )
    if context.tolerance.judge == "distribution" and compared and context.judge_inputs is not None:
        compared.append(_distribution_round(evidence, context))
    primary_ns = None
    if evidence.samples:
        stats = summarize(evidence.samples)
        primary_ns = stats[statistic]
        timing: dict[str, Any] = {"latencyNs": stats, "samples": list(evidence.samples), "primaryStatistic": statistic}
        if evidence.enqueued_ahead is not None:
            timing["enqueuedAhead"] = evidence.enqueued_ahead
        if evidence.device_spin_ns is not None:
            timing["deviceSpinNs"] = evidence.device_spin_ns
        if evidence.relative_error is not None and math.isfinite(evidence.relative_error):
            timing["medianRelativeError"] = round(evidence.relative_error, 6)
        if evidence.stop_reason:
            timing["stopReason"] = evidence.stop_reason
        if evidence.warmup_calls is not None:
            timing["warmupCalls"] = evidence.warmup_calls
        timing["audited"] = len(evidence.audits)
        if evidence.cpus:
            timing["cpus"] = list(evidence.cpus)
        timing["parentWallNs"] = round(statistics.median(evidence.walls)) if evidence.walls else None
        if timing["parentWallNs"] is None:
            del timing["parentWallNs"]
        if evidence.events_ns:
            timing["eventsMedianNs"] = round(statistics.median(evidence.events_ns))
        if evidence.kernels:
            timing["kernelsPerCall"] = round(statistics.median(evidence.kernels))
        if evidence.busy_ns:
            timing["busyMedianNs"] = round(statistics.median(evidence.busy_ns))
        if evidence.clocks:
            readings = [GpuReading(**_reading_fields(item)) for item in evidence.clocks]
            steady, why = clocks_steady(readings)
            timing["clocks"] = list(evidence.clocks)
            timing["clocksSteady"] = steady
            if why:
                timing["clocksDetail"] = why
        with_load = _load_average()
        if with_load is not None:
            timing["loadAverage"] = with_load
        members["timing"] = timing
    checks = integrity_checks(evidence, context, refs, compared, primary_ns)
    members["integrity"] = checks
    worst = correctness.worst_round(compared) if compared else None
    record_correctness: dict[str, Any] = {"comparator": context.tolerance.comparator, "rounds": rounds_count}
    if worst is not None:
        for key, value in (
            ("maximumAbsoluteError", worst.maximum_absolute_error),
            ("maximumRelativeError", worst.maximum_relative_error),
            ("matchedRatio", worst.matched_ratio),
        ):
            if value is not None and math.isfinite(value):
                record_correctness[key] = float(value)
    members["correctness"] = record_correctness
    failed = sorted(name for name, check in checks.items() if check["result"] == FAILED)
    if evidence.failure is not None:  # the worker broke the wire: a reward hack, with what was seen before
        members["status"], members["statusDetail"] = evidence.failure
    elif shape_problem is not None:
        members["status"], members["statusDetail"] = "incorrect_shape", shape_problem
    elif worst is not None and worst.status in ("incorrect_shape", "incorrect_dtype"):
        members["status"], members["statusDetail"] = worst.status, worst.detail
    elif failed:
        members["status"] = "reward_hack"
        members["statusDetail"] = "; ".join(f"{name}: {checks[name].get('detail', 'failed')}" for name in failed)[:2000]
    elif worst is not None and worst.status == "incorrect_numerical":
        members["status"], members["statusDetail"] = "incorrect_numerical", worst.detail
    elif not evidence.samples:
        members["status"], members["statusDetail"] = "runtime_error", "no timed call was made"
    else:
        members["status"] = "passed"
    return members


def _distribution_round(evidence: RunEvidence, context: WorkloadContext) -> correctness.RoundComparison:
    """The distribution judge over every trial's samples of the first output (``kictl.families.judges``)."""
    assert context.judge_inputs is not None
    samples = [out[0] for label in context.round_labels if isinstance(out := evidence.rounds.get(label), list)]
    limit = context.tolerance.max_total_variation
    found = judges.judge_distribution(context.judge_inputs("trials"), samples, limit=limit)
    output = correctness.OutputComparison(
        context.names[0], found.status, found.detail, found.maximum_absolute_error, None, found.matched_ratio
    )
    return correctness.RoundComparison(offset=0, outputs=(output,))


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None
