"""The timed calls run pinned to one CPU; the start, the import and the correctness rounds are not held to it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from tests.bench.conftest import rows
from tests.conftest import MACHINE_CPUS

ASSET = Path(__file__).parent / "assets" / "affinity_rmsnorm.py"


@pytest.mark.skipif(len(MACHINE_CPUS) < 2, reason="needs two CPUs to tell pinned from not")
@pytest.mark.usefixtures("every_cpu")
def test_threads_are_pinned_from_arming_on(bench_module: Callable[..., Result]) -> None:
    result = bench_module(
        "rmsnorm_h4096",
        "--impl",
        ASSET,
        "--workload",
        "b1",
        "--device",
        "cpu",
        "--rounds",
        "2",
        "--warmup",
        "2",
        "--iterations",
        "5",
    )
    (row,) = rows(result)
    assert row["status"] == "passed", row["statusDetail"]
    assert result.exit_code == 0, result.output
