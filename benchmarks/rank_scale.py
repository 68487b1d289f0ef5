"""Leaderboards at scale: the query index and `kictl leaderboard` on a generated registry.

Claim (README.md "Performance", docs/leaderboards.md; RESULTS.md "Leaderboards at scale"): at 100,000 runs the
index builds at about 4,000-5,300 records/s, a warm leaderboard answers in 0.20-0.24 s in process and an update
after 100 new runs takes 0.34-0.73 s. Machine and command: any machine (figures: the 2-core dev VM), `python
benchmarks/rank_scale.py --keep DIR`.

``rank_scale.py site`` (formerly ``site_scale.py``) measures, on the same generated registry, the static site:
the full ``kictl site build`` (in process, into an empty folder; the query index built first and not counted),
the incremental build after a commit adding 100 runs to one workload, and the site's size. Claim (docs/site.md;
RESULTS.md "The static site"): 162 s for 5,000 runs and 938 s for 20,000; an incremental build 30-48 s.
Command: `python benchmarks/rank_scale.py site --runs 5000 --definitions 5`.

Generates a registry of N runs (default 100,000) over 50 definitions with 20
workloads each, 5 GPUs and 40 implementations per definition, writes the
record files directly (``canon.pretty_bytes``, digests by ``canon.record_digest``)
and commits them to git once.  Generation is not the measurement.  Then:

* the floor: reading the bytes of the record files concerned (``open().read()``);
* the full index build (``QueryIndex.open`` on a registry without ``.kictl/``);
* the incremental update after a commit adding 100 runs;
* ``kictl leaderboard DEF`` warm (index current) and cold (no index), as a
  process, and the same command in-process (without interpreter start-up and imports);
* ``kictl leaderboard DEF --workload W``, warm.

Each figure is printed beside the floor of merely reading the bytes that
operation would need without an index.  Run it once or twice: the machine is shared.

    python benchmarks/rank_scale.py [--runs 100000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kictl import canon  # noqa: E402
from kictl.records import API_VERSION, format_timestamp, record_from_value  # noqa: E402
from kictl.scaffold import create_registry  # noqa: E402

GPUS = ("NVIDIA B200", "NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S")
GPU_SPEED = (0.55, 0.8, 1.0, 1.9, 2.6)
NOW = datetime.now(UTC)
LOAD = " ".join(f"{value:.1f}" for value in os.getloadavg())


def record(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


def source(path: str, content: str) -> dict[str, str]:
    return {"path": path, "sha256": hashlib.sha256(content.encode()).hexdigest(), "content": content}


@dataclass
class Generated:
    root: Path
    definitions: list[str]  # names
    workloads: dict[str, list[tuple[str, str]]]  # definition name -> [(label, digest)]
    implementations: dict[str, list[str]]  # definition name -> digests
    protocol: str
    environments: list[str]
    run_paths: dict[str, list[Path]]  # definition name -> run files
    workload_run_paths: dict[str, list[Path]]  # workload digest -> run files
    files: int
    seconds: float


class Writer:
    """Writes records as registry files: the normal form, named by the digest."""

    def __init__(self, root: Path) -> None:
        self.records = root / "registry" / "records"
        self.count = 0
        self.checked: set[str] = set()

    def write(self, value: dict[str, Any]) -> tuple[str, Path]:
        kind = value["kind"]
        if kind not in self.checked:  # every kind's shape is validated once, by the real loader
            record_from_value(value, source=f"generated {kind}")
            self.checked.add(kind)
        digest = canon.record_digest(value)
        hex_digest = canon.digest_hex(digest)
        folder = self.records / kind / hex_digest[:2]
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{hex_digest}.json"
        path.write_bytes(canon.pretty_bytes(value))
        self.count += 1
        return digest, path


def make_run(
    rng: random.Random, writer: Writer, n: int, workload: str, implementation: str, protocol: str, environment: str,
    base_ns: float,
) -> Path:  # fmt: skip
    status = "passed"
    roll = rng.random()
    if roll < 0.03:
        status = "incorrect_numerical"
    elif roll < 0.05:
        status = "runtime_error"
    spec: dict[str, Any] = {
        "status": status,
        "observedAt": format_timestamp(NOW - timedelta(days=rng.uniform(0, 600))),
        "workloadDigest": workload,
        "implementationDigest": implementation,
        "protocolDigest": protocol,
        "environmentDigest": environment,
    }
    if status != "runtime_error":
        median = max(1, round(base_ns * rng.lognormvariate(0, 0.03)))
        latency: dict[str, int] = {"median": median}
        timing: dict[str, Any] = {"latencyNs": latency, "primaryStatistic": "median"}
        if rng.random() < 0.5:
            latency["p10"] = round(median * 0.98)
            latency["p90"] = round(median * 1.03)
        if rng.random() < 0.1:
            timing["samples"] = sorted(round(median * rng.lognormvariate(0, 0.01)) for _ in range(30))
        spec["timing"] = timing
        spec["correctness"] = {"comparator": "allclose", "maximumAbsoluteError": 0.001, "matchedRatio": 1.0}
    _, path = writer.write(record("BenchmarkRun", f"run-{n:07d}", spec))
    return path


def generate(root: Path, *, runs: int, definitions: int, workloads: int, implementations: int, seed: int) -> Generated:
    started = time.perf_counter()
    rng = random.Random(seed)
    create_registry(root)
    writer = Writer(root)
    protocol, _ = writer.write(
        record(
            "BenchmarkProtocol",
            "kictl-cuda-events-median",
            {
                "harness": {"name": "kictl", "version": "0.1.0"},
                "correctness": {"reference": "definition reference", "comparator": "allclose"},
                "measurement": {"timer": "cuda_event", "primaryStatistic": "median", "l2Flush": True},
                "comparability": {"family": "kictl-cuda-events"},
            },
        )
    )
    environments = [
        writer.write(
            record(
                "ExecutionEnvironment",
                product.replace(" ", "-"),
                {"hardware": {"vendor": "NVIDIA", "product": product}, "software": {"cudaToolkit": "12.8"}},
            )
        )[0]
        for product in GPUS
    ]
    out = Generated(root, [], {}, {}, protocol, environments, {}, {}, 0, 0.0)
    per_definition = runs // definitions
    run_number = 0
    for d in range(definitions):
        n = 64 * (d + 1)
        name = f"gemm_bench_{d:02d}_n{n}_k{n}"
        reference = (
            f"import torch\n\n\ndef run(A, B):\n    return (A.float() @ B.float().t()).to(torch.float16)  # {name}\n"
        )
        definition, _ = writer.write(
            record(
                "Definition",
                name,
                {
                    "name": name,
                    "family": "gemm",
                    "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": n},
                             "K": {"type": "const", "value": n}},
                    "inputs": {"A": {"shape": ["M", "K"], "dtype": "float16"},
                               "B": {"shape": ["N", "K"], "dtype": "float16"}},
                    "outputs": {"C": {"shape": ["M", "N"], "dtype": "float16"}},
                    "reference": reference,
                },
            )
        )  # fmt: skip
        out.definitions.append(name)
        labels = []
        for w in range(workloads):
            m = 1 << (w % 14) if w < 14 else 3 * (w + 1) * 37
            spec = {
                "definitionDigest": definition,
                "axes": {"M": m},
                "inputs": {"A": {"type": "random", "seed": 2 * w}, "B": {"type": "random", "seed": 2 * w + 1}},
            }
            digest, _ = writer.write(record("Workload", f"m{m}", spec))
            labels.append((f"m{m}", digest, m))
        out.workloads[name] = [(label, digest) for label, digest, _ in labels]
        impls = []
        for j in range(implementations):
            impl_name = "flashinfer_wrapper_0" if j == 0 else "reference" if j == 1 else f"impl_{j:02d}"
            content = reference if j == 1 else f"# {impl_name} for {name}\ndef run(A, B):\n    return A @ B.T\n"
            spec = {
                "name": impl_name,
                "definitionDigest": definition,
                "runtime": "python",
                "entryPoint": "kernel.py::run",
                "sources": [source("kernel.py", content)],
            }
            impls.append(writer.write(record("Implementation", impl_name, spec))[0])
        out.implementations[name] = impls
        speed = [rng.uniform(0.6, 3.0) for _ in impls]
        speed[1] = 8.0  # the reference is slow
        groups = workloads * len(environments)
        per_group = max(1, per_definition // groups)
        paths: list[Path] = []
        for label, workload, m in labels:
            base = 2 * m * n * n / 200e12 * 1e9 + 2_000
            for e, environment in enumerate(environments):
                for _ in range(per_group):
                    j = rng.randrange(len(impls))
                    path = make_run(
                        rng,
                        writer,
                        run_number,
                        workload,
                        impls[j],
                        protocol,
                        environment,
                        base * speed[j] * GPU_SPEED[e],
                    )
                    run_number += 1
                    paths.append(path)
                    out.workload_run_paths.setdefault(workload, []).append(path)
            del label
        out.run_paths[name] = paths
    out.files = writer.count
    out.seconds = time.perf_counter() - started
    return out


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True)
    return done.stdout


def commit_all(root: Path, message: str) -> float:
    started = time.perf_counter()
    git(root, "add", "-A", "registry")
    git(root, "-c", "user.name=bench", "-c", "user.email=bench@example.org", "commit", "-q", "-m", message)
    return time.perf_counter() - started


def read_bytes(paths: Sequence[Path]) -> tuple[float, int]:
    """The floor: open and read every file."""
    started = time.perf_counter()
    total = 0
    for path in paths:
        with open(path, "rb") as handle:
            total += len(handle.read())
    return time.perf_counter() - started, total


def all_record_files(root: Path) -> list[Path]:
    out = []
    for dirpath, _, names in os.walk(root / "registry" / "records"):
        out.extend(Path(dirpath) / name for name in names)
    return out


@dataclass
class Measured:
    """The median wall time and CPU time (this process and its children) of some repetitions."""

    wall: float
    cpu: float

    def wall_text(self) -> str:
        return f"{self.wall:.2f} s" if self.wall >= 1 else f"{self.wall * 1e3:.0f} ms"

    def cpu_text(self) -> str:
        return f"{self.cpu:.2f} s" if self.cpu >= 1 else f"{self.cpu * 1e3:.0f} ms"


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(action: Callable[[], Any], repeat: int = 1) -> Measured:
    walls, cpus = [], []
    for _ in range(repeat):
        cpu, started = _cpu(), time.perf_counter()
        action()
        walls.append(time.perf_counter() - started)
        cpus.append(_cpu() - cpu)
    return Measured(statistics.median(walls), statistics.median(cpus))


def kictl_process(root: Path, *args: str) -> Callable[[], None]:
    def run() -> None:
        done = subprocess.run(
            [sys.executable, "-m", "kictl", *args, "--registry", str(root)], cwd=REPO, capture_output=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(done.stderr.decode())

    return run


def kictl_in_process(root: Path, *args: str) -> Callable[[], None]:
    from typer.testing import CliRunner

    from kictl.cli import make_app

    app = make_app()
    runner = CliRunner()

    def run() -> None:
        result = runner.invoke(app, [*args, "--registry", str(root)])
        if result.exit_code != 0:
            raise RuntimeError(result.output)

    return run


def _generator_options(parser: argparse.ArgumentParser) -> None:
    """The generated registry's size and seed, and where to keep it (both parts of this script)."""
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--definitions", type=int, default=50)
    parser.add_argument("--workloads", type=int, default=20)
    parser.add_argument("--implementations", type=int, default=40)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="generate here and keep it (default: a temporary folder)")


