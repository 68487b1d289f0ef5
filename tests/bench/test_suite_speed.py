"""benchmarks/suite_speed.py --smoke: a small CPU suite end to end, its table of wall time and phases."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.bench.conftest import UNSANDBOXED
from tests.conftest import REPO_ROOT, load_module

pytestmark = pytest.mark.slow

FEWER_CALLS = ("--warmup", "1", "--iterations", "20", "--trials", "1")


def _script() -> Any:
    return load_module("suite_speed", REPO_ROOT / "benchmarks" / "suite_speed.py")


def test_smoke_suite_prints_phases_and_medians(tmp_path: Path) -> None:
    script = REPO_ROOT / "benchmarks" / "suite_speed.py"
    # the script's table and phases, not the smoke suite's 10 warm-up and 3 x 100 timed calls per run, are under
    # test: later options win, so one warm-up and 20 timed calls per run (23 s -> about 14 s on the 2-core VM)
    extra = ["--", *FEWER_CALLS, *UNSANDBOXED]
    done = subprocess.run(
        [sys.executable, str(script), "--smoke", "--repeats", "1", "--out", str(tmp_path), *extra],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (result,) = json.loads((tmp_path / "suite_speed.json").read_text())
    assert result["exit"] == 0
    assert result["statuses"] == ["passed"]
    assert result["runs"] == 4  # reference and torch_rmsnorm on b1 and b7
    phases = result["phases"]
    assert {"start", "prepare", "timed", "stop", "write", "total"} <= set(phases)
    assert 0 < phases["total"] <= result["wallS"]
    assert result["outsideS"] == pytest.approx(result["wallS"] - phases["total"], abs=0.002)
    table = done.stdout
    assert "| run | exit | wall s | outside s | resolve s | start s |" in table
    assert "timed s" in table
    assert len([line for line in table.splitlines() if line.startswith("| reference_")]) == 2  # medians per workload
    assert (tmp_path / "suite_speed.md").read_text() == table
    # the workers' packages got their bytecode first (here: the venv's torch, already compiled: nothing to do)
    assert any(line.startswith("precompile torch: ") for line in table.splitlines())


def test_the_suite_is_written_for_flashinfer_benchs_own_harness(tmp_path: Path) -> None:
    """``--flashinfer-bench``: the same definition, its seven workloads and the FlashInfer wrapper as a solution,
    read back by FlashInfer-Bench 0.1.2's own loader (its harness needs CUDA: the device call runs it)."""
    data = pytest.importorskip("flashinfer_bench.data")
    suite_speed = _script()
    definition = suite_speed.SUITE_DEFINITION
    solution = suite_speed.flashinfer_bench_folder(definition, tmp_path / "fib")
    trace_set = data.TraceSet.from_path(str(tmp_path / "fib"))
    assert list(trace_set.definitions) == [definition]
    assert [s.name for s in trace_set.solutions[definition]] == [solution]
    assert solution.startswith("flashinfer_wrapper_")
    workloads = trace_set.workloads[definition]
    assert len(workloads) == 7
    # the index tensors kictl synthesises from the axes go as safetensors; q, k and v are drawn by the harness
    inputs = workloads[0].workload.inputs
    assert {name for name, item in inputs.items() if item.type == "safetensors"} == {
        "qo_indptr",
        "kv_indptr",
        "kv_indices",
    }
    assert inputs["q"].type == "random"


def test_a_flashinfer_bench_run_that_failed_gives_no_ratio() -> None:
    """Its harness stopping early (here: no CUDA) is no time to compare kictl's with."""
    suite_speed = _script()
    kictl = [{"run": 1, "wallS": 20.0}]
    failed = [{"run": 1, "exit": 1, "wallS": 1.4, "evaluations": {}}]
    assert "no ratio: 1 of 1" in "\n".join(suite_speed.comparison(kictl, failed))
    passed = [{"run": 1, "exit": 0, "wallS": 100.0, "evaluations": {"len_indptr=2": "PASSED 9.00 µs"}}]
    assert "kictl is 5.0x faster" in "\n".join(suite_speed.comparison(kictl, passed))
