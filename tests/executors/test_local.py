"""The local pool: real worker processes on the CPU, the same records as a plain bench, failures retried once."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from kictl.bench.judge.results import write_manifest
from kictl.bench.judge.session import BenchOptions, run_bench
from kictl.errors import EnvError, RecordError, UsageError
from kictl.executors import JobResult, run_bench_jobs
from kictl.executors.base import DeviceFailure, check_result
from kictl.executors.jobs import JobPlan, done_job_ids, plan_jobs
from kictl.executors.local import LocalPool, cpu_shares, parse_devices
from kictl.executors.seam import protocol_context
from kictl.records import StoredRecord
from kictl.store.registry import Registry
from tests.bench.conftest import cuda_available
from tests.conftest import RunCli, copy_bundled
from tests.executors.conftest import BOTH, CPU_FAST, RMSNORM

OPTIONS = BenchOptions(device="cpu", warmup=0, iterations=1, trials=1, rounds=1, workloads=("b1",))

pytestmark = pytest.mark.slow

#: What a CPU worker of this machine reports beside its environment.
CONTEXT = protocol_context("cpu")


def identity(records: list[StoredRecord]) -> dict[str, Any]:
    """What must not depend on the executor: the records other than runs, and what each run names."""
    runs = sorted(
        (
            r.raw["spec"]["definitionDigest"],
            r.raw["spec"]["workloadDigest"],
            r.raw["spec"]["implementationDigest"],
            r.raw["spec"]["protocolDigest"],
            r.raw["spec"]["environmentDigest"],
        )
        for r in records
        if r.kind == "BenchmarkRun"
    )
    others = sorted((r.kind, r.digest) for r in records if r.kind != "BenchmarkRun")
    return {"runs": runs, "others": others}


@pytest.fixture(scope="module")
def pooled(shared_registry: Registry, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, JobPlan]:
    """b1 with both implementations on a pool of two CPU workers, and the plan it ran."""
    work = tmp_path_factory.mktemp("pooled")
    report, outcome = run_bench_jobs(shared_registry, RMSNORM, BOTH, OPTIONS, devices="2", workdir=work / "a")
    plan = plan_jobs(shared_registry, RMSNORM, BOTH, CPU_FAST, workloads=("b1",), workdir=work / "b")
    return report, outcome, plan


def test_a_pool_gives_the_records_of_a_plain_bench(
    pooled: tuple[Any, Any, JobPlan], shared_registry: Registry, tmp_path: Path, cli: RunCli
) -> None:
    report, outcome, _ = pooled
    assert [(run.implementation.rsplit("_", 1)[0], run.workload, run.status) for run in report.runs] == [
        ("reference", "b1", "passed"),
        ("torch_rmsnorm", "b1", "passed"),
    ]
    assert report.runs[0].speedup == 1.0
    assert {result.worker for result in outcome.results} <= {"cpu#0", "cpu#1"}
    assert outcome.device_failures == []
    plain = run_bench(shared_registry, RMSNORM, BOTH, OPTIONS)
    assert identity(report.records) == identity(plain.records)
    registry = copy_bundled(tmp_path / "fresh")
    manifest = write_manifest(report, tmp_path / "out")
    added = cli("add", manifest.parent, "--registry", registry.root)
    assert added.exit_code == 0, added.output
    validated = cli("validate", "--registry", registry.root, "--json")
    assert validated.exit_code == 0, validated.output
    assert json.loads(validated.stdout)["counts"]["BenchmarkRun"] == 2


def test_records_that_are_not_the_jobs_are_refused(pooled: tuple[Any, Any, JobPlan]) -> None:
    _, outcome, plan = pooled
    first, second = sorted(outcome.results, key=lambda result: plan.jobs.index(result.job))
    env = next(r for r in first.records if r.kind == "ExecutionEnvironment").raw["spec"]
    raws = [record.raw for record in first.records]
    assert check_result(plan, first.job, raws, env, CONTEXT) == first.records
    with pytest.raises(RecordError, match="not a run of the job"):
        check_result(plan, second.job, raws, env, CONTEXT)
    without_run = [raw for raw in raws if raw["kind"] != "BenchmarkRun"]
    with pytest.raises(RecordError, match="expected one BenchmarkRun, got 0"):
        check_result(plan, first.job, without_run, env, CONTEXT)
    other_settings = plan_jobs_with(plan, iterations=7)
    with pytest.raises(
        RecordError, match=r"not the one the job's settings give \(.*measurement\.iterations: '1' != '7'"
    ):
        check_result(other_settings, first.job, raws, env, CONTEXT)
    elsewhere = {**env, "hardware": {**env["hardware"], "product": "Another CPU"}}
    with pytest.raises(RecordError, match="not the one the worker reported"):
        check_result(plan, first.job, raws, elsewhere, CONTEXT)
    stray = [*raws, next(r for r in second.records if r.kind == "Implementation").raw]
    with pytest.raises(RecordError, match="Implementation the job does not name"):
        check_result(plan, first.job, stray, env, CONTEXT)


def plan_jobs_with(plan: JobPlan, **changes: Any) -> JobPlan:
    settings = plan.settings.changed(**changes)
    return JobPlan(plan.definition, settings, plan.jobs, plan.records, plan.blobs, plan.reference_digests)


def test_done_jobs_are_skipped_for_their_environment_only(pooled: tuple[Any, Any, JobPlan], tmp_path: Path) -> None:
    report, _, plan = pooled
    registry = copy_bundled(tmp_path / "done")
    registry.add(report.records)
    env = next(r for r in report.records if r.kind == "ExecutionEnvironment").raw["spec"]
    assert done_job_ids(registry, plan, [env], CONTEXT) == {job.job_id for job in plan.jobs}
    elsewhere = {**env, "hardware": {**env["hardware"], "product": "Another CPU"}}
    assert done_job_ids(registry, plan, [env, elsewhere], CONTEXT) == set()
    assert done_job_ids(registry, plan_jobs_with(plan, iterations=3), [env], CONTEXT) == set()
    again, again_outcome = run_bench_jobs(registry, RMSNORM, BOTH, OPTIONS, skip_done=True, workdir=tmp_path / "w")
    assert again_outcome.already_done == 2
    assert again_outcome.results == []
    assert again.runs == []


class DyingPool(LocalPool):
    """A pool whose first worker is killed (SIGKILL, a real death) right after its first job reaches it."""

    killed: str | None = None

    def submit(self, slot: str, job: Any, payload: str) -> None:
        super().submit(slot, job, payload)
        if self.killed is None:
            self.killed = slot
            os.kill(self._workers[slot].process.pid, signal.SIGKILL)


def test_a_dead_worker_is_reported_and_its_job_retried_elsewhere_once(
    pooled: tuple[Any, Any, JobPlan],
) -> None:
    _, _, plan = pooled
    jobs = plan.jobs[:1]  # the reference on b1: one bench worker a try
    results: list[JobResult] = []
    failures: list[DeviceFailure] = []
    pool = DyingPool(["cpu", "cpu"])
    with pool:
        pool.run(plan, jobs, results.append, failures.append)
        survivors = list(pool.environments)
    assert pool.killed is not None
    assert survivors == [slot for slot in ("cpu#0", "cpu#1") if slot != pool.killed]
    assert [(failure.worker, failure.job) for failure in failures] == [(pool.killed, jobs[0])]
    assert "exited (-9)" in failures[0].detail
    assert [(r.job, r.attempts, r.worker, r.error) for r in results] == [(jobs[0], 2, survivors[0], None)]
    assert results[0].run is not None
    assert results[0].run.raw["spec"]["status"] == "passed"


@pytest.mark.skipif(cuda_available(), reason="needs a machine without a GPU")
def test_a_device_that_cannot_open_is_left_out_or_stops_the_pool(pooled: tuple[Any, Any, JobPlan]) -> None:
    with LocalPool(["cuda:0", "cpu"]) as pool:
        assert list(pool.environments) == ["cpu#0"]
        assert "no CUDA GPU" in pool.failed_at_start["cuda:0"]
    with pytest.raises(EnvError, match="no worker of the local pool could start"):
        LocalPool(["cuda:0"]).start()


def test_devices_text() -> None:
    assert parse_devices("3", "cpu") == ["cpu", "cpu", "cpu"]
    assert parse_devices("cpu,cpu") == ["cpu", "cpu"]
    assert parse_devices("cuda:0,cuda:2") == ["cuda:0", "cuda:2"]
    for bad, message in (
        ("cpu,cuda:0", "mix of CPU and GPU"),
        ("cuda:1,cuda:1", "named twice"),
        ("0", "at least 1"),
        ("tpu:0", "expected cpu, cuda or cuda:N"),
        (",", "expected all, N"),
    ):
        with pytest.raises(UsageError, match=message):
            parse_devices(bad)
    with pytest.raises(UsageError, match="does not agree with --device"):
        parse_devices("cuda:0", "cpu")
    with pytest.raises(UsageError, match="--devices all means every GPU"):
        parse_devices("all", "cpu")
    if not cuda_available():
        with pytest.raises(EnvError, match="no CUDA GPU"):
            parse_devices("all")
        assert parse_devices("2") == ["cpu", "cpu"]


def test_options_that_do_not_go_together(shared_registry: Registry) -> None:
    with pytest.raises(UsageError, match="--executor 'slurm'"):
        run_bench_jobs(shared_registry, RMSNORM, BOTH, OPTIONS, executor="slurm")
    with pytest.raises(UsageError, match="need --executor ray"):
        run_bench_jobs(shared_registry, RMSNORM, BOTH, OPTIONS, ray_address="auto")
    with pytest.raises(UsageError, match="Ray places one actor per GPU"):
        run_bench_jobs(shared_registry, RMSNORM, BOTH, OPTIONS, executor="ray", devices="2")
    with pytest.raises(UsageError, match="--shard"):
        run_bench_jobs(shared_registry, RMSNORM, BOTH, OPTIONS, shard_text="2/2")


def test_cpu_workers_get_disjoint_cpus() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    shares = cpu_shares(len(allowed))
    if len(allowed) >= 2:
        assert sorted(cpu for share in shares for cpu in share) == allowed
        assert shares[0] == (allowed[-1],)
    assert cpu_shares(1) == []
    assert cpu_shares(len(allowed) + 1) == []
