"""`kictl site build` at scale: the registry of benchmarks/rank_scale.py (default 100,000 runs).

Claim (docs/site.md; RESULTS.md "The static site"): `kictl site build` takes 162 s for 5,000 runs and 938 s for
20,000; an incremental build after 100 new runs 30-48 s. Machine and command: any machine (figures: the 2-core dev
VM), `python benchmarks/site_scale.py --runs 5000 --definitions 5`.

Generates the registry exactly as rank_scale.py does (its ``generate``), commits it, then measures:

* the full site build (``build_site``, in-process, into an empty folder; the query index is
  built first and not counted);
* the incremental build after a commit adding 100 runs to one workload;
* the size of the site (files, bytes).

    python benchmarks/site_scale.py [--runs 100000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from rank_scale import Writer, commit_all, generate, make_run  # noqa: E402


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime + children.ru_utime + children.ru_stime


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--definitions", type=int, default=50)
    parser.add_argument("--workloads", type=int, default=20)
    parser.add_argument("--implementations", type=int, default=40)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="generate here and keep it (default: a temporary folder)")
    args = parser.parse_args(argv)

    from kictl.index import QueryIndex
    from kictl.site import build_site
    from kictl.store import Registry

    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    base = args.keep or Path(tempfile.mkdtemp(prefix="kictl-site-scale-"))
    root, out = base / "registry-root", base / "site"
    for folder in (root, out):
        if folder.exists():
            shutil.rmtree(folder)
    print(f"generating {args.runs:,} runs under {root} ...", file=sys.stderr)
    made = generate(
        root,
        runs=args.runs,
        definitions=args.definitions,
        workloads=args.workloads,
        implementations=args.implementations,
        seed=args.seed,
    )
    commit_all(root, "generated registry")
    registry = Registry(root)
    QueryIndex.open(registry).close()  # the index build is rank_scale.py's measurement, not this one's
    print(f"generated {made.files:,} files; building the site ...", file=sys.stderr)

    def progress(line: str) -> None:
        print(f"  {line}", file=sys.stderr)

    started, cpu = time.perf_counter(), _cpu()
    full = build_site(registry, out, progress=progress)
    full_wall, full_cpu = time.perf_counter() - started, _cpu() - cpu
    files = [path for path in out.rglob("*") if path.is_file()]
    size = sum(path.stat().st_size for path in files)

    definition = made.definitions[len(made.definitions) // 2]
    _, workload_digest = made.workloads[definition][5]
    rng = random.Random(args.seed + 1)
    writer = Writer(root)
    for i in range(100):
        make_run(rng, writer, 10_000_000 + i, workload_digest, made.implementations[definition][i % 40],
                 made.protocol, made.environments[i % len(made.environments)], 5_000.0)  # fmt: skip
    commit_all(root, "100 more runs")
    started, cpu = time.perf_counter(), _cpu()
    incremental = build_site(registry, out, incremental=True)
    inc_wall, inc_cpu = time.perf_counter() - started, _cpu() - cpu

    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"load average before: {load}; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")  # fmt: skip
    print(f"registry: {made.files:,} records ({args.runs:,} runs, {args.definitions} definitions)")
    print(f"full build: {full.pages:,} pages, {len(files):,} files, {size / 1e6:,.0f} MB: "
          f"{full_wall:,.1f} s wall, {full_cpu:,.1f} s CPU ({full.verified:,} runs verified)")  # fmt: skip
    print(f"incremental after a commit of 100 runs: {incremental.rendered:,} of {incremental.pages:,} pages "
          f"rendered, {incremental.verified} runs verified: {inc_wall:,.1f} s wall, {inc_cpu:,.1f} s CPU")  # fmt: skip
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
