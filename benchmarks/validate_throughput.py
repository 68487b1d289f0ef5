"""How fast is `kictl validate` against the floor of reading, parsing and hashing the same files?

Claim (README.md "Performance"; RESULTS.md "`kictl validate` throughput"): `kictl validate` of 10,000 records takes
2.0-3.7x the floor of reading, parsing and hashing them (aim: within 4x). Machine and command: any machine
(figures: the 2-core dev VM), `python benchmarks/validate_throughput.py --records 10000 --repeat 3`.

Generates a registry of N records (default 10,000) in a temporary folder: the
bundled definitions and workloads, 40 implementations, 5 environments, 2
protocols and runs filling the rest, half of them with 300 kept samples as
`kictl bench` writes them, half without (as imported).  Then it times, each
best of --repeat:

* floor: for every record file, read the bytes, ``json.loads`` them and
  sha256 them (the least any validator must do);
* validate: ``kictl.validate.validate_registry`` in this process (all checks:
  strict parse, normal form, schema, digest, name, references, definitions);
* cli: ``kictl validate`` as a user runs it (a new process, imports included).

Usage: python benchmarks/validate_throughput.py [--records 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kictl import canon  # noqa: E402
from kictl.records import (  # noqa: E402  # noqa: E402
    BenchmarkProtocolSpec,
    BenchmarkRunSpec,
    Comparability,
    CorrectnessProtocol,
    ExecutionEnvironmentSpec,
    Framework,
    Hardware,
    Harness,
    ImplementationSpec,
    LatencyNs,
    Measurement,
    RunCorrectness,
    Software,
    SourceFile,
    SourceNative,
    Timing,
    new_record,
)
from kictl.store.registry import Registry  # noqa: E402
from kictl.validate import validate_registry  # noqa: E402


def _write(registry: Registry, record: object) -> None:
    stored = record  # StoredRecord
    path = registry.record_path(stored.kind, stored.digest)  # type: ignore[attr-defined]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(canon.pretty_bytes(stored.raw))  # type: ignore[attr-defined]


def generate(root: Path, total: int, seed: int = 0) -> Registry:
    rng = random.Random(seed)
    shutil.copytree(REPO / "registry", root / "registry")
    shutil.copytree(REPO / "definitions", root / "definitions")
    registry = Registry(root)
    workloads = [(r.digest, r.model.spec.definition_digest) for r in registry.iter_records(["Workload"])]  # type: ignore[union-attr]
    definitions = sorted({d for _, d in workloads})
    existing = sum(1 for _ in registry.record_files())
    implementations = []
    for index in range(40):
        content = f"import torch\n\n\ndef run(*args):\n    return args[0] * {index}\n"
        spec = ImplementationSpec(
            name=f"impl_{index}",
            project="generated",
            definition_digest=definitions[index % len(definitions)],
            runtime="python",
            entry_point="main.py::run",
            sources=(SourceFile(path="main.py", sha256=hashlib.sha256(content.encode()).hexdigest(), content=content),),
            dependencies={"torch": ">=2.4"},
        )
        record = new_record(spec, name=f"impl_{index}")
        _write(registry, record)
        implementations.append((record.digest, spec.definition_digest))
    environments = []
    for product in ("H200", "B200", "H100 SXM", "A100 SXM 80GB", "L40S"):
        spec_env = ExecutionEnvironmentSpec(
            hardware=Hardware(vendor="NVIDIA", product=product),
            software=Software(framework=Framework(name="pytorch", version="2.11.0"), cuda_toolkit="13.0"),
        )
        record = new_record(spec_env, name=product.lower().replace(" ", "-"))
        _write(registry, record)
        environments.append(record.digest)
    protocols = []
    for timer in ("cuda_graph_replay", "harness_reported"):
        spec_protocol = BenchmarkProtocolSpec(
            harness=Harness(name="kictl"),
            correctness=CorrectnessProtocol(reference="definition reference", comparator="allclose"),
            measurement=Measurement(timer=timer, primary_statistic="median" if timer != "harness_reported" else "mean"),
            comparability=Comparability(family=timer),
        )
        record = new_record(spec_protocol, name=timer)
        _write(registry, record)
        protocols.append(record.digest)
    runs = total - existing - len(implementations) - len(environments) - len(protocols)
    by_definition: dict[str, list[str]] = {}
    for workload, definition in workloads:
        by_definition.setdefault(definition, []).append(workload)
    for index in range(runs):
        implementation, definition = implementations[index % len(implementations)]
        workload = rng.choice(by_definition[definition])
        median = rng.randint(5_000, 5_000_000)
        with_samples = index % 2 == 0
        samples = tuple(sorted(int(median * rng.uniform(0.97, 1.05)) for _ in range(300))) if with_samples else None
        timing = Timing(
            latency_ns=LatencyNs(mean=median, median=median, min=median - 100, max=median + 900, p10=median - 50,
                                 p90=median + 400, stdev=120) if with_samples else LatencyNs(mean=median),
            samples=samples,
            primary_statistic="median" if with_samples else "mean",
        )  # fmt: skip
        spec_run = BenchmarkRunSpec(
            status="passed",
            timing=timing,
            observed_at=f"2026-11-{1 + index % 28:02d}T07:31:00.000Z",
            correctness=RunCorrectness(comparator="allclose", maximum_absolute_error=rng.random() / 100),
            definition_digest=definition,
            workload_digest=workload,
            implementation_digest=implementation,
            protocol_digest=protocols[0 if with_samples else 1],
            environment_digest=environments[index % len(environments)],
            source_native=None
            if with_samples
            else SourceNative(source="flashinfer-bench", metrics={"latency_ms": median / 1e6}),
        )
        _write(registry, new_record(spec_run, name=f"run-{index}"))
    return registry


def floor_pass(registry: Registry) -> int:
    count = 0
    for _, path in registry.record_files():
        data = path.read_bytes()
        json.loads(data)
        hashlib.sha256(data).hexdigest()
        count += 1
    return count


def best_of(repeat: int, func: object) -> tuple[float, float]:
    """The least wall time and the least CPU time (this process and its children) of ``repeat`` calls."""
    walls, cpus = [], []
    for _ in range(repeat):
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = time.process_time() + usage.ru_utime + usage.ru_stime
        start = time.perf_counter()
        func()  # type: ignore[operator]
        walls.append(time.perf_counter() - start)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(time.process_time() + usage.ru_utime + usage.ru_stime - cpu)
    return min(walls), min(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kictl-validate-") as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        registry = generate(root, args.records)
        generated = time.perf_counter() - start
        files = sum(1 for _ in registry.record_files())
        size = sum(path.stat().st_size for _, path in registry.record_files())
        report = validate_registry(registry)
        assert report.ok, report.problems[:5]
        env = dict(os.environ, KICTL_REGISTRY=str(root))
        rows = [
            ("floor: read + json.loads + sha256", best_of(args.repeat, lambda: floor_pass(registry))),
            ("validate_registry (in process)", best_of(args.repeat, lambda: validate_registry(registry))),
            (
                "kictl validate (new process)",
                best_of(
                    args.repeat,
                    lambda: subprocess.run(
                        [sys.executable, "-m", "kictl", "validate"], env=env, check=True, capture_output=True
                    ),
                ),
            ),
        ]
        floor_wall, floor_cpu = rows[0][1]
        print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}")
        print(f"registry: {files} record files, {size / 1e6:.1f} MB (generated in {generated:.1f} s)")
        print()
        print(f"{'measurement':<36} {'wall s':>7} {'rec/s':>7} {'x floor':>8} {'CPU s':>7} {'x floor':>8}")
        print(f"{'-' * 36} {'-' * 7} {'-' * 7} {'-' * 8} {'-' * 7} {'-' * 8}")
        for label, (wall, cpu) in rows:
            ratios = f"{wall / floor_wall:>8.2f} {cpu:>7.2f} {cpu / floor_cpu:>8.2f}"
            print(f"{label:<36} {wall:>7.2f} {files / wall:>7.0f} {ratios}")


if __name__ == "__main__":
    main()