def _generate_from(args: argparse.Namespace, root: Path) -> Generated:
    print(f"generating {args.runs:,} runs under {root} ...", file=sys.stderr)
    return generate(
        root,
        runs=args.runs,
        definitions=args.definitions,
        workloads=args.workloads,
        implementations=args.implementations,
        seed=args.seed,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _generator_options(parser)
    args = parser.parse_args(argv)

    from kictl.index.query import QueryIndex
    from kictl.store.registry import Registry

    base = args.keep or Path(tempfile.mkdtemp(prefix="kictl-rank-scale-"))
    root = base / "registry-root"
    if root.exists():
        shutil.rmtree(root)
    made = _generate_from(args, root)
    commit_seconds = commit_all(root, "generated registry")
    print(
        f"generated {made.files:,} files in {made.seconds:.1f} s, committed in {commit_seconds:.1f} s", file=sys.stderr
    )
    time.sleep(2.5)  # let the shard folders' times age past the index's racy window

    registry = Registry(root)
    definition = made.definitions[len(made.definitions) // 2]
    workload_label, workload_digest = made.workloads[definition][5]
    rows: list[tuple[str, str, str, str, str]] = []

    def row(label: str, measured: Measured, floor: str = "-", floor_s: float | None = None) -> None:
        ratio = "-" if floor_s is None else f"{measured.wall / floor_s:,.1f}×"
        rows.append((label, measured.wall_text(), measured.cpu_text(), floor, ratio))

    # floors: reading the bytes each operation needs, without an index
    files = all_record_files(root)
    read_all, total_bytes = read_bytes(files)
    read_definition, definition_bytes = read_bytes(made.run_paths[definition])
    read_workload, workload_bytes = read_bytes(made.workload_run_paths[workload_digest])
    all_floor = f"read all {len(files):,} files ({total_bytes / 1e6:.0f} MB): {read_all:.2f} s"
    definition_runs = len(made.run_paths[definition])
    workload_runs = len(made.workload_run_paths[workload_digest])
    definition_floor = f"read its {definition_runs:,} runs ({definition_bytes / 1e6:.1f} MB): {read_definition:.3f} s"
    workload_floor = f"read its {workload_runs} runs ({workload_bytes / 1e3:.0f} kB): {read_workload * 1e3:.1f} ms"

    # the full build, in-process
    shutil.rmtree(registry.kictl_dir, ignore_errors=True)
    opened: list[Any] = []
    build = measure(lambda: opened.append(QueryIndex.open(registry)))
    parsed = opened[0].report.parsed
    opened.pop().close()
    row(f"full index build: {parsed:,} records, {parsed / build.wall:,.0f}/s", build, all_floor, read_all)

    # kictl leaderboard as a process: cold (no index), then warm; and in-process
    startup = measure(_startup, 3)
    shutil.rmtree(registry.kictl_dir, ignore_errors=True)
    row("leaderboard DEF, cold (process; builds the index)", measure(kictl_process(root, "leaderboard", definition)),
        all_floor, read_all)  # fmt: skip
    row("leaderboard DEF, warm (process)", measure(kictl_process(root, "leaderboard", definition), 3),
        definition_floor, read_definition)  # fmt: skip
    inproc = kictl_in_process(root, "leaderboard", definition)
    inproc()
    row("leaderboard DEF, warm (in-process)", measure(inproc, 5), definition_floor, read_definition)
    by_workload = ("leaderboard", definition, "--workload", workload_label)
    row("leaderboard DEF --workload W, warm (process)", measure(kictl_process(root, *by_workload), 3),
        workload_floor, read_workload)  # fmt: skip
    inproc_w = kictl_in_process(root, *by_workload)
    inproc_w()
    row("leaderboard DEF --workload W, warm (in-process)", measure(inproc_w, 5), workload_floor, read_workload)
    row('start-up: python -c "import kictl.cli" (no command)', startup)

    # incremental: a commit adding 100 runs
    rng = random.Random(args.seed + 1)
    writer = Writer(root)
    new_paths = [
        make_run(rng, writer, 10_000_000 + i, workload_digest, made.implementations[definition][i % 40], made.protocol,
                 made.environments[i % len(made.environments)], 5_000.0)
        for i in range(100)
    ]  # fmt: skip
    commit_all(root, "100 more runs")
    read_new, new_bytes = read_bytes(new_paths)
    incremental = measure(lambda: opened.append(QueryIndex.open(registry)))
    report = opened[0].report
    opened.pop().close()
    row(
        f"incremental update after a commit of 100 runs ({report.mode}: {report.parsed} parsed, "
        f"{report.shards_listed} shard folders listed)",
        incremental,
        f"read the 100 new files ({new_bytes / 1e3:.0f} kB): {read_new * 1e3:.1f} ms",
        read_new,
    )
    row("open a current index (nothing to do)", measure(lambda: QueryIndex.open(registry).close(), 5))

    import sqlite3

    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), "
          f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}; load average before: {LOAD}; "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC")  # fmt: skip
    print(
        f"registry: {made.files:,} records ({args.runs:,} runs, {args.definitions} definitions × {args.workloads} "
        f"workloads, {len(GPUS)} GPUs, {args.implementations} implementations each); "
        f"DEF = {definition}, W = {workload_label}"
    )
    header = ("measurement", "wall", "CPU", "floor: reading the bytes without an index", "wall ÷ floor")
    width = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, width, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in width) + "|")
    for cells in rows:
        print("| " + " | ".join(cell.ljust(w) for cell, w in zip(cells, width, strict=True)) + " |")
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0


def _startup() -> None:
    """Start Python and import kictl's command line: what every kictl command pays first."""
    subprocess.run([sys.executable, "-c", "import kictl.cli"], cwd=REPO, capture_output=True, check=True)


def site_main(argv: Sequence[str] | None = None) -> int:
    """``rank_scale.py site``: `kictl site build` at scale on the generated registry (RESULTS.md "The static site")."""
    parser = argparse.ArgumentParser(prog="rank_scale.py site", description="kictl site build at scale")
    _generator_options(parser)
    args = parser.parse_args(argv)

    from kictl.index.query import QueryIndex
    from kictl.site import build_site
    from kictl.store.registry import Registry

    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    base = args.keep or Path(tempfile.mkdtemp(prefix="kictl-site-scale-"))
    root, out = base / "registry-root", base / "site"
    for folder in (root, out):
        if folder.exists():
            shutil.rmtree(folder)
    made = _generate_from(args, root)
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
    raise SystemExit(site_main(sys.argv[2:]) if sys.argv[1:2] == ["site"] else main())
