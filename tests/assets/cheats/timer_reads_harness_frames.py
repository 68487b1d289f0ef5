"""Cheat (class 2): looks up the stack for kictl's timed call and does the work only when it is not timed
(correctness rounds), returning an empty answer when timed.

Which timed calls are checked is decided by kictl's parent after each call returned: audits find the wrong
answers (timedOutputsCorrect).
"""

import sys

import torch


def _timed():
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "timed_call":
            return True
        frame = frame.f_back
    return False


@torch.no_grad()
def run(hidden_states, weight):
    if _timed():
        return torch.zeros_like(hidden_states)
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
