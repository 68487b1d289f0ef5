"""An interrupted ``kictl bench`` (Ctrl-C, or SIGTERM from a job runner or a device call's budget) keeps the
workloads it finished, writes nothing of the one running, leaves no worker behind and exits with the shell's
status for the signal (128 + its number).

A real session on the CPU, signalled from outside while a workload's timed calls run, as ``benchmarks/catalogue.py``
stops one at its budget: stop 54's first catalogue call lost a whole definition's runs to a kill.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.bench.conftest import IMPLEMENTATIONS
from tests.conftest import REPO_ROOT

RMSNORM = "rmsnorm_h4096"
#: every workload's timed calls last their whole 3 s budget (the target error is out of reach), so that a signal
#: sent when one begins lands inside it
SLOW = ("--device", "cpu", "--time-budget", "3", "--target-error", "0.000001", "--timings")


def _descendants(pid: int) -> dict[int, bytes]:
    """Every process under ``pid`` now, with its command line (to tell a reused pid apart)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        ppid = next((line.split()[1] for line in status.splitlines() if line.startswith("PPid:")), "0")
        parents[int(entry)] = int(ppid)
    found: dict[int, bytes] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in found:
                try:
                    found[child] = Path(f"/proc/{child}/cmdline").read_bytes()
                except OSError:
                    continue
                frontier.append(child)
    return found


def _still_running(processes: dict[int, bytes]) -> list[int]:
    alive = []
    for pid, cmdline in processes.items():
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes() == cmdline:
                alive.append(pid)
        except OSError:
            continue
    return alive


def _bench_signalled(
    out: Path, workloads: list[str], when: str, signum: int, *extra: str, times: int = 1
) -> tuple[int, str, str, list[int]]:
    """``kictl bench`` signalled with ``signum`` (``times`` times, 50 ms apart) once a progress line contains every
    word of ``when``: its exit status, stdout, stderr and the processes under it then that outlived it."""
    impls = [
        arg for name in ("reference", "torch_rmsnorm") for arg in ("--impl", str(IMPLEMENTATIONS / RMSNORM / name))
    ]
    command = [sys.executable, "-m", "kictl", "bench", RMSNORM, *impls, *SLOW, *extra, "--out", str(out)]
    command += [arg for label in workloads for arg in ("--workload", label)]
    process = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C's SIGINT as a terminal delivers it: a process started with SIGINT ignored (by a test runner's
        # worker) keeps it ignored, and Python then installs no KeyboardInterrupt
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stderr is not None
    seen: list[str] = []
    workers: dict[int, bytes] = {}
    for line in process.stderr:
        seen.append(line)
        if all(word in line for word in when.split()):
            workers = _descendants(process.pid)
            for _ in range(times):
                process.send_signal(signum)
                time.sleep(0.05)
            break
    stdout, rest = process.communicate(timeout=120)
    return process.returncode, stdout, "".join(seen) + rest, _still_running(workers)


def test_sigterm_inside_a_workload_keeps_the_workloads_finished_and_nothing_of_it(tmp_path: Path) -> None:
    """Sent twice, as an impatient runner would: the second, while the workers stop, loses nothing."""
    out = tmp_path / "out"
    status, stdout, stderr, outlived = _bench_signalled(
        out, ["b1", "b7", "b64"], "b7: timed calls", signal.SIGTERM, times=2
    )
    assert status == 128 + signal.SIGTERM, stderr
    assert outlived == []
    assert "warning: interrupted after " in stderr
    assert "1 of 3 workload(s) measured; not finished: b7, b64" in stderr
    (manifest,) = out.glob("bench-*.json")
    records = json.loads(manifest.read_text())
    runs = [record for key, record in records.items() if key.startswith("BenchmarkRun/")]
    workloads = {key: record for key, record in records.items() if key.startswith("Workload/")}
    assert len(runs) == 2  # the reference and torch_rmsnorm, on b1
    assert {record["metadata"]["name"] for record in workloads.values()} == {"b1"}
    assert all(run["spec"]["status"] == "passed" for run in runs)
    digests = {"sha256:" + key.removeprefix("Workload/") for key in workloads}
    assert {run["spec"]["workloadDigest"] for run in runs} == digests
    assert "b7" not in stdout
    assert "b64" not in stdout


def test_ctrl_c_before_any_workload_finished_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    status, _, stderr, outlived = _bench_signalled(out, ["b1", "b7"], "b1: timed calls", signal.SIGINT)
    assert status == 128 + signal.SIGINT, stderr
    assert outlived == []
    assert "interrupted (SIGINT): no workload finished, nothing written" in stderr
    assert not out.exists() or not any(out.iterdir())


def test_sigterm_while_the_workers_start_ends_them_and_writes_nothing(tmp_path: Path) -> None:
    """SIGTERM as soon as the first worker is starting, before any is ready, with unsandboxed workers (no
    bubblewrap to end them with their parent): kictl itself must stop every one, and has nothing to write."""
    out = tmp_path / "out"
    status, _, stderr, outlived = _bench_signalled(
        out, ["b1"], "worker reference starting", signal.SIGTERM, "--no-sandbox"
    )
    assert status == 128 + signal.SIGTERM, stderr
    assert outlived == []
    assert "interrupted (SIGTERM): " in stderr
    assert "nothing written" in stderr
    assert not out.exists() or not any(out.iterdir())
