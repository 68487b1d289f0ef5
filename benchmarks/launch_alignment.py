#!/usr/bin/env python
"""Does where a call's launches fall in the command stream set the gap between its kernels? (issue 11)

``benchmarks/gap_effect.py`` (call BC) found the gap between a small FlashInfer prefill call's two kernels at
either ~1.1 µs or ~2.0 µs, and in long stretches at one level: which level followed the position of the call in a
repeating cycle of harness modes, not the spin's length or the flush.  Every command the host enqueues takes room
in the channel's command stream, so a harness that enqueues the same commands before every call puts the call's
launches at positions that advance by a fixed step.  This pads the command stream before each call (in the
harness's own window, before the L2 flush) with ``k`` event records or ``k`` one-element fills and reads, per ``k``,
the share of calls with a long gap, in consecutive calls as ``kictl bench`` runs them; then ``k`` drawn at random
before every call, against no padding, as three processes would read them (run the script three times).

Run on a CUDA machine with flashinfer and cupti-python (``. benchmarks/h200_setup.sh``), from the repository
root::

    python3 benchmarks/launch_alignment.py [--calls 40] [--random-calls 400]

Prints, per workload, the share of long gaps for each padding (two passes over the paddings), then the span's
median, the share of long gaps and the gaps' medians without padding and with random padding.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

from small_calls import LONG_GAP_NS, call_kernels, gaps, start  # noqa: E402

DEFINITION = "gqa_paged_prefill_causal_h24_kv4_d128_ps1"
WORKLOADS = ("q1_kv1", "q154_kv154", "b4x_q64_kv256")
EVENT_PADS = range(16)
KERNEL_PADS = range(8)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=40, help="consecutive timed calls per fixed padding")
    parser.add_argument("--random-calls", type=int, default=400, help="timed calls without and with random padding")
    parser.add_argument(
        "--no-padding",
        action="store_true",
        help="the timer without kictl's own launch padding (as call BD ran, before it; call BF ran with it)",
    )
    args = parser.parse_args()
    import torch

    harness = start()
    if harness is None:
        return 2
    device, collector = harness.device, harness.collector
    chooser = random.Random()
    marker = torch.cuda.Event()  # type: ignore[no-untyped-call]
    tiny = torch.zeros(1, device=device)
    padding = {"events": 0, "kernels": 0}

    def pad() -> None:
        for _ in range(padding["events"]):
            marker.record()
        for _ in range(padding["kernels"]):
            tiny.zero_()

    for label in WORKLOADS:
        inputs, wrapper = harness.workload(DEFINITION, label)

        def call(inputs: list[Any] = inputs, wrapper: Any = wrapper) -> Any:
            return wrapper.run(*inputs)

        timer = harness.timer(1 if args.no_padding else None)
        timer.cold_translations = pad
        timer.prepare(call)
        for _ in range(10):
            timer.measure(call)

        def share_long(events: int, kernels: int, calls: int, timer: Any = timer, call: Any = call) -> float:
            padding["events"], padding["kernels"] = events, kernels
            between = []
            for _ in range(calls):
                timer.measure(call)
                between.extend(gaps(call_kernels(collector.last)))
            return sum(g > LONG_GAP_NS for g in between) / max(1, len(between))

        for kind, pads in (("events", EVENT_PADS), ("kernels", KERNEL_PADS)):
            passes = []
            for _ in range(2):
                passes.append(
                    [share_long(k if kind == "events" else 0, k if kind == "kernels" else 0, args.calls) for k in pads]
                )
            print(
                f"{label}: long gaps with k padding {kind}, k = {pads.start}..{pads.stop - 1}: "
                + " / ".join(" ".join(f"{s:.0%}" for s in shares) for shares in passes),
                flush=True,
            )
        for mode in ("none", "random", "none", "random"):
            spans: list[int] = []
            between: list[int] = []
            for _ in range(args.random_calls):
                if mode == "random":
                    padding["events"], padding["kernels"] = chooser.randrange(64), chooser.randrange(8)
                else:
                    padding["events"] = padding["kernels"] = 0
                spans.append(int(timer.measure(call).ns or 0))
                between.extend(gaps(call_kernels(collector.last)))
            short = [g for g in between if g <= LONG_GAP_NS]
            long = [g for g in between if g > LONG_GAP_NS]
            print(
                f"{label}: padding {mode}: span median {statistics.median(spans) / 1000:.2f} µs, "
                f"long gaps {len(long) / max(1, len(between)):.0%}, gaps "
                f"{statistics.median(short) / 1000 if short else 0:.2f} and "
                f"{statistics.median(long) / 1000 if long else 0:.2f} µs",
                flush=True,
            )
    collector.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
