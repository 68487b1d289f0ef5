"""Cheat (class: code in kictl's work through a torch dispatch mode; caught by: timerNotPatched).

The first timed call pushes a ``TorchDispatchMode`` and leaves it on the stack when it returns: every aten
operation kictl's worker runs after the call (its audit copies, the flush on a GPU, the finish's comparisons)
reaches the mode first.  kictl looks at the dispatch-mode stack when the call returns and at every request.
"""

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class Spy(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


_entered = []


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    if not _entered:
        mode = Spy()
        mode.__enter__()
        _entered.append(mode)
    return out
