"""The walls on a GPU (issue 11): the cheats of ``tests/assets/cheats`` under the CUPTI timer and under events.

Marked ``gpu`` and skipped without CUDA; run on the lent H200 with ``pytest -m gpu`` (benchmarks/RESULTS.md
keeps the output). Each session is one ``kictl bench`` process, sandboxed where bubblewrap works, so that
every run's record also has to survive the others.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from tests.bench.conftest import CHEATS, IMPLEMENTATIONS, cuda_available, rows

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU")]

RMSNORM = "rmsnorm_h4096"
DECODE = "gqa_paged_decode_h32_kv8_d128_ps1"
#: cheat -> the checks that may name it on a GPU (a cache may be met first by outputsFresh, when two timed
#: calls on different values gave the same answer, or by an audit, timedOutputsCorrect)
CAUGHT_ON_GPU: dict[str, tuple[str, ...]] = {
    "values_cached_by_identity": ("outputsFresh", "timedOutputsCorrect"),
    "values_cached_by_data_ptr": ("outputsFresh", "timedOutputsCorrect"),
    "values_cached_by_version": ("outputsFresh", "timedOutputsCorrect"),
    "values_cached_by_samples": ("outputsFresh", "timedOutputsCorrect"),
    "values_precomputed_in_setup": ("outputsFresh", "timedOutputsCorrect"),
    "rmsnorm_cached_output": ("outputsFresh",),
    # its forged answers drop the samples settled in batches (wireIntact), or its patch is seen (timerNotPatched)
    "timer_forged_samples": ("timerNotPatched", "wireIntact"),
    "rmsnorm_patches_timer": ("timerNotPatched",),
    "timer_reads_harness_frames": ("timedOutputsCorrect",),
    "timer_events_moved": ("timerNotPatched",),
    "timer_instance_patched": ("timerNotPatched",),
    "timer_cupti_switched_off": ("timerNotPatched",),
    # issue 40: the outputs are taken by the parent at the call's return, through their CUDA IPC handles, while the
    # worker is stopped; whatever hook would fill them later (an audit request, gc, a signal) comes too late. A
    # call that launched no device work at all, its outputs left for the hook, is named by CUPTI first (H100, 12-06)
    **{
        f"lazy_audit_{name}": ("timedOutputsCorrect", "outputsFullyWritten", "outputsFresh", "timerNotPatched")
        for name in (
            "alarm_after_return",
            "gc_callback",
            "gc_while_waiting",
            "json_loads",
            "os_read",
            "sigio_on_request_pipe",
            "worker_attribute",
            "worker_call_notes",
        )
    },
    # the worker's notes emptied: the parent names the output in the timed inputs' memory, and the answer that
    # says the output is no plain tensor, itself
    "scrubbed_notes_output_in_inputs": ("outputsNotAliasInputs", "inputsUnchanged"),
    "scrubbed_notes_subclass_output": ("plainTensorOutputs",),
}
#: would-be cheats that gain nothing under CUPTI: they pass with their true time.  ``inputs_found_in_worker_memory``
#: answers wrongly where setup() can reach the timed sets or their seeds: it passes since the parent stages them
GAIN_NOTHING_ON_GPU = (
    "timer_clock_swapped_in_setup",
    "honest_offset_view",
    "honest_noncontiguous_output",
    "inputs_found_in_worker_memory",
)


def _by_implementation(result: Result) -> dict[str, dict[str, Any]]:
    return {row["implementation"].rsplit("_", 1)[0]: row for row in rows(result)}


def _failed_checks(row: dict[str, Any]) -> set[str]:
    return {part.split(":", 1)[0].strip() for part in row["statusDetail"].split("; ")}


def _rmsnorm(bench_module: Callable[..., Result], *args: str | Path) -> Result:
    """torch_rmsnorm and the named cheats on rmsnorm's b64, on the GPU: 2 rounds, 60 timed calls."""
    return bench_module(
        RMSNORM,
        "--impl",
        IMPLEMENTATIONS / RMSNORM / "torch_rmsnorm",
        *args,
        "--workload",
        "b64",
        "--device",
        "cuda",
        "--rounds",
        "2",
        "--iterations",
        "60",
        "--trials",
        "1",
    )


@pytest.fixture(scope="module")
def rmsnorm_session(bench_module: Callable[..., Result]) -> Result:
    names = [*CAUGHT_ON_GPU, *GAIN_NOTHING_ON_GPU]
    return _rmsnorm(bench_module, *[arg for name in names for arg in ("--impl", CHEATS / f"{name}.py")])


