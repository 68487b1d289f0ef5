"""Every cheating implementation is caught; broken ones fail cleanly and kictl survives (issue 4)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import Result

from tests.bench.conftest import CHEATS, IMPLEMENTATIONS, cuda_available, rows

RMSNORM = "rmsnorm_h4096"
CAUGHT_BY = {
    "rmsnorm_mutates_inputs": "inputsUnchanged",
    "rmsnorm_cached_output": "outputsFresh",
    "rmsnorm_returns_input": "outputsNotAliasInputs",
    "rmsnorm_starts_thread": "noThreadsLeft",
    "rmsnorm_patches_timer": "timerNotPatched",
    "rmsnorm_partial_write": "outputsFullyWritten",
}
BROKEN = {
    "rmsnorm_crashes": ("runtime_error", "SIGSEGV"),
    "rmsnorm_raises": ("runtime_error", "ValueError: this kernel does not support"),
    "rmsnorm_hangs": ("timeout", "no answer within 6 s"),
    "rmsnorm_syntax_error": ("compile_error", "SyntaxError"),
    "rmsnorm_wrong_values": ("incorrect_numerical", "outside tolerance"),
    "rmsnorm_wrong_dtype": ("incorrect_dtype", "dtype float32, expected bfloat16"),
    "rmsnorm_wrong_shape": ("incorrect_shape", "shape [63, 4096], expected [64, 4096]"),
}


def _by_implementation(result: Result) -> dict[str, dict[str, Any]]:
    return {row["implementation"].rsplit("_", 1)[0]: row for row in rows(result)}


@pytest.fixture(scope="module")
def cheats_result(bench_module: Callable[..., Result]) -> Result:
    impls = [arg for name in CAUGHT_BY for arg in ("--impl", CHEATS / f"{name}.py")]
    return bench_module(
        RMSNORM,
        "--impl",
        IMPLEMENTATIONS / RMSNORM / "reference",
        *impls,
        "--workload",
        "b64",
        "--device",
        "cpu",
        "--rounds",
        "2",
        "--warmup",
        "1",
        "--iterations",
        "3",
    )


@pytest.fixture(scope="module")
def broken_result(bench_module: Callable[..., Result]) -> Result:
    impls = [arg for name in BROKEN for arg in ("--impl", CHEATS / f"{name}.py")]
    return bench_module(
        RMSNORM,
        *impls,
        "--impl",
        IMPLEMENTATIONS / RMSNORM / "torch_rmsnorm",
        "--workload",
        "b64",
        "--device",
        "cpu",
        "--rounds",
        "1",
        "--warmup",
        "0",
        "--iterations",
        "1",
        "--timeout",
        "6",
    )


def test_the_honest_reference_passes_among_cheats(cheats_result: Result) -> None:
    assert cheats_result.exit_code == 1, cheats_result.output
    found = _by_implementation(cheats_result)
    assert found["reference"]["status"] == "passed", found["reference"]


@pytest.mark.parametrize(("cheat", "check"), sorted(CAUGHT_BY.items()))
def test_cheat_is_caught(cheats_result: Result, cheat: str, check: str) -> None:
    row = _by_implementation(cheats_result)[cheat]
    assert row["status"] == "reward_hack", row
    assert row["statusDetail"].startswith(check) or f"; {check}:" in row["statusDetail"], row["statusDetail"]


@pytest.mark.parametrize(("name", "expected"), sorted(BROKEN.items()))
def test_broken_implementation_fails_cleanly(broken_result: Result, name: str, expected: tuple[str, str]) -> None:
    status, words = expected
    row = _by_implementation(broken_result)[name]
    assert row["status"] == status, row
    assert words in row["statusDetail"], row["statusDetail"]


def test_kictl_survives_crash_and_hang(broken_result: Result) -> None:
    """The last implementation still ran after a segfault, a hang and a syntax error before it."""
    assert broken_result.exit_code == 1, broken_result.output
    row = _by_implementation(broken_result)["torch_rmsnorm"]
    assert row["status"] == "passed", row
    assert "Traceback" not in broken_result.stderr, broken_result.stderr
    assert broken_result.stderr.rstrip().endswith("error: 7 of 8 runs did not pass"), broken_result.stderr


def test_runtime_error_detail_is_relative_to_the_implementation(broken_result: Result) -> None:
    detail = _by_implementation(broken_result)["rmsnorm_raises"]["statusDetail"]
    assert 'File "rmsnorm_raises.py", line 5, in run' in detail, detail
    assert "kictl" not in detail, detail
    assert "/tmp" not in detail, detail


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU")
@pytest.mark.xfail(
    strict=False,
    reason="the streamOrdered check races the side stream: on an H200 (2026-11-30) this cheat, whose "
    "tiny kernels finish as fast as Python launches them, passed; a robust check is still to be built",
)
def test_side_stream_cheat_is_caught_on_gpu(bench_module: Callable[..., Result]) -> None:
    definition = "gqa_paged_decode_h32_kv8_d128_ps1"
    result = bench_module(
        definition,
        "--impl",
        IMPLEMENTATIONS / definition / "reference",
        "--impl",
        CHEATS / "attention_side_stream.py",
        "--workload",
        "b16x_kv1024",
        "--device",
        "cuda",
        "--rounds",
        "2",
    )
    found = _by_implementation(result)
    assert found["reference"]["status"] == "passed", found["reference"]
    assert found["attention_side_stream"]["status"] in ("reward_hack", "incorrect_numerical"), found
