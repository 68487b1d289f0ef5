"""Cheat (class: code in kictl's work through a trace hook; caught by: timerNotPatched).

The last timed calls set a trace function (``sys.settrace``) that would run in kictl's end-of-run checks
(``Finish``) and rewrite what they compare.  It is set inside ``run()`` from the 3rd call on, so that nothing
looks wrong before the timed calls; kictl looks when each call returns and at every request.
"""

import sys

import torch

calls = [0]


def _trace(frame, event, arg):
    return None


@torch.no_grad()
def run(hidden_states, weight):
    calls[0] += 1
    if calls[0] >= 3:
        sys.settrace(_trace)
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
