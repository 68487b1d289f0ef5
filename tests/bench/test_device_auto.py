"""`--device auto` on a machine without a GPU says on stderr that it runs on the CPU (issue 13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, RunCli


def test_device_auto_without_a_gpu_says_it_runs_on_the_cpu(cli: RunCli, tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present: auto picks it")
    impl = REPO_ROOT / "implementations" / "rmsnorm_h4096" / "reference"
    args = ["--workload", "b1", "--iterations", "3", "--trials", "1", "--warmup", "1", "--rounds", "1"]
    result = cli("bench", "rmsnorm_h4096", "--impl", impl, *args, "--out", tmp_path / "out", "--registry", REPO_ROOT)
    assert result.exit_code == 0, result.output
    assert "note: no CUDA GPU is available: --device auto ran on the CPU" in result.stderr
    # an explicit --device cpu says nothing of it: test_cli.py::test_bench_adds_to_the_registry_and_prints_a_table
    # asserts that of its session (one session fewer here: two workers' start and a workload, about 4 s)
