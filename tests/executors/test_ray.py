"""``--executor ray`` on a real local Ray cluster (2 CPUs, no GPU): the same records as a plain bench.

Skipped when Ray (the ``cluster`` extra) is not installed; CI installs it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kictl.bench.judge.results import write_manifest
from kictl.bench.judge.session import BenchOptions, run_bench
from kictl.errors import EnvError, UsageError
from kictl.executors import run_bench_jobs
from kictl.executors.ray_executor import RayExecutor
from kictl.store.registry import Registry
from tests.conftest import RunCli, copy_bundled
from tests.executors.conftest import BOTH, RMSNORM
from tests.executors.test_local import identity

pytestmark = pytest.mark.slow

#: Every workload of rmsnorm_h4096, the cheapest protocol on the CPU.
OPTIONS = BenchOptions(device="cpu", warmup=0, iterations=1, trials=1, rounds=1)


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    ray = pytest.importorskip("ray")
    for attempt in range(2):
        try:
            ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False)
            break
        except Exception as exc:  # Ray's own: its raylet has a fixed 30 s to register, which a saturated
            ray.shutdown()  # CI machine (three test workers on two cores) can miss; once more, then fail
            if attempt or "timed out during startup" not in str(exc):
                raise
    try:
        yield ray
    finally:
        ray.shutdown()


def test_ray_runs_give_the_records_of_a_plain_run(
    local_ray: Any, shared_registry: Registry, tmp_path: Path, cli: RunCli
) -> None:
    report, outcome = run_bench_jobs(shared_registry, RMSNORM, BOTH, OPTIONS, executor="ray", ray_workers=2)
    assert outcome.planned == outcome.in_shard == 12
    assert outcome.device_failures == []
    assert report.skipped == []
    assert {result.worker for result in outcome.results} == {"ray#0", "ray#1"}  # both actors took jobs
    assert len(report.runs) == 12
    assert all(run.status == "passed" for run in report.runs), [(run.status, run.detail) for run in report.runs]
    plain = run_bench(shared_registry, RMSNORM, BOTH, OPTIONS)
    assert identity(report.records) == identity(plain.records)
    # and they validate in a registry
    registry = copy_bundled(tmp_path / "fresh")
    manifest = write_manifest(report, tmp_path / "out")
    added = cli("add", manifest.parent, "--registry", registry.root)
    assert added.exit_code == 0, added.output
    validated = cli("validate", "--registry", registry.root, "--json")
    assert validated.exit_code == 0, validated.output
    assert json.loads(validated.stdout)["counts"]["BenchmarkRun"] == 12


def test_ray_actors_ask_for_one_device_of_a_product(local_ray: Any) -> None:
    gpu = RayExecutor(device_kind="cuda", accelerator_type="H200", resources={"kictl-h200": 1})
    assert gpu.actor_options() == {
        "max_restarts": 0,
        "max_task_retries": 0,
        "num_gpus": 1,
        "num_cpus": 1,
        "accelerator_type": "H200",
        "resources": {"kictl-h200": 1},
    }
    assert RayExecutor(device_kind="cpu").actor_options()["num_gpus"] == 0
    # how many actors a node holds: its GPUs of the product, as far as the custom resources reach
    node = {"CPU": 64.0, "GPU": 8.0, "accelerator_type:H200": 1.0, "kictl-h200": 4.0}
    assert gpu.capacity(node) == 4
    assert gpu.capacity({**node, "accelerator_type:H200": 0.0}) == 0
    assert RayExecutor(device_kind="cuda").capacity(node) == 8
    assert RayExecutor(device_kind="cpu").capacity(node) == 64


def test_a_cluster_without_the_devices_asked_for_is_an_environment_error(local_ray: Any) -> None:
    with pytest.raises(EnvError, match="has no GPU to run on"):
        RayExecutor(device_kind="cuda").start()
    with pytest.raises(EnvError, match="has no GPU of type H200"):
        RayExecutor(device_kind="cuda", accelerator_type="H200").start()
    with pytest.raises(UsageError, match="routes GPU jobs"):
        RayExecutor(device_kind="cpu", accelerator_type="H200")
    assert local_ray.is_initialized()  # a cluster it joined is left running
