"""Where a session's wall time went: the phase clock, the session's phases, ``kictl bench --timings``."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kictl.bench.judge.phases import PHASES, PhaseClock, format_phases, parse_phases
from kictl.bench.judge.session import BenchOptions, run_bench
from kictl.store.registry import Registry
from tests.bench.conftest import CHEATS, FAST, IMPLEMENTATIONS
from tests.bench.fakes import Behaviour, FakeWorker
from tests.conftest import RunCli

RMSNORM = "rmsnorm_h4096"
WRONG = CHEATS / "rmsnorm_wrong_values.py"  # its code never runs here: a fake worker plays it


def test_phases_are_exclusive_and_add_up() -> None:
    clock = PhaseClock()
    began = time.perf_counter()
    with clock.phase("prepare"):
        time.sleep(0.05)
        with clock.phase("reference"):  # the outer phase is paused meanwhile
            time.sleep(0.1)
        time.sleep(0.05)
    with clock.phase("prepare"):  # a phase entered again adds up
        time.sleep(0.05)
    wall = time.perf_counter() - began
    report = clock.report()
    assert list(report) == ["prepare", "reference"]  # the session's order, not the order of entry
    assert 0.1 <= report["reference"] < 0.2
    assert 0.15 <= report["prepare"] < 0.3
    assert sum(report.values()) == pytest.approx(wall, abs=0.01)


def test_a_helper_threads_work_is_the_waiting_threads_phase() -> None:
    clock = PhaseClock()

    def helper() -> None:
        with clock.phase("records"):  # not the session's thread: charged to whatever the session waits in
            time.sleep(0.05)

    with clock.phase("reference"):
        thread = threading.Thread(target=helper)
        thread.start()
        thread.join()
    report = clock.report()
    assert set(report) == {"reference"}
    assert report["reference"] >= 0.05


def test_timing_lines_read_back() -> None:
    lines = format_phases({"start": 1.25, "timed": 10.5}, total=12.0)
    assert lines[0].split() == ["timing", "start", "1.250"]
    text = "\n".join(["t=0.1s worker impl0: starting", *lines, "error: something"])
    assert parse_phases(text) == {"start": 1.25, "timed": 10.5, "total": 12.0}


def test_a_session_reports_every_phase_it_went_through(bundled_registry: Registry) -> None:
    said: list[str] = []
    behaviours = {"reference": Behaviour(), "impl0": Behaviour(), "impl1": Behaviour(), "impl2": Behaviour()}
    impls = [IMPLEMENTATIONS / RMSNORM / "reference", IMPLEMENTATIONS / RMSNORM / "torch_rmsnorm", WRONG]
    began = time.perf_counter()
    report = run_bench(
        bundled_registry,
        RMSNORM,
        [str(path) for path in impls],
        BenchOptions(device="cpu", workloads=("b1", "b7"), rounds=2, warmup=1, iterations=6),
        progress=said.append,
        worker_factory=lambda label: FakeWorker(label, behaviours[label]),
    )
    wall = time.perf_counter() - began
    assert [run.status for run in report.runs] == ["passed"] * 6  # the fake plays the wrong file honestly
    expected = {"resolve", "start", "import", "inputs", "prepare", "reference", "warmup", "timed", "finish"}
    assert expected | {"records", "stop"} == set(report.phases)
    assert list(report.phases) == [name for name in PHASES if name in report.phases]
    assert all(seconds >= 0 for seconds in report.phases.values())
    assert sum(report.phases.values()) <= wall + 0.01
    # one idle window per workload (0.1 s each, 0.2 s in all), not one per run (0.6 s)
    assert 0.2 <= report.phases["reference"] + report.phases["finish"] < 0.5
    # the progress says what each worker and each run is doing, in order
    assert said.index("worker impl1 (torch_rmsnorm_60ddca37017af6a6): starting") < said.index(
        "b1: timed calls, interleaved"
    )
    assert any(line.startswith("worker reference (kictl's reference worker): ready") for line in said)
    assert "b1: torch_rmsnorm_60ddca37017af6a6: correctness, round 2" in said
    assert said[-1].startswith("b7: done (reference_62ef37623c8f6f3f passed, torch_rmsnorm_60ddca37017af6a6 passed, ")


def test_timings_flag_prints_steps_and_phases(
    cli: RunCli, bundled_registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KICTL_TIMINGS", raising=False)
    args = ("bench", RMSNORM, "--impl", IMPLEMENTATIONS / RMSNORM / "torch_rmsnorm", "--workload", "b1", *FAST)
    result = cli(*args, "--registry", bundled_registry.root, "--out", tmp_path, "--json", "--timings")
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    steps = [line for line in lines if line.startswith("t=")]
    assert any("impl0 (torch_rmsnorm_60ddca37017af6a6): ready after" in line for line in steps), steps
    assert any(line.endswith("b1: done (torch_rmsnorm_60ddca37017af6a6 passed)") for line in steps), steps
    phases = parse_phases(result.stderr)
    assert {"start", "prepare", "timed", "records", "stop", "write", "total"} <= set(phases)
    assert sum(seconds for name, seconds in phases.items() if name != "total") <= phases["total"] + 0.01
    # where the run's requests went, counted as the run made them (FAST: one round, no warm-up, one timed
    # call, which is always audited: on the CPU by the parent reading its outputs at its return, with no
    # request for them; every call is staged first)
    requests = {
        parts[2]: int(parts[3])
        for parts in (line.split() for line in lines if line.startswith("request torch_rmsnorm_60ddca37017af6a6 "))
    }
    assert requests == {"check": 1, "arm": 1, "call": 1, "ping": 15}, requests  # the parent stages
    # without the flag: no phase or request lines; stderr not being a terminal, the steps as progress lines (issue 30)
    quiet = cli(*args, "--registry", bundled_registry.root, "--out", tmp_path / "again", "--json")
    assert quiet.exit_code == 0, quiet.output
    assert not parse_phases(quiet.stderr)
    assert not [line for line in quiet.stderr.splitlines() if line.startswith("request ")]
    progress = [line for line in quiet.stderr.splitlines() if line.startswith("t=")]
    assert any(line.endswith("b1: done (torch_rmsnorm_60ddca37017af6a6 passed)") for line in progress), progress


def test_a_long_wait_says_what_it_waits_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from kictl.bench.judge import runner, sandbox

    monkeypatch.setattr(runner, "HEARTBEAT_S", 0.05)
    said: list[str] = []
    worker = runner.WorkerProcess("impl0", "cpu", tmp_path, sandbox.Isolation(None), progress=said.append)
    read, write = os.pipe()
    try:
        worker.fd_from, worker.asked = read, "Load"
        worker._await(time.monotonic() + 0.3)  # nothing arrives: it says so every heartbeat until the deadline
        assert 3 <= len(said) <= 7, said
        assert said[0].startswith("impl0: still waiting for the answer to Load (0 s; the limit is 0 s)")
        said.clear()
        os.write(write, b"K")  # an answer starts to arrive: the wait ends at once, silently
        began = time.monotonic()
        worker._await(time.monotonic() + 5)
        assert time.monotonic() - began < 1
        assert not said
    finally:
        os.close(read)
        os.close(write)


def test_a_worker_profiled_on_request_writes_its_profile(
    cli: RunCli, bundled_registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pstats

    from kictl.bench.worker.main import PROFILE_ENV

    folder = tmp_path / "profiles"
    folder.mkdir()
    monkeypatch.setenv(PROFILE_ENV, str(folder))
    args = ("bench", RMSNORM, "--impl", IMPLEMENTATIONS / RMSNORM / "torch_rmsnorm", "--workload", "b1", *FAST)
    if "--no-sandbox" not in args:  # only an unsandboxed worker can write there
        args = (*args, "--no-sandbox")
    result = cli(*args, "--registry", bundled_registry.root, "--out", tmp_path / "out", "--json")
    assert result.exit_code == 0, result.output
    profiles = sorted(folder.glob("worker-*.prof"))
    assert len(profiles) == 2, profiles  # the implementation's worker and kictl's reference worker
    functions = {name for profile in profiles for (_, _, name) in pstats.Stats(str(profile)).stats}  # type: ignore[attr-defined]
    assert {"call_timed", "reference"} <= functions  # on the CPU the parent stages the inputs itself
