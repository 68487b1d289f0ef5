"""An executor's worker keeps its sandboxed bench workers from one job to the next (nothing imported twice)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kictl.executors import seam
from kictl.executors.jobs import plan_jobs
from kictl.records import record_from_value
from kictl.store.registry import Registry
from tests.executors.conftest import CPU_FAST, IMPLEMENTATIONS, RMSNORM

pytestmark = pytest.mark.slow


def test_jobs_of_one_implementation_reuse_its_worker(shared_registry: Registry, tmp_path: Path) -> None:
    impl = str(IMPLEMENTATIONS / "torch_rmsnorm")
    plan = plan_jobs(shared_registry, RMSNORM, [impl], CPU_FAST, workloads=("b1", "b7"), workdir=tmp_path)
    assert len(plan.jobs) == 2
    seam.close_workers()
    try:
        seen = []
        for job in plan.jobs:
            values = seam.run_job(plan.payload(job), "cpu")
            records = [record_from_value(value) for value in values]
            (run,) = [r for r in records if r.kind == "BenchmarkRun"]
            assert run.raw["spec"]["status"] == "passed", run.raw["spec"].get("statusDetail")
            assert run.raw["spec"]["workloadDigest"] == job.workload_digest
            kept = seam.kept_workers().workers()
            seen.append(
                [(worker.label, worker.starts, worker.process.pid if worker.process else None) for worker in kept]
            )
        # the implementation's worker and kictl's reference worker, each started once and alive across both jobs
        assert len(seen[0]) == 2
        assert seen[0] == seen[1]
        assert all(starts == 1 and pid is not None for _, starts, pid in seen[1])
        processes = [worker.process for worker in seam.kept_workers().workers()]
    finally:
        seam.close_workers()
    assert all(process is None or process.poll() is not None for process in processes)
    assert not seam._KEPT  # made again at the next job
