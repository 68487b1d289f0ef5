"""Limits per worker, set by the harness: memory, tasks, tmpfs, log, the CPUs it was given (issue 40).

The corpus's ``limits-cpu`` session (tests/assets/cheats/corpus.json) runs the definition's reference, the torch
implementation, the honest entries and the ``lim_`` cheats side by side, sandboxed, with small limits; every
entry must end as the corpus says (``resource_limit: <resource>`` in a ``runtime_error``'s detail, or the check
named) and every honest run must pass beside them.  ``gemm-cpu-threads``: a numpy GEMM with its default BLAS
threads passes ``noWorkOutsideCalls``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from kictl.bench.judge import cgroup, options, sandbox
from kictl.errors import UsageError
from kictl.selftest import SessionSpec, judge, load_corpus
from tests.bench.conftest import CHEATS, IMPLEMENTATIONS, SANDBOX, rows

CORPUS = load_corpus(CHEATS)


def _group_available() -> bool:
    probe = cgroup.SandboxGroup.create("probe", cgroup.Limits(memory_bytes=cgroup.GIB))
    if probe is None:
        return False
    enforced = probe.enforced
    probe.remove()
    return set(enforced) == {"memory", "tasks"}


GROUPS = _group_available()
needs_sandbox_and_group = pytest.mark.skipif(
    not (SANDBOX and GROUPS), reason="needs bubblewrap and a cgroup with memory and pids controllers (root)"
)


def _arguments(spec: SessionSpec) -> list[str]:
    names = {"rounds": "--rounds", "warmup": "--warmup", "iterations": "--iterations", "timeoutS": "--timeout"}
    found = ["--device", spec.device]
    for workload in spec.workloads:
        found += ["--workload", workload]
    for key, value in spec.options.items():
        found += [names.get(key, "--worker-limits"), str(value)]
    return found


def _session(bench_module: Callable[..., Result], session: str, *honest: Path) -> Result:
    """The corpus ``session``'s entries beside the ``honest`` implementations, with the session's options."""
    spec = CORPUS.corpus.sessions[session]
    members = sorted(name for name, entry in CORPUS.corpus.entries.items() if session in entry.expect)
    impls = [arg for path in honest for arg in ("--impl", path)]
    impls += [arg for name in members for arg in ("--impl", CHEATS / f"{name}.py")]
    return bench_module(spec.definition, *impls, *_arguments(spec))


def _by_implementation(result: Result) -> dict[str, dict[str, Any]]:
    return {row["implementation"].rsplit("_", 1)[0]: row for row in rows(result)}


@pytest.fixture(scope="module")
def limits_session(bench_module: Callable[..., Result]) -> Result:
    folder = IMPLEMENTATIONS / "rmsnorm_h4096"
    return _session(bench_module, "limits-cpu", folder / "reference", folder / "torch_rmsnorm")


@needs_sandbox_and_group
@pytest.mark.heavy
def test_every_limit_cheat_fails_naming_the_limit_and_the_honest_pass(limits_session: Result) -> None:
    found = _by_implementation(limits_session)
    for name in ("reference", "torch_rmsnorm"):
        assert found[name]["status"] == "passed", found[name]
    missed = {
        name: (found[name]["status"], found[name]["statusDetail"])
        for name, entry in CORPUS.corpus.entries.items()
        if "limits-cpu" in entry.expect
        and not judge(entry.expect["limits-cpu"], found[name]["status"], found[name]["statusDetail"])
    }
    assert missed == {}
    assert all(row["run"] for row in found.values()), "a run lost its record"
    assert "Traceback" not in limits_session.stderr, limits_session.stderr


@needs_sandbox_and_group
@pytest.mark.heavy
def test_a_log_flood_is_named_with_its_cap(limits_session: Result) -> None:
    """The parent stops reading a worker's log at its cap (1 MiB here) and the record says so."""
    detail = _by_implementation(limits_session)["lim_log_flood"]["statusDetail"]
    assert "log: the worker wrote more than its limit of 1 MiB" in detail, detail


@needs_sandbox_and_group
@pytest.mark.heavy
def test_a_numpy_gemm_with_default_threads_passes(bench_module: Callable[..., Result]) -> None:
    # the definition's reference beside the entries (what the assertions below read): a fifth worker for
    # torch_matmul, asserted nothing of, cost 2-3 s of the 2-core VM
    folder = IMPLEMENTATIONS / "gemm_n4096_k4096"
    result = _session(bench_module, "gemm-cpu-threads", folder / "reference")
    found = _by_implementation(result)
    assert found["reference"]["status"] == "passed", found["reference"]
    row = found["lim_honest_numpy_gemm"]
    assert row["status"] == "passed", row
    assert row["run"] is not None
    # a table of a set's prefix sums no longer answers a rolled call: each input has a shift of its own, and the
    # table GEMM does all its calls honestly (before: 5 ms against 141 ms honest, every output correct)
    table = found["lim_table_gemm_from_rolls"]
    assert table["status"] == "passed", table
    assert table["latencyNs"] > 0.5 * row["latencyNs"], (table["latencyNs"], row["latencyNs"])


