#!/usr/bin/env python
"""The events and graph timers' start-gap check on a GPU: what honest calls read, and that none is judged.

Claim (docs/bench.md "Timers", advisory KI-2026-0005; RESULTS.md "Start gaps of honest calls on the H200"):
the lead and start events of honest calls made ahead of the device read 1.28-1.31 us apart through the events
timer and 1.89-1.92 us through the graph timer on the H200, 8 of 12,000 calls wider than 2 us, and
``StartGaps`` judges no honest run; a start event recorded again after the call's work on every call is
judged within the first calls. Machine and command: the H200, `bash benchmarks/device.sh start_gap_check.py`
(needs torch and kictl's pydantic; no FlashInfer, no sandbox).

Through kictl's own timers (``kictl.bench.timing``), each honest callable ``--calls`` times: a 64x64 and a
4096x4096 bf16 matmul, RMSNorm of 64 rows, causal SDPA of 2,048 and of 16 queries, and 40 small kernels in a
Python loop (a host-heavy wrapper).  Per timer and callable it prints the calls made ahead of the device, the
quantiles of their lead-to-start gaps, how many read wider than 2 us and wider than the timer's calibrated
limit, and the calls judged (``Measured.tampered``).  Then a cheat under the events timer that records the
harness's start event again after a 4096x4096 matmul, on every call and on one call in five.

Writes ``start_gap.json`` to ``--out``; exits 1 when an honest call is judged or the every-call cheat is not.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kictl.bench import timing  # noqa: E402


def quantile(values: list[int], share: float) -> int | None:
    return values[min(len(values) - 1, int(share * len(values)))] if values else None


def main() -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
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
    print("| timer | call | ahead | gap p50 | p90 | p99 | max | > 2 µs | limit | > limit | judged |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, kind in (("events", timing.CudaEventTimer), ("graph", timing.CudaGraphTimer)):
        for label, call in cases.items():
            timer = kind(device, 2 * 60 * 2**20)
            timer.prepare(call)
            for _ in range(5):
                timer.measure(call)
            seen.clear()
            judged = sum(bool(timer.measure(call).tampered) for _ in range(args.calls))
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
            }
            report["honest"][f"{name}/{label}"] = row
            failed |= judged > 0
            print(
                f"| {name} | {label} | {row['ahead']}/{row['calls']} | {row['p50']} | {row['p90']} | {row['p99']} "
                f"| {row['max']} | {row['over2us']} | {limit} | {row['overLimit']} | {judged} |"
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


if __name__ == "__main__":
    raise SystemExit(main())
