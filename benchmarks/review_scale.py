"""`kictl review` of a large pull request: every run's envelope verified, floors, the leaderboard diff.

Claim (docs/review.md; RESULTS.md "`kictl review` of a large pull request"): a PR adding 1,000 runs, each
with its submission envelope, is reviewed in under 30 s on a 2-core machine (a few seconds when it is quiet).
Machine and command: any machine (figures: the 2-core dev VM), `python benchmarks/review_scale.py
[--runs 1000] [--repeat 3]`.

Builds the review tests' base registry (``tests/review/conftest.py``: the bundled registry, a trust root
with a maintainer, a submitter and a verifier, one measured GEMM run) in a temporary git repository, then a
branch ``pr`` adding N runs over 8 implementations and 2 GPUs, each with a DSSE envelope signed by the
submitter, and one impossible run (1 µs) that the review must flag.  Building is not the measurement.  Then
times ``kictl review --base main --format json`` as a whole process (what a CI job pays) and in process
(without interpreter start-up), ``--repeat`` times each, and checks every time that the review added N + 1
runs and flagged exactly the impossible one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from typer.testing import CliRunner  # noqa: E402

from kictl import canon  # noqa: E402
from kictl.cli import make_app  # noqa: E402
from tests import factories  # noqa: E402
from tests.review.conftest import Pr, build_base, envelope  # noqa: E402


def build(root: Path, runs: int) -> Pr:
    records = build_base(root)
    pr = Pr(root, records)
    environments = [factories.environment(product) for product in ("H100", "B200")]
    definition_digest = canon.record_digest(records.definition)
    implementations = [factories.implementation(definition_digest, name=f"kernel_{i}") for i in range(8)]
    for raw in (*environments, *implementations):
        pr.add_record(raw)
    labels = sorted(records.workloads)
    for number in range(runs):
        run = records.run_like(
            workload=labels[number % len(labels)],
            median_ns=5_000_000 + number,
            implementationDigest=canon.record_digest(implementations[number % len(implementations)]),
            environmentDigest=canon.record_digest(environments[number % len(environments)]),
        )
        pr.add_record(run)
        pr.add_envelope(run, envelope(run))
    below = records.run_like(median_ns=1_000)
    pr.add_record(below)
    pr.add_envelope(below, envelope(below))
    pr.commit(f"{runs + 1:,} runs")
    return pr


def check(output: str, runs: int) -> None:
    document = json.loads(output)
    assert document["added"]["records"]["BenchmarkRun"] == runs + 1, document["added"]
    assert document["added"]["attestations"] == runs + 1, document["added"]
    assert [lint["code"] for lint in document["lints"]] == ["below-floor"], document["lints"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    args_review = ["review", "--base", "main", "--format", "json"]
    with tempfile.TemporaryDirectory(prefix="review-scale-") as scratch:
        root = Path(scratch) / "registry-repo"
        started = time.perf_counter()
        pr = build(root, args.runs)
        built = time.perf_counter() - started
        process: list[float] = []
        in_process: list[float] = []
        kictl = [sys.executable, "-m", "kictl", *args_review, "--registry", str(root)]
        runner = CliRunner()
        for _ in range(args.repeat):
            started = time.perf_counter()
            done = subprocess.run(kictl, capture_output=True, text=True, check=False)
            process.append(time.perf_counter() - started)
            assert done.returncode == 1, done.stderr
            check(done.stdout, args.runs)
            started = time.perf_counter()
            result = runner.invoke(make_app(), [*args_review, "--registry", str(root)])
            in_process.append(time.perf_counter() - started)
            assert result.exit_code == 1, result.output
            check(result.stdout, args.runs)
        pr.repo.close()
    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    print(
        f"# {platform.node()}, {os.cpu_count()} CPUs, load {load}; PR of {args.runs + 1:,} runs built in {built:.1f} s"
    )
    print("| measurement | aim | best | median | worst |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name, times in (("`kictl review`, a whole process", process), ("`kictl review`, in process", in_process)):
        row = (min(times), statistics.median(times), max(times))
        print(f"| {name} | under 30 s | " + " | ".join(f"{value:.2f} s" for value in row) + " |")


if __name__ == "__main__":
    main()
