"""Fixtures of the executor tests: the bundled registry, two rmsnorm implementations, the cheapest CPU settings."""

from __future__ import annotations

import pytest

from kictl.bench.judge.session import BenchOptions
from kictl.executors.seam import settings_of
from kictl.store.registry import Registry
from tests.conftest import REPO_ROOT, copy_bundled

RMSNORM = "rmsnorm_h4096"
IMPLEMENTATIONS = REPO_ROOT / "implementations" / RMSNORM
BOTH = (str(IMPLEMENTATIONS / "torch_rmsnorm"), str(IMPLEMENTATIONS / "reference"))
#: The cheapest way through a workload on the CPU: one correctness round, one timed call.
CPU_FAST = settings_of(BenchOptions(device="cpu", warmup=0, iterations=1, trials=1, rounds=1), "cpu")


@pytest.fixture(scope="module")
def shared_registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    """One copy of the bundled registry for a whole test module (read-only use)."""
    return copy_bundled(tmp_path_factory.mktemp("executors") / "bundled")
