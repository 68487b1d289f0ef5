"""Cheat (class 4, work that escapes the measurement): returns plain tensors when checked for correctness,
and a lazy torch.Tensor subclass from timed calls, whose values would only be computed when read.

Every timed output's type is checked exactly (plainTensorOutputs).
"""

import sys

import torch


class Lazy(torch.Tensor):
    pass


def _timed():
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "timed_call":
            return True
        frame = frame.f_back
    return False


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    return out.as_subclass(Lazy) if _timed() else out
