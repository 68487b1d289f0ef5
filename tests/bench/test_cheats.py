"""Hostile implementations are caught, broken ones fail cleanly, and no one loses another's record (issues 4, 10).

One ``kictl bench`` session, sandboxed, runs the definition's reference, the torch implementation, three
fair implementations and every cheat of ``tests/assets/cheats`` side by side on one workload, so that the
test also shows that each run's record survives whatever the others did.  The cheats of issue 10 come in
six classes (the file name's prefix): ``wire_`` (code in kictl's process), ``timer_`` (the timer from the
same interpreter), ``values_`` (answers that do not depend on the timed values), ``escape_`` (work that
escapes the measurement), ``reach_`` (other processes), ``drop_`` (making kictl drop everyone's results).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from tests.bench.conftest import CHEATS, IMPLEMENTATIONS, SANDBOX, rows

pytestmark = pytest.mark.skipif(not SANDBOX, reason="needs bubblewrap (apt-get install bubblewrap)")

RMSNORM = "rmsnorm_h4096"
HONEST = (
    "honest_slow_loop",
    "honest_noncontiguous_output",
    "honest_reused_buffer",
    "honest_float64_math",
    "honest_offset_view",
)
#: Would-be cheats that gain nothing: none left (the caches keyed on identity, pointer, version or sampled
#: values are all caught; the probes write through ``.data``, so a (pointer, ``_version``) key sees no change).
GAIN_NOTHING: tuple[str, ...] = ()
CAUGHT_BY = {
    # issue 4's cheats
    "rmsnorm_mutates_inputs": "inputsUnchanged",
    "rmsnorm_cached_output": "outputsFresh",
    "rmsnorm_returns_input": "outputsNotAliasInputs",
    "rmsnorm_starts_thread": "noThreadsLeft",
    "rmsnorm_patches_timer": "timerNotPatched",
    "rmsnorm_partial_write": "outputsFullyWritten",
    # issue 10, class 1: code execution in kictl's process
    "wire_pickle_payload": "wireIntact",
    "wire_forged_frame": "wireIntact",
    # class 2: the timer from the same interpreter
    "timer_clock_swapped_in_setup": "samplesConsistent",
    "timer_forged_samples": "samplesConsistent",
    "timer_reads_harness_frames": "timedOutputsCorrect",
    # the timer object's own clock replaced (found in the caller's frames): nothing at module level changes
    "timer_instance_patched": "timerNotPatched",
    # class 3: answers that do not depend on the timed call's values
    "values_cached_by_identity": "timedOutputsCorrect",
    "values_precomputed_in_setup": "timedOutputsCorrect",
    "values_cached_by_data_ptr": "outputsFresh",
    # its probes find it (timedOutputsCorrect); or, where a correctness round's fresh tensors reuse the last
    # round's addresses (the allocator's choice), the cache answers the round and two rounds agree (outputsFresh)
    "values_cached_by_version": ("timedOutputsCorrect", "outputsFresh"),
    # a cache keyed on a sample of the values: the probes (the last call's values with a few swapped) hit it
    "values_cached_by_samples": "timedOutputsCorrect",
    # class 4: work that escapes the measurement
    "escape_lazy_subclass": "plainTensorOutputs",
    "escape_raw_thread": "noThreadsLeft",
    "escape_daemon": "noProcessesLeft",
    # class 3: precomputed from the published seeds: one answer for every input
    "values_from_public_seeds": "outputsFresh",
    # class 5: reaching other processes finds none; the zeros it answers with are judged as they are
    "reach_parent_stdout": "outputsFresh",
    # issue 27: the implementation's code inside kictl's own work (a mode, a hook) refuses the run
    "hook_function_mode_in_setup": "timerNotPatched",
    "hook_dispatch_mode_in_run": "timerNotPatched",
    "hook_profile_function": "timerNotPatched",
    "hook_trace_in_finish": "timerNotPatched",
    "hook_audit_hook": "timerNotPatched",
    # a replaced wire function; an answer written before its request (the nonce)
    "wire_replaced_write_frame": "timerNotPatched",
    "wire_pre_answered_call": "wireIntact",
    # a neighbour slowed between the implementation's own calls
    "neighbour_slowed_by_timer_signal": "noWorkOutsideCalls",
    "neighbour_slowed_by_thread": "noThreadsLeft",
    # a helper process given the (parent-staged, shared) inputs; escape_daemon above is the other of its class
    "helper_process_shared_inputs": "noProcessesLeft",
    "neighbour_slowed_by_reaped_process": ("noProcessesLeft", "noWorkOutsideCalls"),
}
FAILS_AS = {
    # class 5: the reference cannot be reached; a wrong formula is judged wrong
    "reach_reference_worker": ("incorrect_numerical", "outside tolerance"),
    # class 6: the implementation's own failure, nobody else's
    "drop_raising_iter": ("incorrect_shape", "returned a Trap"),
    "drop_sigalrm": ("runtime_error", "KeyboardInterrupt"),
    "drop_lone_surrogate": ("runtime_error", "ValueError: broken \ufffd text \ufffd with \ufffd[2J escapes"),
    # issue 27: a root-run sandbox holds (no capability, locked binds, seccomp)
    "escape_remount_as_root": ("compile_error", "remount refused: Operation not permitted"),
    "escape_own_user_namespace": ("compile_error", "unshare refused: Operation not permitted"),
    # broken implementations (issue 4)
    "rmsnorm_crashes": ("runtime_error", "SIGSEGV"),
    "rmsnorm_raises": ("runtime_error", "ValueError: this kernel does not support"),
    "rmsnorm_hangs": ("timeout", "no answer within 10 s to check"),
    "rmsnorm_syntax_error": ("compile_error", "SyntaxError"),
    "rmsnorm_wrong_values": ("incorrect_numerical", "outside tolerance"),
    "rmsnorm_wrong_dtype": ("incorrect_dtype", "dtype float32, expected bfloat16"),
    "rmsnorm_wrong_shape": ("incorrect_shape", "shape [63, 4096], expected [64, 4096]"),
}


def _by_implementation(result: Result) -> dict[str, dict[str, Any]]:
    return {row["implementation"].rsplit("_", 1)[0]: row for row in rows(result)}


def _daemons() -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            text = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if b"kictl-cheat-daemon-marker" in text:
            found.append(entry)
    return found


@pytest.fixture(scope="module")
def session_result(bench_module: Callable[..., Result]) -> Result:
    names = [*HONEST, *GAIN_NOTHING, *CAUGHT_BY, *FAILS_AS]
    impls = [arg for name in names for arg in ("--impl", CHEATS / f"{name}.py")]
    return bench_module(
        RMSNORM,
        "--impl",
        IMPLEMENTATIONS / RMSNORM / "reference",
        "--impl",
        IMPLEMENTATIONS / RMSNORM / "torch_rmsnorm",
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
        "12",
        "--timeout",
        "10",
    )


def test_every_run_is_recorded_and_the_fair_ones_pass(session_result: Result) -> None:
    assert session_result.exit_code == 1, session_result.output
    found = _by_implementation(session_result)
    assert set(found) == {"reference", "torch_rmsnorm", *HONEST, *GAIN_NOTHING, *CAUGHT_BY, *FAILS_AS}
    for name in ("reference", "torch_rmsnorm", *HONEST, *GAIN_NOTHING):
        assert found[name]["status"] == "passed", found[name]
        assert found[name]["run"] is not None
    assert all(row["run"] for row in found.values()), "a run lost its record"
    expected_failures = len(CAUGHT_BY) + len(FAILS_AS)
    assert session_result.stderr.rstrip().endswith(
        f"error: {expected_failures} of {expected_failures + 2 + len(HONEST) + len(GAIN_NOTHING)} runs did not pass"
    ), session_result.stderr


@pytest.mark.parametrize(("cheat", "check"), sorted(CAUGHT_BY.items()))
def test_cheat_is_caught_naming_the_check(session_result: Result, cheat: str, check: str | tuple[str, ...]) -> None:
    row = _by_implementation(session_result)[cheat]
    assert row["status"] == "reward_hack", row
    detail = row["statusDetail"]
    checks = (check,) if isinstance(check, str) else check
    assert any(detail.startswith(name) or f"; {name}:" in detail for name in checks), detail


def test_a_timeout_shows_where_the_worker_was(session_result: Result) -> None:
    """Before a silent worker is killed it is asked for its Python stacks (faulthandler), which its detail shows."""
    detail = _by_implementation(session_result)["rmsnorm_hangs"]["statusDetail"]
    assert "(most recent call first)" in detail, detail
    assert 'rmsnorm_hangs.py", line 8 in run' in detail, detail


@pytest.mark.parametrize(("name", "expected"), sorted(FAILS_AS.items()))
def test_hostile_or_broken_implementation_fails_as_itself(
    session_result: Result, name: str, expected: tuple[str, str]
) -> None:
    status, words = expected
    row = _by_implementation(session_result)[name]
    assert row["status"] == status, row
    assert words in row["statusDetail"], row["statusDetail"]


def test_nothing_reaches_kictls_output_or_outlives_the_session(session_result: Result) -> None:
    json.loads(session_result.stdout)  # one clean document
    assert "FORGED-TABLE" not in session_result.stdout
    assert "FORGED-TABLE" not in session_result.stderr
    assert "Traceback" not in session_result.stderr, session_result.stderr
    assert _daemons() == []
    import torch

    site = Path(torch.__file__).parent.parent
    assert not (site / "kictl_planted_by_escape_remount.py").exists()
    assert not Path("/usr/kictl_planted_by_own_namespace").exists()


def test_runtime_error_detail_is_relative_to_the_implementation(session_result: Result) -> None:
    detail = _by_implementation(session_result)["rmsnorm_raises"]["statusDetail"]
    assert 'File "rmsnorm_raises.py", line 5, in run' in detail, detail
    assert "kictl" not in detail, detail
    assert "/tmp" not in detail, detail
