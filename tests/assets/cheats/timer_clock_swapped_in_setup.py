"""Cheat (class 2, the timer from the same interpreter): in setup() swaps the clock kictl's timer captured for
one running a hundred times slow, and puts the original back on the first call, so that an identity check made
afterwards sees nothing.  The work is a deliberately heavy loop; the samples say a hundredth of it.

Caught by samplesConsistent: the worker's CPU time, read by kictl's parent from /proc, is far above what
the samples add up to.  Since issue 27 the CPU figure is the parent's own clock, so the forged samples move
nothing; they are still a lie, judged by that cross-check.
"""

import sys

import torch

_state = {}


def _slow_clock(real):
    start = real()
    return lambda: start + (real() - start) // 100


def setup(hidden_states, weight):
    timing = sys.modules["kictl.bench.worker.timing"]
    real = timing._ORIGINALS["perf_counter_ns"]
    _state["real"] = real
    timing._ORIGINALS["perf_counter_ns"] = _slow_clock(real)


@torch.no_grad()
def run(hidden_states, weight):
    if "real" in _state:  # put the original back: identity checks after this see the real clock
        sys.modules["kictl.bench.worker.timing"]._ORIGINALS["perf_counter_ns"] = _state.pop("real")
    x = hidden_states.float()
    for _ in range(30):  # the expensive kernel whose time the swapped clock hides
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
    return (y * weight.float()).to(hidden_states.dtype)
