"""Progress on stderr (kictl/progress.py) and the bench's warning before an impractical job (issue 30)."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest

from kictl.families import Work
from kictl.families.gpus import find_gpu
from kictl.families.practical import LIMIT_S, calls_per_job, estimate_job
from kictl.progress import progress, stamped
from tests.conftest import REPO_ROOT, RunCli

LINE = re.compile(r"^t=\d+\.\ds \S.*$")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_stream_that_is_no_terminal_gets_one_timed_line_per_step() -> None:
    stream = io.StringIO()
    with progress(stream=stream) as say:
        say("worker cpu: starting")
        say("b1_kv73: done (3 passed)")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert all(LINE.match(line) for line in lines), lines
    assert lines[1].endswith(" b1_kv73: done (3 passed)")


def test_a_terminal_gets_the_live_line_and_lines_on_request() -> None:
    live = _Terminal()
    with progress(stream=live) as say:
        say("b1_kv73: timed calls")
    assert not any(LINE.match(line) for line in live.getvalue().splitlines())  # rich's status, not lines
    asked = _Terminal()
    with progress(stream=asked, lines=True) as say:
        say("b1_kv73: timed calls")
    assert LINE.match(asked.getvalue().strip())


def test_stamped_counts_from_the_start() -> None:
    assert stamped("x", 0.0).startswith("t=")
    assert re.fullmatch(r"t=0\.\ds x", stamped("x", __import__("time").perf_counter()))


def test_the_estimate_is_the_slower_of_bytes_and_flops() -> None:
    calls = calls_per_job(warmup=1, rounds=3, iterations=None, trials=1)
    assert calls == 24
    gemm = Work(bytes=3 * 8192 * 4096 * 2, flops=2 * 8192 * 4096 * 4096, compute_dtype="bfloat16")
    cpu = estimate_job("m8192", gemm, gpu=None, threads=1, calls=calls)
    assert cpu.per_call_s == pytest.approx(2 * 8192 * 4096 * 4096 / 1e11)
    assert cpu.impractical
    assert cpu.total_s > LIMIT_S
    text = cpu.warning()
    assert "m8192" in text
    assert "275 GFLOP" in text
    assert "CPU with 1 thread" in text
    assert "--workload" in text
    assert not estimate_job("m8192", gemm, gpu=None, threads=8, calls=calls).impractical  # 8 threads: 8× the rate
    small = Work(bytes=4096 * 2 * 2, flops=None, compute_dtype="float16")
    assert not estimate_job("h4096", small, gpu=None, threads=1, calls=calls).impractical
    h200 = find_gpu("H200")
    assert h200 is not None
    on_gpu = estimate_job(
        "m8192", gemm, gpu=h200, threads=1, calls=calls_per_job(warmup=10, rounds=3, iterations=None, trials=1)
    )
    assert not on_gpu.impractical
    assert on_gpu.per_call_s < 1e-3


@pytest.fixture
def bundled(tmp_path: Path) -> Path:
    target = tmp_path / "bundled"
    for folder in ("registry", "definitions"):
        shutil.copytree(REPO_ROOT / folder, target / folder, ignore=shutil.ignore_patterns(".kictl"))
    return target


def test_bench_warns_before_an_impractical_job_and_not_before_a_small_one(cli: RunCli, bundled: Path) -> None:
    # the implementation does not exist: the bench stops at it, after the warning that comes first
    big = cli(
        "bench",
        "gqa_paged_prefill_causal_h20_kv4_d128_ps64",
        "--impl",
        bundled / "none.py",
        "--device",
        "cpu",
        "--workload",
        "q1117_p1117",
        "--registry",
        bundled,
    )
    assert big.exit_code == 2, big.output
    first = big.stderr.splitlines()[0]
    assert first.startswith("warning: workload q1117_p1117: 811 GFLOP"), big.stderr
    small = cli("bench", "rmsnorm_h4096", "--impl", bundled / "none.py", "--device", "cpu", "--registry", bundled)
    assert small.exit_code == 2
    assert "warning" not in small.stderr


def test_a_step_that_says_how_far_it_is_says_what_is_left() -> None:
    """Issue 45: selftest, rerun and site build show a line per step on a log and a bar on a terminal."""
    from kictl.progress import bar, remaining

    assert remaining("1/4 sessions done; now rmsnorm-cpu", 30.0) == (1, 4, "~90 s left")
    assert remaining("40/122 pages", 400.0) == (40, 122, "~14 min left")
    assert remaining("0/3 groups done", 5.0) == (0, 3, "time left unknown yet")
    assert remaining("3/3 sessions done", 5.0) == (3, 3, "last step")
    for plain in ("b1_kv73: done (3 passed)", "2026/12/06", "registry/records/3/4", "5/3 odd", "1.5/2"):
        assert remaining(plain, 5.0) is None, plain
    assert bar(5, 20, width=8) == "[##------]"
    assert bar(0, 3, width=4) == "[----]"
    stream = io.StringIO()
    with progress(stream=stream) as say:
        say("1/2 groups done; now rmsnorm_h4096: rerunning 2 run(s)")
    assert re.fullmatch(r"t=\d\.\ds 1/2 groups done; now rmsnorm_h4096: rerunning 2 run\(s\) \(1 of 2, ~\d+ s left\)\n",
                        stream.getvalue())  # fmt: skip
    live = _Terminal()
    with progress(stream=live) as say:
        say("61/122 pages")
        import time

        time.sleep(0.2)  # rich's status draws a few times a second
    assert "[##########----------] 61/122 pages" in live.getvalue(), live.getvalue()