def test_the_honest_rmsnorm_passes_on_the_gpu_beside_the_cheats(rmsnorm_session: Result) -> None:
    found = _by_implementation(rmsnorm_session)
    assert set(found) == {"torch_rmsnorm", *CAUGHT_ON_GPU, *GAIN_NOTHING_ON_GPU}
    for name in ("torch_rmsnorm", *GAIN_NOTHING_ON_GPU):
        assert found[name]["status"] == "passed", found[name]
    assert all(row["run"] for row in found.values()), "a run lost its record"


@pytest.mark.parametrize(("cheat", "checks"), sorted(CAUGHT_ON_GPU.items()))
def test_each_cheat_is_caught_on_the_gpu_naming_its_check(
    rmsnorm_session: Result, cheat: str, checks: tuple[str, ...]
) -> None:
    row = _by_implementation(rmsnorm_session)[cheat]
    assert row["status"] == "reward_hack", row
    assert _failed_checks(row) & set(checks), row["statusDetail"]


def test_events_moved_from_inside_the_call_are_named_under_the_events_timer(
    bench_module: Callable[..., Result],
) -> None:
    result = _rmsnorm(bench_module, "--impl", CHEATS / "timer_events_moved.py", "--timer", "events")
    found = _by_implementation(result)
    assert found["torch_rmsnorm"]["status"] == "passed", found["torch_rmsnorm"]
    cheat = found["timer_events_moved"]
    assert cheat["status"] == "reward_hack", cheat
    assert "timerNotPatched" in _failed_checks(cheat), cheat["statusDetail"]


def test_attention_cheats_fail_on_small_and_large_workloads(bench_module: Callable[..., Result]) -> None:
    """Side streams (with and without a copy behind, outliving the call) and an identity cache, on decode.

    The rule is CUDA's ordering read from CUPTI's records, not whether the work happened to end in time: on the
    H200 (device call J) the plain side-stream cheat got `passed` on b1_kv73 under the earlier time-only rule.
    """
    result = bench_module(
        DECODE,
        "--impl",
        IMPLEMENTATIONS / DECODE / "reference",
        "--impl",
        CHEATS / "attention_side_stream.py",
        "--impl",
        CHEATS / "attention_side_stream_outlives.py",
        "--impl",
        CHEATS / "attention_side_stream_copy.py",
        "--impl",
        CHEATS / "attention_cached_by_identity.py",
        "--workload",
        "b1_kv73",
        "--workload",
        "b16x_kv1024",
        "--device",
        "cuda",
        "--rounds",
        "2",
        "--iterations",
        "30",
        "--trials",
        "1",
    )
    by_run = {(row["implementation"].rsplit("_", 1)[0], row["workload"]): row for row in rows(result)}
    assert len(by_run) == 10, sorted(by_run)
    for (name, workload), row in by_run.items():
        if name == "reference":
            assert row["status"] == "passed", row
            continue
        assert row["status"] == "reward_hack", (workload, row)
        allowed = {
            "attention_side_stream": {"streamOrdered"},
            "attention_side_stream_outlives": {"streamOrdered", "outputsFresh", "outputsFullyWritten"},
            "attention_side_stream_copy": {"streamOrdered", "outputsFresh", "outputsFullyWritten"},
            "attention_cached_by_identity": {"outputsFresh", "timedOutputsCorrect", "aboveFloor"},
        }[name]
        assert _failed_checks(row) & allowed, (workload, row["statusDetail"])


def test_the_parent_stages_a_gpu_run_s_timed_inputs_itself(bench_module: Callable[..., Result]) -> None:
    """Issue 40 on CUDA: no ``Stage`` request reaches the worker (the parent writes each call's values into its
    timed tensors through their IPC handles), and the honest run passes with every timed call audited right."""
    result = _rmsnorm(bench_module, "--timings")
    found = _by_implementation(result)
    assert found["torch_rmsnorm"]["status"] == "passed", found["torch_rmsnorm"]
    try:
        text = result.output + result.stderr  # click >= 8.2 keeps stderr apart as well
    except ValueError:  # an older click: stderr is in result.output
        text = result.output
    lines = [line for line in text.splitlines() if line.startswith(("request ", "timing "))]
    print("\n".join(lines))  # what each kind of request cost the parent (benchmarks/RESULTS.md keeps it)
    kinds = {line.split()[2] for line in lines if line.startswith("request ")}
    assert "call" in kinds, text[-2000:]
    assert "stage" not in kinds, text[-2000:]
