"""What issue 27's walls cost on the CPU: prints one table (docs/bench.md, "What runs where").

Claim (docs/bench.md "What runs where"; RESULTS.md "The walls' cost and the hardened sandbox"): the hardened
sandbox adds about 0.5 s to a worker's start and the hook checks about 30 µs a call. Machine and command: any
CPU with bubblewrap, run as root, `python benchmarks/walls_cost.py --repeat 3`.

    python benchmarks/walls_cost.py [--repeat 3] [--calls 2000]

Rows:
- a worker's start to ``Ready`` in the hardened sandbox (user namespace, no capabilities, seccomp, the
  package copy) against the same worker unsandboxed (``--no-sandbox``), median of ``--repeat``;
- building the seccomp filter (once per worker);
- the worker's check for foreign hooks (``integrity.foreign_hooks``: at every request, when a call returns
  and before every answer), per check;
- the parent's staging of one timed call's inputs (``staging.Stager.stage``) for ``rmsnorm_h4096`` b64 and
  b1024, and reading them back (``Stager.changed``, after audited calls and the last);
- one whole ``kictl bench`` session (reference and torch_rmsnorm on b64, 1 warm-up, 200 timed calls each),
  sandboxed, and its per-request means (the parent's wall from sending to the answer).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _start(isolation: object, folder: Path) -> float:
    from kictl.bench.runner import WorkerProcess

    worker = WorkerProcess("walls", "cpu", folder, isolation)  # type: ignore[arg-type]
    began = time.perf_counter()
    worker.start()
    took = time.perf_counter() - began
    worker.stop()
    return took


def _per_call(function: object, calls: int) -> float:
    began = time.perf_counter_ns()
    for _ in range(calls):
        function()  # type: ignore[operator]
    return (time.perf_counter_ns() - began) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()

    from kictl.bench import integrity, sandbox, seccomp, staging, wire
    from kictl.bench.session import BenchOptions, run_bench
    from kictl.store import Registry

    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="kictl-walls-") as scratch:
        folder = Path(scratch)
        hardened = sandbox.resolve(False)
        starts = [_start(hardened, folder / f"s{n}") for n in range(args.repeat)]
        bare = [_start(sandbox.Isolation(None), folder / f"n{n}") for n in range(args.repeat)]
        rows.append(("worker start to Ready, hardened sandbox (median)", f"{statistics.median(starts):.2f} s"))
        rows.append(("worker start to Ready, --no-sandbox (median)", f"{statistics.median(bare):.2f} s"))
    rows.append(("seccomp filter, built", f"{_per_call(seccomp.program, args.calls) / 1e3:.1f} µs"))
    hooks = _per_call(integrity.foreign_hooks, args.calls * 10)
    rows.append(("foreign-hook check (3 a call)", f"{hooks / 1e3:.2f} µs"))

    registry = Registry(REPO)
    for label, batch in (("b64", 64), ("b1024", 1024)):
        spec_h = wire.InputSpec(name="hidden_states", kind="random", dtype="bfloat16", shape=(batch, 4096), seed=1)
        spec_w = wire.InputSpec(name="weight", kind="random", dtype="bfloat16", shape=(4096,), seed=2)
        plans = [
            wire.Plan(inputs=(wire.InputSpec(**{**_fields(spec_h), "seed": 10 + n}), spec_w), label=f"set {n}")
            for n in range(4)
        ]
        region = wire.SharedRegion.create("walls", parent_writes=True)
        assert region is not None
        offsets = staging.layout(plans[0], region.size)
        assert offsets is not None
        stager = staging.Stager(region, plans, offsets, plans[0].inputs)
        stage, back = _staging_costs(stager, max(50, args.calls // 20))
        rows.append(
            (f"parent stages one call, rmsnorm {label} ({batch * 4096 * 2 // 1024} KiB)", f"{stage / 1e3:.0f} µs")
        )
        rows.append((f"parent reads it back, rmsnorm {label}", f"{back / 1e3:.0f} µs"))
        del stager
        region.close()

    impls = [
        str(REPO / "implementations/rmsnorm_h4096/reference"),
        str(REPO / "implementations/rmsnorm_h4096/torch_rmsnorm"),
    ]
    options = BenchOptions(
        device="cpu", workloads=("b64",), warmup=1, iterations=200, trials=1, rounds=1, timeout_s=120
    )
    began = time.perf_counter()
    report = run_bench(registry, "rmsnorm_h4096", impls, options)
    wall = time.perf_counter() - began
    rows.append(("bench session, reference + torch_rmsnorm, b64, 200 calls each, sandboxed", f"{wall:.1f} s"))
    for run in report.runs:
        timing = run.run.raw["spec"]["timing"] if run.run else {}
        median = timing.get("latencyNs", {}).get("median")
        rows.append(
            (
                f"  {run.implementation}: status, median (parent's clock)",
                f"{run.status}, {median / 1e6:.2f} ms" if median else run.status,
            )
        )

    width = max(len(name) for name, _ in rows)
    print(f"{'measure'.ljust(width)}  value")
    print(f"{'-' * width}  -----")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")


def _staging_costs(stager: object, calls: int) -> tuple[float, float]:
    """ns per ``stage`` (a random set and shift each time) and per ``changed``."""
    shifts = iter(range(1, 10**9, 7919))
    stage = _per_call(lambda: stager.stage(next(shifts) % 4, next(shifts)), calls)  # type: ignore[attr-defined]
    return stage, _per_call(stager.changed, calls)  # type: ignore[attr-defined]


def _fields(spec: object) -> dict[str, object]:
    import dataclasses

    return {field.name: getattr(spec, field.name) for field in dataclasses.fields(spec)}  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