@needs_sandbox_and_group
@pytest.mark.heavy
def test_setup_finds_no_seed_of_the_timed_sets(limits_session: Result) -> None:
    """The cheat skips a 30 ms stand-in for its work in every call only where setup() found the timed sets' plans
    (in its callers' frames or through gc): on the CPU the worker is never sent them, and it pays the 30 ms."""
    found = _by_implementation(limits_session)
    cheat, honest = found["lim_seeds_from_setup_frame"], found["torch_rmsnorm"]
    assert cheat["status"] == "passed", cheat
    assert cheat["latencyNs"] > honest["latencyNs"] + 15_000_000, (cheat["latencyNs"], honest["latencyNs"])


def test_worker_limits_parse_with_units_and_keep_the_defaults() -> None:
    limits = options.parse_limits("memory=768MiB, tasks=64,log=64KiB")
    default = cgroup.Limits.default()
    assert (limits.memory_bytes, limits.tasks, limits.log_bytes) == (768 << 20, 64, 64 << 10)
    assert limits.tmpfs_bytes == default.tmpfs_bytes
    for bad in ("memory=lots", "disk=1GiB", "memory=1MiB", "tasks=2"):
        with pytest.raises(UsageError):
            options.parse_limits(bad)


def test_the_thread_pools_are_sized_to_the_worker_whatever_kictls_environment_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "64")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "64")
    env = sandbox.worker_environment(sandbox.Isolation(None), threads=2)
    for name in sandbox.THREAD_VARIABLES:
        assert env[name] == "2"
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"


def test_a_group_holds_its_limits_and_counts_what_it_refused(tmp_path: Path) -> None:
    """A real group: a process that forks past ``pids.max`` is refused, and ``breaches`` names the limit."""
    import subprocess
    import sys

    group = cgroup.SandboxGroup.create("limits", cgroup.Limits(memory_bytes=512 << 20, tasks=16))
    if group is None or "tasks" not in group.enforced:
        if group is not None:
            group.remove()
        pytest.skip("no cgroup with a pids controller here")
    try:
        fork = (
            "import os, time\n"
            "kids = []\n"
            "try:\n"
            "    for _ in range(64):\n"
            "        pid = os.fork()\n"
            "        if pid == 0:\n"
            "            time.sleep(0.5); os._exit(0)\n"
            "        kids.append(pid)\n"
            "except OSError:\n"
            "    pass\n"
            "for pid in kids: os.waitpid(pid, 0)\n"
            "print(len(kids))\n"
        )
        done = subprocess.run(
            group.wrap([sys.executable, "-c", fork], None), capture_output=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stderr
        assert int(done.stdout) < 16
        found = group.breaches()
        assert any(item.startswith("processes: the sandbox reached its limit of 16 tasks") for item in found), found
    finally:
        group.remove()


def test_the_log_stops_at_its_cap(tmp_path: Path) -> None:
    from kictl.bench.judge.runner import _Log

    log = _Log(tmp_path / "w.log", 100_000)
    written = 0
    try:
        for _ in range(64):
            written += os.write(log.write_end, b"z" * 65536)
    except BrokenPipeError:
        pass
    log.join(5)
    assert log.exceeded
    assert (tmp_path / "w.log").stat().st_size == 100_000
    assert written < 64 * 65536  # the writer was stopped, not read without end


def test_the_corpus_sessions_of_the_limits_are_known() -> None:
    assert json.loads((CHEATS / "corpus.json").read_text())["sessions"]["limits-cpu"]["options"]["workerLimits"]


def test_each_random_input_of_a_call_gets_a_shift_of_its_own() -> None:
    """A GEMM's two operands are rolled apart (a table of one set's row products no longer lines up), while the
    first input keeps the call's shift and shift 0 (the correctness rounds) leaves every input as drawn."""
    import torch

    from kictl.bench.wire.values import _rolled, input_shift

    assert input_shift(12345, 0) == 12345
    assert [input_shift(0, k) for k in range(4)] == [0, 0, 0, 0]
    shifts = {input_shift(12345, k) for k in range(8)}
    assert len(shifts) == 8
    values = torch.arange(4096)
    assert torch.equal(_rolled(values, 7, 0), values.roll(7))
    assert torch.equal(_rolled(values, 7, 1), values.roll(input_shift(7, 1) % 4096))
    assert not torch.equal(_rolled(values, 7, 1), _rolled(values, 7, 0))


@pytest.mark.heavy
@pytest.mark.skipif(not SANDBOX, reason="needs bubblewrap")
def test_without_a_cgroup_a_cpu_workers_memory_is_an_rlimit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no group can be made, every process of a CPU worker's sandbox gets ``RLIMIT_DATA`` before the
    implementation is imported, and its /tmp its size all the same."""
    from kictl.bench.judge.runner import WorkerProcess

    monkeypatch.setattr(cgroup.SandboxGroup, "create", classmethod(lambda cls, label, limits=None: None))
    limits = cgroup.Limits(memory_bytes=3 * cgroup.GIB, tmpfs_bytes=32 * cgroup.MIB)
    worker = WorkerProcess("nogroup", "cpu", tmp_path, sandbox.resolve(False), limits=limits)
    try:
        worker.start()
        assert worker.group is None
        assert worker.worker_pid is not None
        text = Path(f"/proc/{worker.worker_pid}/limits").read_text()
        line = next(line for line in text.splitlines() if line.startswith("Max data size"))
        assert line.split()[3:5] == [str(3 * cgroup.GIB), str(3 * cgroup.GIB)], line
        tmp = os.statvfs(f"/proc/{worker.worker_pid}/root/tmp")
        assert tmp.f_blocks * tmp.f_frsize == 32 * cgroup.MIB
    finally:
        worker.stop()
