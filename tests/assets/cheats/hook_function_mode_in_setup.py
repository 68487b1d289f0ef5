"""Cheat (class: code in kictl's work through a torch function mode; caught by: timerNotPatched).

In setup() it enters a ``TorchFunctionMode`` and never leaves it, so every torch call kictl's worker makes
afterwards (packing an audit's outputs, the finish's checks, staging on a GPU) goes through its
``__torch_function__``, where it could do the call's work in untimed time or rewrite what kictl reads.  Here it
precomputes: on every torch call outside ``run()`` it recomputes the last answer.  kictl refuses a run when a
function mode is active at any request (``integrity.foreign_hooks``), and runs its own torch work with torch
functions disabled.
"""

import torch
from torch.overrides import TorchFunctionMode


class Spy(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def setup(hidden_states, weight):
    Spy().__enter__()


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
