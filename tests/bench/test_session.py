"""Options and devices: what cannot work is a usage or environment error."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from kictl.bench.judge import loop as loop_module
from kictl.bench.judge import session as session_module
from kictl.bench.judge.options import GPU_COUNT_BUDGET_S, fixed_count_budget, warmup_budget
from kictl.bench.judge.session import BenchOptions, BenchReport, check_options, resolve_device, run_bench
from kictl.errors import EnvError, UsageError
from kictl.store.registry import Registry
from tests.bench.conftest import CHEATS, IMPLEMENTATIONS, cuda_available
from tests.bench.fakes import Behaviour, FakeWorker


def test_options_that_cannot_work_are_usage_errors() -> None:
    assert check_options(BenchOptions(), "cpu") == (1, None, 1)  # adaptive on the CPU
    assert check_options(BenchOptions(iterations=5), "cpu") == (1, 5, 1)
    assert check_options(BenchOptions(warmup=0, iterations=7), "cuda:0") == (0, 7, 3)
    with pytest.raises(UsageError, match="--cuda-graph needs a CUDA device"):
        check_options(BenchOptions(cuda_graph=True), "cpu")
    with pytest.raises(UsageError, match="cannot be combined"):
        check_options(BenchOptions(cuda_graph=True, time_setup=True), "cuda:0")
    with pytest.raises(UsageError, match="--rounds must be >= 1"):
        check_options(BenchOptions(rounds=0), "cpu")
    with pytest.raises(UsageError, match="--statistic"):
        check_options(BenchOptions(statistic="mode"), "cpu")
    with pytest.raises(UsageError, match="--threads"):
        check_options(BenchOptions(threads=0), "cpu")
    with pytest.raises(UsageError, match="--target-error"):
        check_options(BenchOptions(target_error=1.5), "cpu")
    with pytest.raises(UsageError, match="expected auto, cpu, cuda or cuda:N"):
        resolve_device("tpu")
    assert resolve_device("cpu") == "cpu"


@pytest.mark.skipif(cuda_available(), reason="checks the machine without a GPU")
def test_asking_for_a_gpu_without_one_is_an_environment_error() -> None:
    with pytest.raises(EnvError, match="no CUDA GPU is available"):
        resolve_device("cuda")
    assert resolve_device("auto") == "cpu"


# --------------------------------------------------------------------------- sessions with fake workers

RMSNORM = "rmsnorm_h4096"
HONEST_IMPLS = (IMPLEMENTATIONS / RMSNORM / "reference", IMPLEMENTATIONS / RMSNORM / "torch_rmsnorm")
HOSTILE_FILE = CHEATS / "rmsnorm_wrong_values.py"  # its code never runs here: the fake worker plays it


def _session(
    registry: Registry, hostile: Behaviour | None, reference: Behaviour | None = None, **options: Any
) -> tuple[BenchReport, dict[str, Behaviour]]:
    behaviours = {"reference": reference or Behaviour(), "impl0": Behaviour(), "impl1": Behaviour()}
    impls = [str(path) for path in HONEST_IMPLS]
    if hostile is not None:
        behaviours["impl2"] = hostile
        impls.append(str(HOSTILE_FILE))
    settings = {"device": "cpu", "workloads": ("b1",), "rounds": 2, "warmup": 1, "iterations": 6, **options}
    report = run_bench(
        registry,
        RMSNORM,
        impls,
        BenchOptions(**settings),
        worker_factory=lambda label: FakeWorker(label, behaviours[label]),
    )
    return report, behaviours


def _statuses(report: BenchReport) -> dict[str, tuple[str, str | None]]:
    return {run.implementation.rsplit("_", 1)[0]: (run.status, run.detail) for run in report.runs}


@pytest.mark.parametrize(
    ("behaviour", "status", "words"),
    [
        (Behaviour(at="load", how="compile_error"), "compile_error", "fake compile_error at load"),
        (Behaviour(at="check", how="runtime_error"), "runtime_error", "fake runtime_error at check"),
        (Behaviour(at="call", how="crashed"), "runtime_error", "SIGSEGV"),
        (Behaviour(at="arm", how="timeout"), "timeout", "no answer within"),
        (Behaviour(at="call", how="protocol"), "reward_hack", "wireIntact: the worker broke the wire protocol"),
        (Behaviour(at="finish", how="raise"), "runtime_error", "kictl could not run this implementation"),
        (Behaviour(compute=lambda x, w: torch.zeros_like(x)), "reward_hack", "outputsFresh"),
        (Behaviour(sample_ns=10**9), "reward_hack", "samplesConsistent"),
    ],
)
@pytest.mark.parametrize("overlap", [False, True], ids=["one-at-a-time", "overlapped"])
def test_one_hostile_run_never_costs_the_others_their_records(
    shared_registry: Registry,
    behaviour: Behaviour,
    status: str,
    words: str,
    overlap: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # overlapped: the implementations' correctness rounds and setup() in threads, as on a GPU
    monkeypatch.setattr(session_module, "OVERLAP_PREPARE_ON_CPU", overlap)
    behaviour.requests.clear()
    report, _ = _session(shared_registry, behaviour)
    found = _statuses(report)
    assert found["reference"] == ("passed", None)
    assert found["torch_rmsnorm"] == ("passed", None)
    assert found["rmsnorm_wrong_values"][0] == status, found
    assert words in (found["rmsnorm_wrong_values"][1] or ""), found
    assert all(run.run is not None for run in report.runs)
    assert not report.skipped


def test_reference_outputs_come_from_kictls_reference_worker_only(shared_registry: Registry) -> None:
    """The implementation that is the reference's text is benchmarked, but its outputs are never the reference."""
    report, behaviours = _session(shared_registry, None)
    assert behaviours["reference"].requests[:2] == ["load", "reference"]
    assert "reference" not in behaviours["impl0"].requests
    assert all(run.status == "passed" for run in report.runs)
    # an implementation whose outputs are wrong fails even when it claims to be the reference's text
    wrong = Behaviour(compute=lambda x, w: x)
    behaviours = {"reference": Behaviour(), "impl0": wrong, "impl1": Behaviour()}
    report = run_bench(
        shared_registry,
        RMSNORM,
        [str(path) for path in HONEST_IMPLS],
        BenchOptions(device="cpu", workloads=("b1",), rounds=1, warmup=0, iterations=2),
        worker_factory=lambda label: FakeWorker(label, behaviours[label]),
    )
    assert _statuses(report)["reference"][0] != "passed"
    assert _statuses(report)["torch_rmsnorm"][0] == "passed"


