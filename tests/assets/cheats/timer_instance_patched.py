"""Cheat (class 2): finds kictl's timer object in its callers' frames and replaces the clock (and, on a GPU, the
events' elapsed time) that the *instance* holds, so that every later call reads ten times faster. Nothing at
module level changes, so a watch of module functions alone does not see it (timerNotPatched).
"""

import sys

import torch

_done = []


def _patch_timer():
    frame = sys._getframe(2)
    while frame is not None:
        timer = frame.f_locals.get("self")
        if timer is not None and hasattr(timer, "measure") and hasattr(timer, "clock"):
            real_clock = timer.clock
            start = real_clock()
            timer.clock = lambda: start + (real_clock() - start) // 10
            if hasattr(timer, "elapsed"):
                real_elapsed = timer.elapsed
                timer.elapsed = lambda a, b: real_elapsed(a, b) / 10
            _done.append(timer)
            return
        frame = frame.f_back


@torch.no_grad()
def run(hidden_states, weight):
    if not _done:
        _patch_timer()
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
