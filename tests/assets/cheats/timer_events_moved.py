"""Cheat (GPU): does its work, then records every CUDA event it can reach from the harness's frames again,
so that the timer's start event lands after the work and the events read almost nothing.

Under the events timer that would be the figure; under CUPTI it is only the cross-check. Either way the
harness sees it (timerNotPatched): CUPTI's records show the harness's event recorded a second time inside the
call, and the events timer's lead and anchor events no longer sit where the harness put them.
"""

import sys

import torch


def _reachable_events():
    found = {}
    frame = sys._getframe(2)
    while frame is not None:
        values = list(frame.f_locals.values())
        for value in list(values):
            values.extend(getattr(value, "__dict__", {}).values())
        for value in values:
            if isinstance(value, torch.cuda.Event):
                found[id(value)] = value
        frame = frame.f_back
    return list(found.values())


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    if out.is_cuda:
        for event in _reachable_events():
            event.record()
    return out
