"""Start-up cost of read commands as whole processes: CPU time (user + sys) of `kictl ...` on the bundled registry.

Claim (README.md "Performance", CONTRIBUTING.md; RESULTS.md "Start-up"): `kictl --help` and `kictl leaderboard DEF`
take at most 0.3 s of CPU each as whole processes on the bundled registry. Machine and command: any CPU,
`python benchmarks/startup.py --runs 15`.

Copies the bundled registry (registry/ and definitions/) into a fresh git repository, warms the
query index and the kept answers (docs/leaderboards.md "Kept answers": the copy's files are let
age past the two-second racy window first), then runs each command ``--runs`` times as a child
process and reads its CPU time from ``os.wait4`` (the child's own rusage, so that other load on
the machine adds as little as it can).  The rows marked "computed" delete ``.kictl/answers/``
before each run: the board is then computed from the warm index, as on the first call after a
change.  Prints a table: min, median and max CPU seconds, and the median wall time.

    python benchmarks/startup.py [--runs 15] [--kictl .venv/bin/kictl]

The aim (issue 30): ``kictl --help`` and ``kictl leaderboard DEF`` at <= 0.3 s CPU each.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFINITION = "gqa_paged_decode_h32_kv8_d128_ps1"
#: Each command, and whether its kept answer is deleted before each run (the board computed).
COMMANDS: list[tuple[list[str], bool]] = [
    (["--help"], False),
    (["leaderboard", "--help"], False),
    (["leaderboard", DEFINITION], False),
    (["leaderboard", DEFINITION, "--json"], False),
    (["leaderboard", DEFINITION, "--workload", "b16x_kv1024"], False),
    (["history", DEFINITION], False),
    (["definitions", "list"], False),
    # last: deleting the answers folder deletes every command's answer
    (["leaderboard", DEFINITION], True),
    (["leaderboard", DEFINITION, "--workload", "b16x_kv1024"], True),
]


def _bundled(into: Path) -> Path:
    target = into / "bundled"
    for folder in ("registry", "definitions"):
        shutil.copytree(REPO / folder, target / folder, ignore=shutil.ignore_patterns(".kictl"))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "the bundled registry"]):
        subprocess.run(["git", "-C", str(target), *args], check=True, capture_output=True)
    return target


def _once(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """(cpu seconds, wall seconds, exit code) of one run of ``argv``."""
    started = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=sink, stderr=sink)
        _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, time.perf_counter() - started, child.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    default = Path(sys.executable).with_name("kictl")
    parser.add_argument("--kictl", type=Path, default=default, help="the console script (default: next to python)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kictl-startup-") as scratch:
        cwd = _bundled(Path(scratch))
        env = {**os.environ, "KICTL_CONFIG_HOME": str(Path(scratch) / "config")}
        env.pop("KICTL_REGISTRY", None)
        kictl = str(args.kictl.resolve())
        baseline = [sys.executable, "-c", "pass"]
        for _ in range(2):  # the index, the anchor state, then the answers, each once the files are past racy
            time.sleep(2.5)
            for command, _computed in COMMANDS:
                _once([kictl, *command], cwd, env)
        rows = []
        answers = cwd / ".kictl" / "answers"
        for command, computed in [(None, False), *COMMANDS]:
            argv = baseline if command is None else [kictl, *command]
            samples = []
            for _ in range(args.runs):
                if computed:
                    shutil.rmtree(answers, ignore_errors=True)
                samples.append(_once(argv, cwd, env))
            codes = {code for _, _, code in samples}
            cpu = sorted(cpu for cpu, _, _ in samples)
            wall = statistics.median(wall for _, wall, _ in samples)
            label = "python -c pass" if command is None else "kictl " + " ".join(command)
            label = f"`{label}`" + (" (computed)" if computed else "")
            rows.append((label, cpu[0], statistics.median(cpu), cpu[-1], wall, ",".join(map(str, sorted(codes)))))
    print(
        f"# {platform.node()} · {platform.processor() or platform.machine()} · {os.cpu_count()} cores · "
        f"load {os.getloadavg()[0]:.1f} · Python {platform.python_version()} · {args.runs} runs each"
    )
    print()
    print("| command | CPU min | CPU median | CPU max | wall median | exit |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, low, median, high, wall, codes in rows:
        print(f"| {label} | {low:.3f} s | {median:.3f} s | {high:.3f} s | {wall:.3f} s | {codes} |")


if __name__ == "__main__":
    main()
