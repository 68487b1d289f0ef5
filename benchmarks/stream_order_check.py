#!/usr/bin/env python
"""Stream ordering by CUPTI's dependency records on a GPU (docs/bench.md, "Stream ordering").

Claim (README.md "Benchmarking", docs/bench.md "Stream ordering"; RESULTS.md "Stream ordering on a GPU"):
CUPTI's dependency records flag work on a side stream that is never joined, and flag neither single-stream nor
fork-join code. Machine and command: the H200, `bash benchmarks/device.sh stream_order_check.py`.

Run from the repository root on the GPU machine, with the ``gpu`` extra's CUPTI packages importable
(carried wheels: see docs/bench.md)::

    python benchmarks/stream_order_check.py --out "$OUT"

Each pattern below is called ``--calls`` times the way ``CuptiTimer`` calls ``run()``: a device
synchronisation, a spin on the calling stream, the call, the end marker (a spin of ~0 cycles), a
synchronisation; then ``attribute(..., dependencies=...)`` on what CUPTI delivered.  Each pattern
says whether its work on other streams must be found *unjoined* (in every call) or never.  It checks
on the real driver what the CPU tests assume of CUPTI: that event records, stream waits and host
synchronisations arrive with their correlation ids, stream ids and sync ids matching the kernels',
and that a CUDA graph replayed on the calling stream (``graph_replay``) is not taken for side-stream work.

Writes ``stream_order.json`` (per pattern: expectation, calls, unjoined and time-rule counts, the
first call's dependency records) to ``--out``; prints a table; exits 1 when an expectation fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SPIN_NS = 50_000


def _patterns(torch: Any, x: Any) -> dict[str, tuple[bool, Callable[[], Any]]]:
    """name -> (its side-stream work must be unjoined, the call)."""
    side = torch.cuda.Stream()
    other = torch.cuda.Stream()
    event = torch.cuda.Event()

    def work() -> Any:
        return (x * 2 + 1).relu().sum(dim=0)

    def single() -> Any:
        return work()

    def fork_join() -> Any:
        cur = torch.cuda.current_stream()
        side.wait_stream(cur)
        with torch.cuda.stream(side):
            y = work()
        cur.wait_stream(side)
        return y

    def side_cheat() -> Any:  # as tests/assets/cheats/attention_side_stream.py: a host sync, then no join
        x[:4, 0].tolist()
        with torch.cuda.stream(side):
            return work()

    def no_fork() -> Any:
        with torch.cuda.stream(side):
            y = work()
        torch.cuda.current_stream().wait_stream(side)
        return y

    def no_join() -> Any:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            return work()

    def side_synchronize() -> Any:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            y = work()
        side.synchronize()
        return y

    def device_synchronize() -> Any:
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            y = work()
        torch.cuda.synchronize()
        return y

    def event_synchronize() -> Any:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            y = work()
        event.record(side)
        event.synchronize()
        return y

    def chain() -> Any:
        cur = torch.cuda.current_stream()
        side.wait_stream(cur)
        other.wait_stream(side)
        with torch.cuda.stream(other):
            y = work()
        side.wait_stream(other)
        cur.wait_stream(side)
        return y

    def re_recorded() -> Any:  # the calling stream waits on a record made before the work
        cur = torch.cuda.current_stream()
        side.wait_stream(cur)
        event.record(side)
        cur.wait_event(event)
        with torch.cuda.stream(side):
            y = work()
        event.record(side)
        return y

    found: dict[str, tuple[bool, Callable[[], Any]]] = {
        "single": (False, single),
        "fork_join": (False, fork_join),
        "side_cheat": (True, side_cheat),
        "no_fork": (True, no_fork),
        "no_join": (True, no_join),
        "side_synchronize": (False, side_synchronize),
        "device_synchronize": (False, device_synchronize),
        "event_synchronize": (False, event_synchronize),
        "chain": (False, chain),
        "re_recorded": (True, re_recorded),
    }
    graph = torch.cuda.CUDAGraph()
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):
        work()
    torch.cuda.current_stream().wait_stream(warm)
    with torch.cuda.graph(graph):
        graph_output = work()

    def graph_replay() -> Any:  # a graph's kernels must count as the launching stream's, whatever CUPTI names
        graph.replay()
        return graph_output

    found["graph_replay"] = (False, graph_replay)
    blocking = _blocking_stream(torch)
    if blocking is not None and torch.cuda.current_stream().cuda_stream == 0:

        def legacy_blocking() -> Any:  # a stream created with default flags: ordered with the NULL stream
            with torch.cuda.stream(blocking):
                return work()

        found["legacy_blocking"] = (False, legacy_blocking)
    return found


def _blocking_stream(torch: Any) -> Any:
    """A stream created by ``cudaStreamCreate`` (default flags: blocking), or None without cuda-bindings."""
    try:
        from cuda.bindings import runtime
    except ImportError:
        print("cuda-bindings missing: no blocking-stream pattern", file=sys.stderr)
        return None
    error, stream = runtime.cudaStreamCreate()
    if int(error) != 0:
        print(f"cudaStreamCreate: {error}", file=sys.stderr)
        return None
    return torch.cuda.ExternalStream(int(stream))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()

    import torch

    from kictl.bench.cupti_attribution import attribute
    from kictl.bench.cupti_model import Window
    from kictl.bench.cupti_timer import CuptiCollector
    from kictl.bench.timing import bind_originals, spin_cycles_per_ns

    torch.cuda.init()  # type: ignore[no-untyped-call]
    bind_originals()
    collector = CuptiCollector()
    collector.start()
    print(f"dependencies_available={collector.dependencies_available} ({collector.dependencies_error})")
    cycles = spin_cycles_per_ns("cuda:0") or 1.0
    x = torch.randn(512, 512, device="cuda:0")
    legacy = torch.cuda.current_stream().cuda_stream == 0
    rows: list[dict[str, Any]] = []
    failed = False
    for name, (cheat, call) in _patterns(torch, x).items():
        for _ in range(3):  # warm-up: allocations, cuBLAS handles
            call()
        torch.cuda.synchronize()
        collector.drain_all()
        unjoined = unordered = calls_unjoined = 0
        first: Any = None
        for _ in range(args.calls):
            torch.cuda.synchronize()
            collector.drain_all()
            begin = collector.now()
            torch.cuda._sleep(int(SPIN_NS * cycles))
            call()
            marker_host = collector.now()
            torch.cuda._sleep(1)
            torch.cuda.synchronize()
            window = Window(begin, collector.now(), SPIN_NS, end_marker=True, marker_host_ns=marker_host)
            activities, deps = collector.drain_all()
            found = attribute(activities, [window], dependencies=deps, legacy_calling_stream=legacy)
            if first is None and deps is not None:
                first = {
                    "activities": [dataclasses.asdict(a) for a in activities],
                    "records": [dataclasses.asdict(r) for r in deps.records],
                    "syncs": [dataclasses.asdict(s) for s in deps.syncs],
                    "stream_flags": {str(k): v for k, v in deps.stream_flags.items()},
                }
            unjoined += len(found.unjoined)
            calls_unjoined += bool(found.unjoined)
            unordered += len(found.unordered)
        ok = calls_unjoined == (args.calls if cheat else 0)
        failed |= not ok
        rows.append(
            {
                "pattern": name,
                "mustBeUnjoined": cheat,
                "calls": args.calls,
                "callsUnjoined": calls_unjoined,
                "unjoined": unjoined,
                "timeRuleUnordered": unordered,
                "ok": ok,
                "firstCall": first,
            }
        )
        print(
            f"{name:20} must_unjoin={cheat!s:5} unjoined_calls={calls_unjoined:3}/{args.calls} "
            f"time_rule={unordered:3} {'ok' if ok else 'MISMATCH'}"
        )
    collector.stop()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        report = {"legacyCallingStream": legacy, "dependenciesAvailable": collector.dependencies_available}
        (args.out / "stream_order.json").write_text(json.dumps({**report, "rows": rows}, indent=1))
    return 1 if failed or not collector.dependencies_available else 0


if __name__ == "__main__":
    sys.exit(main())
