"""The definition's constant axes reach ``run()`` and ``setup()`` as the keyword-only parameters they name.

An implementation that serves every definition of a family reads most sizes from its inputs' shapes, but some
constants no input says (MoE's ``top_k``). kictl passes each constant axis that ``run(...)`` or ``setup(...)``
names as a keyword-only parameter, in every call (setup, correctness rounds, timed calls, audits), through the
real harness on the CPU. Positional parameters are never filled from constants.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from kictl.bench import wire
from kictl.bench.worker.main import with_constants
from kictl.store.registry import Registry
from tests.bench.conftest import FAST
from tests.conftest import RunCli

GEMM = "gemm_n4096_k4096"

# the GEMM's N and K are constant axes: this implementation checks them against B in every call, setup's too
# (without them either raises a TypeError: a missing keyword-only argument)
TOLD = """import torch


def setup(A, B, *, N):
    if N != B.shape[0]:
        raise ValueError(f"setup told N={N}, B is {tuple(B.shape)}")


@torch.no_grad()
def run(A, B, *, N, K):
    if (N, K) != tuple(B.shape):
        raise ValueError(f"told N={N} K={K}, B is {tuple(B.shape)}")
    return torch.matmul(A, B.t())
"""

# a keyword-only parameter that is not a constant axis of the definition: kictl does not make one up
UNKNOWN = """import torch


def run(A, B, *, block_size):
    return torch.matmul(A, B.t())
"""


def _bench(cli: RunCli, registry: Registry, impl: Path, tmp_path: Path) -> list[dict[str, object]]:
    out = tmp_path / f"out-{impl.stem}"
    result = cli(
        "bench", GEMM, "--impl", impl, "--workload", "m1", *FAST, "--registry", registry.root, "--out", out, "--json"
    )
    rows: list[dict[str, object]] = json.loads(result.stdout)
    return rows


def test_constant_axes_reach_run_and_setup_as_the_keyword_only_parameters_they_name(
    cli: RunCli, bundled_registry: Registry, tmp_path: Path
) -> None:
    told = tmp_path / "told_gemm.py"
    told.write_text(TOLD)
    (row,) = _bench(cli, bundled_registry, told, tmp_path)
    assert row["status"] == "passed", row
    unknown = tmp_path / "unknown_gemm.py"
    unknown.write_text(UNKNOWN)
    (row,) = _bench(cli, bundled_registry, unknown, tmp_path)
    assert row["status"] == "runtime_error", row
    assert "block_size" in str(row["statusDetail"]), row


def test_only_keyword_only_parameters_are_bound() -> None:
    constants = (wire.Constant(name="N", value=4096), wire.Constant(name="top_k", value=8))

    def positional(N: int, x: int) -> tuple[int, int]:  # a positional parameter of a constant's name stays the caller's
        return N, x

    def keyword(x: int, *, top_k: int, other: int = 1) -> tuple[int, int, int]:
        return x, top_k, other

    assert with_constants(positional, constants) is positional
    assert with_constants(positional, constants)(1, 2) == (1, 2)
    assert with_constants(keyword, constants)(3) == (3, 8, 1)
    assert with_constants(keyword, ())(3, top_k=2) == (3, 2, 1)
    assert with_constants(len, constants) is len  # no keyword-only parameter (or no signature): as it is

    class Hostile:
        """A run() whose signature raises when read: called as it is, its own code's failure is its own."""

        @property
        def __signature__(self) -> None:
            raise RuntimeError("no signature for you")

        def __call__(self, x: int) -> int:
            return x

    hostile = Hostile()
    assert with_constants(hostile, constants) is hostile


def test_the_load_message_carries_the_constants_over_the_wire() -> None:
    message = wire.Load(files=(), entry="x.py", function="run", constants=(wire.Constant(name="top_k", value=8),))
    read, write = os.pipe()
    try:
        os.write(write, wire.encode(message))
        assert wire.read_frame(read, deadline=time.monotonic() + 5) == message
    finally:
        os.close(read)
        os.close(write)
