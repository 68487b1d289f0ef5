"""The power-hungry variant's calibration on a GPU (benchmarks/energy.py, tests/assets/energy/hungry_tail.py).

Issue 43 asks for a variant of an honest implementation that keeps its latency within 3% and costs more energy:
redundant work on a side stream for ``SPIN_SHARE`` of the honest call's device time. The H100 call of 2026-12-07
calibrated that share against one call timed on an idle GPU, which reads the host's launch path, and the
variants spun 1.2-6.5x the wrapper's latency. Here the honest call is host-bound on purpose (80 tiny kernels,
enqueued more slowly than the GPU runs them), so that a calibration against the host's time fails this test.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import torch

from tests.conftest import REPO_ROOT, load_module

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

HONEST = """
import torch


@torch.no_grad()
def run(x):
    for _ in range(40):
        x = x * 1.0001 + 0.0001
    return x
"""


def _variant(tmp_path: Path, share: float) -> ModuleType:
    tail = (REPO_ROOT / "tests" / "assets" / "energy" / "hungry_tail.py").read_text()
    path = tmp_path / "hungry_variant.py"
    path.write_text(f"{HONEST}\n\nSPIN_BLOCKS = 16\nSPIN_SHARE = {share}\n\n{tail}")
    return load_module("hungry_variant", path)


def test_the_variant_spins_its_share_of_the_device_time_and_keeps_the_latency(tmp_path: Path) -> None:
    module = _variant(tmp_path, 0.6)
    x = torch.randn(1 << 16, device="cuda")
    want = module.run(x)  # before setup(): the honest call
    module.setup(x)
    assert torch.equal(module.run(x), want)
    rate = module._iterations_per_ms()
    plain_ms = module._device_ms_per_call((x,), rate)
    host_ms = module._elapsed_ms(lambda: module._run_plain(x))[0]
    assert host_ms > 1.5 * plain_ms, (host_ms, plain_ms)  # host-bound: the case the old calibration got wrong
    stream = torch.cuda.current_stream()
    spin_ms = module._elapsed_ms(lambda: module._spin(stream, module._SPIN["iterations"]), int(rate * 2))[0]
    assert 0.3 * plain_ms < spin_ms < 0.9 * plain_ms, (spin_ms, plain_ms)
    calls = 5

    def variant_calls() -> None:
        for _ in range(calls):
            module.run(x)

    variant_ms = module._elapsed_ms(variant_calls, int(rate * 4))[0] / calls
    assert variant_ms < 1.1 * plain_ms, (variant_ms, plain_ms)
