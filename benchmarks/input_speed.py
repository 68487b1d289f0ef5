#!/usr/bin/env python
"""How long a worker takes to draw a workload's input sets (issue 16: a suite's preparation phase).

Run from the repository root (any machine; inputs are drawn on the CPU)::

    python benchmarks/input_speed.py [--repeats 3] [--workload b8x_q512_kv2048 ...]

For each workload of ``gqa_paged_prefill_causal_h24_kv4_d128_ps1``, the five plans an armed worker makes (the
values ``setup()`` sees and the default 4 timed input sets) are drawn on the CPU one input after another
(``inputs.materialize_spec``) and as a worker now draws them (``inputs.materialize_plans``: large inputs in
threads), with torch on one thread as in a worker; the two must give the same values. Prints a table of the
median of ``--repeats`` in seconds; nothing is written.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFINITION = "gqa_paged_prefill_causal_h24_kv4_d128_ps1"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workload", action="append", help="workload label (default: all of the definition's)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    import torch

    from kictl.bench.inputs import materialize_plans, materialize_spec, plan_inputs, to_wire, with_secret_values
    from kictl.bench.options import usable_cpus
    from kictl.bench.session import select_workloads
    from kictl.definitions import signature
    from kictl.records import DefinitionSpec
    from kictl.store import Registry

    torch.set_num_threads(1)
    registry = Registry(ROOT)
    definition = registry.resolve(DEFINITION, ["Definition"])
    spec = definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    order = signature(spec, source=DEFINITION).inputs
    print(f"{usable_cpus()} CPUs")
    print("| workload | random values a set | one after another s | in threads s | same values |")
    print("| --- | ---: | ---: | ---: | --- |")
    for workload in select_workloads(registry, definition, args.workload or []):
        base = plan_inputs(spec, workload, order, registry.read_blob)
        plans = [to_wire(with_secret_values(base, "secret", f"set {n}"), f"set {n}") for n in range(5)]
        values = sum(math.prod(item.shape) for item in plans[0].inputs if item.kind == "random")
        took: dict[str, list[float]] = {"one": [], "threads": []}
        for _ in range(args.repeats):
            began = time.perf_counter()
            one = [[materialize_spec(item, "cpu") for item in plan.inputs] for plan in plans]
            took["one"].append(time.perf_counter() - began)
            began = time.perf_counter()
            threaded = materialize_plans(plans, "cpu")
            took["threads"].append(time.perf_counter() - began)
        same = all(
            torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
            for first, second in zip(one, threaded, strict=True)
            for a, b in zip(first, second, strict=True)
        )
        print(
            f"| {workload.name} | {values} | {statistics.median(took['one']):.2f} | "
            f"{statistics.median(took['threads']):.2f} | {'yes' if same else 'NO'} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
