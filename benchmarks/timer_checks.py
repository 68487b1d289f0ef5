#!/usr/bin/env python
"""What kictl's GPU timers condemn, checked on a GPU: work left on a side stream, a moved start event, no honest call.

Claim (README.md "Benchmarking", docs/bench.md "Stream ordering" and "Timers", advisory KI-2026-0005; RESULTS.md
"Stream ordering on a GPU", RESULTS.md "Start gaps of honest calls on the H200"): CUPTI's dependency records flag
work on a side stream that is never joined, and flag neither single-stream nor fork-join code; the lead and start
events of honest calls made ahead of the device read 1.28-1.31 us apart through the events timer and 1.89-1.92 us
through the graph timer on the H200, 8 of 12,000 calls wider than 2 us, and ``StartGaps`` judges no honest run,
while a start event recorded again after the call's work on every call is judged within the first calls. Machine
and command: the H200, `bash benchmarks/device.sh timer_checks.py stream-order` (needs the ``gpu`` extra's CUPTI
packages, carried as wheels: docs/bench.md) and `bash benchmarks/device.sh timer_checks.py start-gaps` (torch and
kictl's pydantic; no FlashInfer, no sandbox). Formerly ``stream_order_check.py`` and ``start_gap_check.py``.

``stream-order``: each pattern below is called ``--calls`` times the way ``CuptiTimer`` calls ``run()``: a device
synchronisation, a spin on the calling stream, the call, the end marker (a spin of ~0 cycles), a
synchronisation; then ``attribute(..., dependencies=...)`` on what CUPTI delivered.  Each pattern says whether
its work on other streams must be found *unjoined* (in every call) or never.  It checks on the real driver what
the CPU tests assume of CUPTI: that event records, stream waits and host synchronisations arrive with their
correlation ids, stream ids and sync ids matching the kernels', and that a CUDA graph replayed on the calling
stream (``graph_replay``) is not taken for side-stream work.  Writes ``stream_order.json`` (per pattern:
expectation, calls, unjoined and time-rule counts, the first call's dependency records) to ``--out``; prints a
table; exits 1 when an expectation fails.

``start-gaps``: through kictl's own timers (``kictl.bench.worker.timing``), each honest callable ``--calls`` times: a
64x64 and a 4096x4096 bf16 matmul, RMSNorm of 64 rows, causal SDPA of 2,048 and of 16 queries, and 40 small
kernels in a Python loop (a host-heavy wrapper).  Per timer and callable it prints the calls made ahead of the
device, the quantiles of their lead-to-start gaps, how many read wider than 2 us and wider than the timer's
calibrated limit, the calls judged (``Measured.tampered``), and any attribute of the timer that a measured
call replaced after ``prepare()`` (the worker would name it ``timerNotPatched``).  Then a cheat under the events
timer that records the harness's start event again after a 4096x4096 matmul, on every call and on one call in
five.  Writes ``start_gap.json`` to ``--out``; exits 1 when an honest call is judged or has an attribute replaced,
or the every-call cheat is not judged.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
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


def stream_order_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="timer_checks.py stream-order", description="stream ordering by CUPTI's dependency records"
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args(argv)

    import torch

    from kictl.bench.worker.cupti_attribution import attribute
    from kictl.bench.worker.cupti_model import Window
    from kictl.bench.worker.cupti_timer import CuptiCollector
    from kictl.bench.worker.timing import bind_originals, spin_cycles_per_ns

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


def quantile(values: list[int], share: float) -> int | None:
    return values[min(len(values) - 1, int(share * len(values)))] if values else None


def start_gaps_main(argv: list[str]) -> int:
    import torch

    from kictl.bench.worker import integrity, timing

    parser = argparse.ArgumentParser(prog="timer_checks.py start-gaps", description="start gaps of honest calls")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    timing.bind_originals()
    device = "cuda:0"
    seen: list[tuple[int, bool]] = []
    measured_bracket = timing.CudaEventTimer._bracket

    def bracket(self: Any, call: Any, spin: Any) -> Any:
        found = measured_bracket(self, call, spin)
        seen.append((found[4], found[2]))
        return found

    timing.CudaEventTimer._bracket = bracket  # type: ignore[method-assign]
    small = torch.randn(64, 64, device=device, dtype=torch.bfloat16)
    big = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
    rows = torch.randn(64, 4096, device=device, dtype=torch.bfloat16)
    weight = torch.ones(4096, device=device, dtype=torch.bfloat16)
    query = torch.randn(1, 32, 2048, 128, device=device, dtype=torch.bfloat16)
    short = torch.randn(1, 32, 16, 128, device=device, dtype=torch.bfloat16)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def chain() -> Any:
        out = rows
        for _ in range(40):
            out = out * 1.0001
        return out

    cases = {
        "mm64": lambda: small @ small,
        "mm4096": lambda: big @ big,
        "rmsnorm64": lambda: torch.nn.functional.rms_norm(rows, (4096,), weight, 1e-5),
        "sdpa2048": lambda: sdpa(query, query, query, is_causal=True),
        "sdpa16": lambda: sdpa(short, short, short, is_causal=True),
        "chain40": chain,
    }
    report: dict[str, Any] = {"honest": {}, "cheats": {}}
    failed = False
    started = time.time()
    print("| timer | call | ahead | gap p50 | p90 | p99 | max | > 2 µs | limit | > limit | judged | replaced |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for name, kind in (("events", timing.CudaEventTimer), ("graph", timing.CudaGraphTimer)):
        for label, call in cases.items():
            timer = kind(device, 2 * 60 * 2**20)
            # as the worker watches the timer: what existed before prepare() must keep its object, what prepare()
            # made is watched as it is then; a measured call must replace none (timerNotPatched)
            before = integrity.watch_instance("timer", timer)
            timer.prepare(call)
            watch = integrity.watch_instance("timer", timer, before)
            for _ in range(5):
                timer.measure(call)
            seen.clear()
            judged = sum(bool(timer.measure(call).tampered) for _ in range(args.calls))
            replaced = integrity.instance_changes(watch, timer)
            gaps = sorted(gap for gap, ahead in seen if ahead)
            limit = timer.start_gaps.limit_ns
            row = {
                "ahead": len(gaps),
                "calls": len(seen),
                "p50": quantile(gaps, 0.5),
                "p90": quantile(gaps, 0.9),
                "p99": quantile(gaps, 0.99),
                "max": gaps[-1] if gaps else None,
                "over2us": sum(gap > 2000 for gap in gaps),
                "limit": limit,
                "overLimit": sum(gap > limit for gap in gaps),
                "judged": judged,
                "replaced": replaced,
            }
            report["honest"][f"{name}/{label}"] = row
            failed |= judged > 0 or bool(replaced)
            print(
                f"| {name} | {label} | {row['ahead']}/{row['calls']} | {row['p50']} | {row['p90']} | {row['p99']} "
                f"| {row['max']} | {row['over2us']} | {limit} | {row['overLimit']} | {judged} "
                f"| {', '.join(replaced) or '-'} |"
            )
    record = timing.original("record")
    for every in (1, 5):
        count = [0]

        def cheat(every: int = every, count: list[int] = count) -> Any:
            out = big @ big
            count[0] += 1
            if count[0] % every == 0:  # the harness's start event, from the frame that recorded it
                record(sys._getframe(1).f_back.f_locals["start"])  # type: ignore[union-attr]
            return out

        timer = timing.CudaEventTimer(device, 2 * 60 * 2**20)
        results = [timer.measure(cheat) for _ in range(200)]
        flagged = [number for number, result in enumerate(results) if result.tampered]
        figures = sorted(result.ns for result in results if result.ns is not None)
        report["cheats"][f"every {every}"] = {"firstJudged": flagged[:1], "median": quantile(figures, 0.5)}
        print(
            f"cheat moving the start on one call in {every}: first judged call {flagged[:1]}, "
            f"median {quantile(figures, 0.5)} ns"
        )
        if every == 1:
            failed |= not flagged
    report["wallSeconds"] = round(time.time() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "start_gap.json").write_text(json.dumps(report, indent=1))
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    parts = {"stream-order": stream_order_main, "start-gaps": start_gaps_main}
    if not argv or argv[0] not in parts:
        print("usage: python benchmarks/timer_checks.py stream-order|start-gaps [ARGS...]", file=sys.stderr)
        return 2
    return parts[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
