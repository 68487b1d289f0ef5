"""Options and devices: what cannot work is a usage or environment error."""

from __future__ import annotations

import pytest

from kictl.bench.session import BenchOptions, check_options, resolve_device
from kictl.errors import EnvError, UsageError
from tests.bench.conftest import cuda_available


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