def test_the_reference_outputs_are_shared_out_among_the_reference_workers(
    shared_registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several reference workers (the GPU's way): each imports the reference once and makes a share of the
    outputs, the runs are judged as with one; one of them failing skips the workload, as one reference would."""
    monkeypatch.setattr(session_module, "REFERENCE_WORKERS_ON_CPU", 3)
    pool = ("reference", "reference2", "reference3")
    behaviours = {label: Behaviour() for label in (*pool, "impl0", "impl1")}
    options = BenchOptions(device="cpu", workloads=("b1", "b7"), rounds=3, warmup=0, iterations=12)

    def session() -> BenchReport:
        return run_bench(
            shared_registry,
            RMSNORM,
            [str(path) for path in HONEST_IMPLS],
            options,
            worker_factory=lambda label: FakeWorker(label, behaviours[label]),
        )

    report = session()
    assert [run.status for run in report.runs] == ["passed"] * 4
    audited = sum(run.run.raw["spec"]["timing"]["audited"] for run in report.runs if run.run)
    made = [behaviours[label].requests.count("reference") for label in pool]
    assert all(count > 0 for count in made), made
    assert sum(made) >= 2 * 3 + audited // 2  # the rounds of both workloads, and the audits (some shared)
    assert all(behaviours[label].requests.count("load") == 1 for label in pool)
    behaviours["reference3"] = Behaviour(at="reference", how="runtime_error")
    report = session()
    assert report.runs == []
    assert [why for _, why in report.skipped] == [
        "the definition's reference failed (runtime_error): fake runtime_error at reference"
    ] * 2


def test_the_reference_workers_can_be_set_and_a_bad_count_is_a_usage_error(
    shared_registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kictl.bench.judge.session import reference_pool_size

    assert reference_pool_size("cpu") == 1
    monkeypatch.setenv("KICTL_REFERENCE_WORKERS", "2")
    assert reference_pool_size("cpu") == reference_pool_size("cuda:0") == 2
    behaviours = {label: Behaviour() for label in ("reference", "reference2", "impl0")}
    report = run_bench(
        shared_registry,
        RMSNORM,
        [str(HONEST_IMPLS[1])],
        BenchOptions(device="cpu", workloads=("b1",), rounds=2, warmup=0, iterations=4),
        worker_factory=lambda label: FakeWorker(label, behaviours[label]),
    )
    assert [run.status for run in report.runs] == ["passed"]
    assert behaviours["reference2"].requests.count("reference") >= 1
    for bad in ("0", "many", "-1", "65"):
        monkeypatch.setenv("KICTL_REFERENCE_WORKERS", bad)
        with pytest.raises(UsageError, match="KICTL_REFERENCE_WORKERS"):
            run_bench(
                shared_registry,
                RMSNORM,
                [str(HONEST_IMPLS[1])],
                BenchOptions(device="cpu", workloads=("b1",)),
                worker_factory=lambda label: FakeWorker(label, Behaviour()),
            )


OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB. GPU 0 has a total capacity of "
    "79.18 GiB of which 964.69 MiB is free."
)


def _pooled(
    registry: Registry, monkeypatch: pytest.MonkeyPatch, **behaving: Behaviour
) -> tuple[BenchReport, dict[str, Behaviour], dict[str, FakeWorker]]:
    """A session of the reference and torch_rmsnorm with two reference workers (as on a GPU), on two workloads."""
    monkeypatch.setenv("KICTL_REFERENCE_WORKERS", "2")
    behaviours = {label: behaving.get(label, Behaviour()) for label in ("reference", "reference2", "impl0", "impl1")}
    workers: dict[str, FakeWorker] = {}

    def make(label: str) -> FakeWorker:
        workers[label] = FakeWorker(label, behaviours[label])
        return workers[label]

    report = run_bench(
        registry,
        RMSNORM,
        [str(path) for path in HONEST_IMPLS],
        BenchOptions(device="cpu", workloads=("b1", "b7"), rounds=2, warmup=0, iterations=4),
        worker_factory=make,
    )
    return report, behaviours, workers


@pytest.mark.parametrize("where", ["impl1", "reference", "reference2"])
def test_out_of_memory_beside_several_reference_workers_is_judged_again_with_one(
    shared_registry: Registry, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Stop 60's H100 call: an FP8 MoE's reference took a 6 GiB temporary in each of kictl's four reference
    workers, and the honest torch implementation beside them ran out of memory (runtime_error) on every workload,
    as did the reference. The memory kictl's own workers hold must condemn nothing and skip nothing."""
    at = "check" if where.startswith("impl") else "reference"
    report, _, workers = _pooled(shared_registry, monkeypatch, **{where: Behaviour(at=at, detail=OOM, times=1)})
    assert sorted((run.workload, run.status) for run in report.runs) == [("b1", "passed")] * 2 + [("b7", "passed")] * 2
    assert not report.skipped
    assert any("ran out of GPU memory with 2 reference workers" in warning for warning in report.warnings)
    # every worker started again for the second attempt; the second reference worker not again, for b1 nor b7
    assert workers["impl0"].starts == workers["impl1"].starts == workers["reference"].starts == 2
    assert workers["reference2"].starts == 1
    assert not workers["reference2"].alive


def test_out_of_memory_is_judged_again_once_and_never_with_one_reference_worker(
    shared_registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the second attempt's failure stands, and it is the session's last retry: b7's failure stands at once
    report, _, workers = _pooled(shared_registry, monkeypatch, impl1=Behaviour(at="check", detail=OOM))
    assert workers["impl0"].starts == 2  # b1 judged twice, b7 once
    statuses = {(run.workload, run.implementation.rsplit("_", 1)[0]): run.status for run in report.runs}
    assert statuses == {
        ("b1", "reference"): "passed",
        ("b1", "torch_rmsnorm"): "runtime_error",
        ("b7", "reference"): "passed",
        ("b7", "torch_rmsnorm"): "runtime_error",
    }
    assert (next(run.detail for run in report.runs if run.status != "passed") or "").endswith("964.69 MiB is free.")
    assert len([warning for warning in report.warnings if "ran out of GPU memory" in warning]) == 1
    # another failure than an allocation's is not judged again
    other, _, again = _pooled(shared_registry, monkeypatch, impl1=Behaviour(at="check", times=1))
    assert [run.status for run in other.runs if run.workload == "b1"].count("runtime_error") == 1
    assert again["impl0"].starts == 1
    # nor with the one reference worker a CPU session has
    monkeypatch.delenv("KICTL_REFERENCE_WORKERS")
    single, _ = _session(shared_registry, None, reference=Behaviour(at="reference", detail=OOM, times=1))
    assert single.runs == []
    assert single.skipped == [("b1", f"the definition's reference failed (runtime_error): {OOM}")]


def test_a_failing_reference_skips_the_workload_and_nothing_else(shared_registry: Registry) -> None:
    report, _ = _session(shared_registry, None, reference=Behaviour(at="reference", how="runtime_error"))
    assert report.runs == []
    assert report.skipped == [
        ("b1", "the definition's reference failed (runtime_error): fake runtime_error at reference")
    ]


def test_the_secret_is_recorded_and_audits_are_drawn_after_the_calls(shared_registry: Registry) -> None:
    first, behaviours = _session(shared_registry, None)
    second, _ = _session(shared_registry, None)
    secrets_seen = {run.run.raw["spec"]["inputSecret"] for run in [*first.runs, *second.runs] if run.run}
    assert len(secrets_seen) == 2  # one per session, fresh each time
    timing = first.runs[0].run.raw["spec"]["timing"] if first.runs[0].run else {}
    assert timing["audited"] >= 2
    assert timing["stopReason"] == "fixed count of 6 timed calls"
    requests = behaviours["impl1"].requests
    assert requests.count("call") == 7  # one warm-up, six timed
    assert requests.count("stage") == requests.count("call")  # every call's inputs staged by a request of their own
    assert requests.index("audit") > requests.index("call")


def test_adaptive_repetition_stops_at_the_target(shared_registry: Registry) -> None:
    report, _ = _session(shared_registry, None, iterations=None, target_error=0.05)
    timing = report.runs[0].run.raw["spec"]["timing"] if report.runs[0].run else {}
    # the figures are the parent's clock around each call (a fake worker's answers take microseconds)
    assert re.match(r"median.s relative error [0-9.e-]+ <= target 0.05", timing["stopReason"]), timing
    assert len(timing["samples"]) >= 10
    (protocol,) = [r for r in report.records if r.kind == "BenchmarkProtocol"]
    measurement = protocol.raw["spec"]["measurement"]
    assert measurement["targetRelativeError"] == 0.05
    assert measurement["isolation"].startswith("none: --no-sandbox")


def _all_three(registry: Registry, behaviours: dict[str, Behaviour], **options: Any) -> Any:
    """Both honest implementations and the reference on ``b1`` on the CPU, one correctness round, fake workers."""
    return run_bench(
        registry,
        RMSNORM,
        [str(path) for path in HONEST_IMPLS],
        BenchOptions(device="cpu", workloads=("b1",), rounds=1, **options),
        worker_factory=lambda label: FakeWorker(label, behaviours[label]),
    )


def test_an_adaptive_count_spends_its_budget_on_the_whole_call_not_the_request_alone(shared_registry: Registry) -> None:
    """The CPU's adaptive count stops when the run's calls, with the parent's own work for each (here a slow
    audit), have taken the budget: counting the requests alone, these microsecond calls would run to the
    maximum count while each audit took 30 ms."""
    slow_audits = {label: Behaviour(delays={"audit": 0.03}) for label in ("reference", "impl0", "impl1")}
    report = _all_three(shared_registry, slow_audits, warmup=0, target_error=1e-9, time_budget_s=0.15)
    for run in report.runs:
        timing = run.run.raw["spec"]["timing"] if run.run else {}
        assert timing["stopReason"] == "time budget of 0.15 s spent", timing
        # the calls themselves took a small part of it (counting them alone, they would have taken all of it)
        assert sum(timing["samples"]) < 0.15e9 / 2, sum(timing["samples"])
        # at least the three audited first calls (90 ms), and far fewer than the maximum
        assert 3 <= len(timing["samples"]) < 1000, len(timing["samples"])


def test_a_fixed_count_stops_when_its_time_budget_is_spent(shared_registry: Registry) -> None:
    """A count capped by --time-budget (the GPU's default 100x3 is, at 1 s) stops early, after 20 calls at least."""
    slow = {label: Behaviour(delays={"call": 0.004}) for label in ("reference", "impl0", "impl1")}
    report = _all_three(shared_registry, slow, warmup=0, iterations=100, time_budget_s=0.05)
    for run in report.runs:
        timing = run.run.raw["spec"]["timing"] if run.run else {}
        assert timing["stopReason"] == "time budget of 0.05 s spent after 20 of 100 timed calls", timing
        assert len(timing["samples"]) == 20
    (protocol,) = [r for r in report.records if r.kind == "BenchmarkProtocol"]
    measurement = protocol.raw["spec"]["measurement"]
    assert (measurement["iterations"], measurement["timeBudgetS"]) == (100, 0.05)
    assert "100x1 (or 0.05 s)" in protocol.raw["metadata"]["title"]


def test_a_budgeted_warm_up_ends_early_for_slow_calls_and_the_records_say_so(shared_registry: Registry) -> None:
    """Where a time budget caps the fixed count, it caps the warm-up: counted from the first call's end, then one
    more call settles them; a fast implementation makes the whole count."""
    behaviours = {
        "reference": Behaviour(),
        "impl0": Behaviour(delays={"call": 0.03}),  # 30 ms a call: the budget is spent after the third
        "impl1": Behaviour(),
    }
    report = _all_three(shared_registry, behaviours, warmup=10, iterations=20, time_budget_s=0.05)
    slow, fast = (run.run.raw["spec"]["timing"] if run.run else {} for run in report.runs)
    assert slow["warmupCalls"] == 4
    assert behaviours["impl0"].requests.count("call") == 4 + 20
    assert "warmupCalls" not in fast
    assert behaviours["impl1"].requests.count("call") == 10 + 20
    (protocol,) = [r for r in report.records if r.kind == "BenchmarkProtocol"]
    assert protocol.raw["spec"]["measurement"]["warmupTimeBudgetS"] == 0.05
    assert "after 10 warm-up (or 0.05 s after the first)" in protocol.raw["metadata"]["title"]
    assert warmup_budget(BenchOptions(), "cuda:0", 100) == GPU_COUNT_BUDGET_S
    assert warmup_budget(BenchOptions(iterations=100), "cuda:0", 100) is None  # an explicit count is exact
    assert warmup_budget(BenchOptions(), "cpu", None) is None  # the CPU's adaptive count: its warm-up is exact


def test_the_gpus_default_count_is_capped_and_an_explicit_one_is_exact() -> None:
    assert fixed_count_budget(BenchOptions(), "cuda:0") == GPU_COUNT_BUDGET_S == 0.3
    assert fixed_count_budget(BenchOptions(iterations=100), "cuda:0") is None
    assert fixed_count_budget(BenchOptions(iterations=100, time_budget_s=5.0), "cuda:0") == 5.0
    assert fixed_count_budget(BenchOptions(), "cpu") is None  # the CPU's default count is adaptive
    assert fixed_count_budget(BenchOptions(iterations=10, time_budget_s=1.0), "cpu") == 1.0


def test_preparation_overlaps_and_the_warm_up_does_not(
    shared_registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Imports, correctness rounds and setup() of several implementations overlap with each other and with the
    reference's outputs; the warm-up calls (which set each timer's device spin) run one implementation at a time."""
    monkeypatch.setattr(session_module, "OVERLAP_PREPARE_ON_CPU", True)
    slow = {"load": 0.3, "check": 0.15, "reference": 0.15}
    behaviours = {label: Behaviour(delays=dict(slow)) for label in ("reference", "impl0", "impl1")}
    began = time.perf_counter()
    report = run_bench(
        shared_registry,
        RMSNORM,
        [str(path) for path in HONEST_IMPLS],
        BenchOptions(device="cpu", workloads=("b1",), rounds=2, warmup=1, iterations=2),
        worker_factory=lambda label: FakeWorker(label, behaviours[label]),
    )
    wall = time.perf_counter() - began
    assert [run.status for run in report.runs] == ["passed", "passed"]
    # one after another: 3 imports (0.9 s) + 2 x 2 checks (0.6 s) + the reference's 2 rounds and audits (>= 0.6 s)
    assert wall < 1.6, report.phases
    assert report.phases["prepare"] < 0.9, report.phases
    for label in ("impl0", "impl1"):
        requests = behaviours[label].requests
        assert requests[: requests.index("load")] == ["ping"] * 15  # the wire measured before the import
        assert requests.index("arm") < requests.index("stage")


@pytest.mark.slow
def test_overlapped_preparation_with_real_workers(shared_registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU's way through a workload (correctness and setup() of every implementation at once, the reference's
    outputs shared out among two reference workers), with real sandboxed workers on the CPU: a crashing
    implementation is its own failure, restarted for the next workload."""
    from tests.bench.conftest import UNSANDBOXED

    monkeypatch.setattr(session_module, "OVERLAP_PREPARE_ON_CPU", True)
    monkeypatch.setattr(session_module, "REFERENCE_WORKERS_ON_CPU", 2)
    impls = [*(str(path) for path in HONEST_IMPLS), str(HOSTILE_FILE), str(CHEATS / "rmsnorm_crashes.py")]
    said: list[str] = []
    report = run_bench(
        shared_registry,
        RMSNORM,
        impls,
        BenchOptions(
            device="cpu", workloads=("b1", "b7"), warmup=2, iterations=10, rounds=2, no_sandbox=bool(UNSANDBOXED)
        ),
        progress=said.append,
    )
    for workload in ("b1", "b7"):  # both reference workers made audited calls' outputs
        shares = [line for line in said if line.startswith(f"{workload}: reference outputs for ")]
        assert {line.rsplit("(", 1)[1] for line in shares} == {"reference)", "reference2)"}, shares
    found = {(run.implementation.rsplit("_", 1)[0], run.workload): run.status for run in report.runs}
    for workload in ("b1", "b7"):
        assert found[("reference", workload)] == "passed"
        assert found[("torch_rmsnorm", workload)] == "passed"
        assert found[("rmsnorm_wrong_values", workload)] == "incorrect_numerical"
        assert found[("rmsnorm_crashes", workload)] == "runtime_error"
    assert {"start", "prepare", "timed", "records"} <= set(report.phases)


def _batched_session(registry: Registry, behaviours: dict[str, Behaviour], iterations: int) -> BenchReport:
    """The honest implementations on one workload, 3 warm-up calls and ``iterations`` timed calls, with fakes."""
    return run_bench(
        registry,
        RMSNORM,
        [str(path) for path in HONEST_IMPLS],
        BenchOptions(device="cpu", workloads=("b1",), rounds=1, warmup=3, iterations=iterations),
        worker_factory=lambda label: FakeWorker(label, behaviours[label]),
    )


def test_samples_settled_in_batches_land_on_their_own_calls(shared_registry: Registry) -> None:
    """A timer that settles its calls in batches (CUPTI) sends a call's sample with a later answer: each one is
    filed under the call it belongs to, and the parent asks for them every ``SETTLE_EVERY`` calls."""
    from kictl.bench.judge.loop import SETTLE_EVERY

    batched = {label: Behaviour(batched=True) for label in ("reference", "impl0", "impl1")}
    iterations = SETTLE_EVERY + 5
    report = _batched_session(shared_registry, batched, iterations)
    for run, label in zip(report.runs, ("impl0", "impl1"), strict=True):
        assert run.status == "passed", run.detail
        timing = run.run.raw["spec"]["timing"] if run.run else {}
        # on the CPU each figure is the parent's clock around its call (the worker's sample a cross-check)
        assert len(timing["samples"]) == iterations
        assert all(sample > 0 for sample in timing["samples"])
        assert sorted(batched[label].settled) == list(range(1, 4 + iterations))


def test_the_cupti_timers_cross_check_figures_are_recorded_with_each_run(
    shared_registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside each CUPTI sample (the span of the call's device work) the worker sends the events figure of the
    same call, its count of kernels, copies and memsets, and the time they cover (the span less their gaps): the
    run records their medians (``eventsMedianNs``, ``kernelsPerCall``, ``busyMedianNs``)."""
    monkeypatch.setattr(loop_module, "PARENT_CLOCK_ON_CPU", False)  # the fake's figures are the ones under test
    iterations = 21
    behaviours = {
        label: Behaviour(batched=True, device_figures=(2_500, 2, -300)) for label in ("reference", "impl0", "impl1")
    }
    report = _batched_session(shared_registry, behaviours, iterations)
    for run in report.runs:
        assert run.status == "passed", run.detail
        timing = run.run.raw["spec"]["timing"] if run.run else {}
        middle = 1000 + 4 + iterations // 2  # the timed calls' samples are 1004 ... 1024
        assert timing["latencyNs"]["median"] == middle
        assert (timing["eventsMedianNs"], timing["kernelsPerCall"], timing["busyMedianNs"]) == (
            middle + 2_500,
            2,
            middle - 300,
        )


@pytest.mark.parametrize("busy", [300, -5_000])  # beyond the span; less than nothing
def test_a_busy_time_outside_its_span_is_a_forged_sample(
    shared_registry: Registry, busy: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop_module, "PARENT_CLOCK_ON_CPU", False)  # the fake's figures are the ones under test
    report, _ = _session(shared_registry, Behaviour(batched=True, device_figures=(0, 1, busy)), iterations=20)
    found = _statuses(report)
    assert found["rmsnorm_wrong_values"][0] == "reward_hack", found
    detail = found["rmsnorm_wrong_values"][1] or ""
    assert "samplesConsistent" in detail
    assert "busy time" in detail
    assert found["torch_rmsnorm"] == ("passed", None)


@pytest.mark.parametrize(
    ("forge", "words"),
    [
        ("unknown", "a sample for call"),
        ("twice", "a sample for call"),
        ("never", "got no sample"),
        ("warmup", "got no sample in the last warm-up call's answer"),
    ],
)
def test_a_worker_that_forges_the_settled_samples_breaks_the_wire(
    shared_registry: Registry, forge: str, words: str
) -> None:
    report, _ = _session(shared_registry, Behaviour(batched=True, forge=forge), warmup=2, iterations=20)
    found = _statuses(report)
    assert found["rmsnorm_wrong_values"][0] == "reward_hack", found
    detail = found["rmsnorm_wrong_values"][1] or ""
    assert "wireIntact" in detail
    assert words in detail
    assert found["torch_rmsnorm"] == ("passed", None)


def test_timed_calls_in_blocks_run_each_implementation_to_its_end_before_the_next(
    shared_registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a GPU (here the CPU with the GPU's rule) each implementation's warm-up and timed calls run as one
    block: no other implementation's call runs between two of its calls, so its figure does not depend on
    which implementations share the session."""
    monkeypatch.setattr(session_module, "TIMED_IN_BLOCKS_ON_CPU", True)
    order: list[str] = []

    class Logged(FakeWorker):
        def request(self, message: Any, timeout: float, expect: frozenset[str]) -> Any:
            if message.TYPE == "call":
                order.append(self.label)
            return super().request(message, timeout, expect)

    behaviours = {label: Behaviour() for label in ("reference", "impl0", "impl1")}
    report = run_bench(
        shared_registry,
        RMSNORM,
        [str(path) for path in HONEST_IMPLS],
        BenchOptions(device="cpu", workloads=("b1", "b7"), rounds=1, warmup=2, iterations=5),
        worker_factory=lambda label: Logged(label, behaviours[label]),
    )
    assert [run.status for run in report.runs] == ["passed"] * 4
    # per workload: impl0's 2 warm-up and 5 timed calls, then impl1's
    assert order == (["impl0"] * 7 + ["impl1"] * 7) * 2
    monkeypatch.setattr(session_module, "TIMED_IN_BLOCKS_ON_CPU", False)
    order.clear()
    run_bench(
        shared_registry,
        RMSNORM,
        [str(path) for path in HONEST_IMPLS],
        BenchOptions(device="cpu", workloads=("b1",), rounds=1, warmup=2, iterations=5),
        worker_factory=lambda label: Logged(label, behaviours[label]),
    )
    assert order == ["impl0"] * 2 + ["impl1"] * 2 + ["impl0", "impl1"] * 5  # on the CPU: taking turns


def test_large_outputs_come_back_through_the_shared_region(
    shared_registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real workers: rmsnorm b1024's 8 MiB outputs (the rounds', the audits', the reference's) reach the parent
    through each worker's shared region, copied out once; the run passes as it did through the pipe."""
    from kictl.bench import wire
    from tests.bench.conftest import UNSANDBOXED

    taken: list[int] = []
    original = wire.SharedRegion.take

    def take(region: wire.SharedRegion, offset: int, length: int) -> bytearray:
        taken.append(length)
        return original(region, offset, length)

    monkeypatch.setattr(wire.SharedRegion, "take", take)
    report = run_bench(
        shared_registry,
        RMSNORM,
        [str(path) for path in HONEST_IMPLS],
        BenchOptions(
            device="cpu", workloads=("b1024",), warmup=1, iterations=5, rounds=2, no_sandbox=bool(UNSANDBOXED)
        ),
    )
    assert [run.status for run in report.runs] == ["passed", "passed"], [run.detail for run in report.runs]
    assert len(taken) >= 2 * 2 + 2  # both implementations' rounds, the reference's rounds, the audits
    assert set(taken) == {1024 * 4096 * 2}


def test_a_worker_cannot_hold_the_session_past_its_runs_wall_time_cap(
    shared_registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every answer comes inside --timeout, yet the run ends as a timeout once it has taken its cap in all."""
    monkeypatch.setattr(loop_module, "RUN_WALL_S", 0.6)
    monkeypatch.setattr(loop_module, "RUN_WALL_TIMEOUTS", 0)
    report, _ = _session(shared_registry, Behaviour(delays={"call": 0.15}), iterations=40)
    found = _statuses(report)
    assert found["rmsnorm_wrong_values"][0] == "timeout", found
    assert "the run took more than 0.6 s in all" in (found["rmsnorm_wrong_values"][1] or "")


def test_a_workers_files_and_log_are_capped(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = (
        "import errno, signal\n"
        "from kictl.bench.worker import main as worker\n"
        "worker.MAX_FILE_BYTES = 4096\n"
        "worker._cap_files()\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"f = open({str(tmp_path / 'big')!r}, 'wb', buffering=0)\n"
        "f.write(b'x' * 4096)\n"
        "try:\n"
        "    f.write(b'x')\n"
        "except OSError as exc:\n"
        "    print(errno.errorcode[exc.errno])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout.strip() == "EFBIG", done.stderr
    assert (tmp_path / "big").stat().st_size == 4096


def test_a_real_worker_s_out_of_memory_is_judged_again_with_one_reference_worker(
    shared_registry: Registry, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The same with kictl's own worker processes: the failure's detail, as a worker reports torch's error, is
    what the session recognises, and the workers it stops for the second attempt start again."""
    monkeypatch.setenv("KICTL_REFERENCE_WORKERS", "2")
    hungry = tmp_path / "rmsnorm_out_of_memory.py"
    hungry.write_text(
        "import torch\n\n\n"
        "def run(hidden_states, weight):\n"
        "    raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 6.00 GiB (a stand-in on the CPU)')\n"
    )
    said: list[str] = []
    report = run_bench(
        shared_registry,
        RMSNORM,
        [str(HONEST_IMPLS[1]), str(hungry)],
        BenchOptions(device="cpu", workloads=("b1",), rounds=1, warmup=0, iterations=3),
        progress=said.append,
    )
    statuses = {run.implementation.rsplit("_", 1)[0]: (run.status, run.detail or "") for run in report.runs}
    assert statuses["torch_rmsnorm"] == ("passed", "")
    status, detail = statuses["rmsnorm_out_of_memory"]
    assert status == "runtime_error"
    assert "OutOfMemoryError: CUDA out of memory" in detail
    assert [line for line in said if "again from the start with one" in line], said
    assert sum("worker impl0 (torch_rmsnorm" in line and "starting" in line for line in said) == 2
