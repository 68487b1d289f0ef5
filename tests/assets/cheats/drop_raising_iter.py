"""Cheat (class 6, making kictl drop everyone's results): returns a list whose __iter__ and __len__ raise.

kictl never calls a method of the implementation's objects: it is not a list, so it is not the
definition's outputs (incorrect_shape); every other run is recorded.
"""

import torch


class Trap(list):
    def __iter__(self):
        raise KeyboardInterrupt("caught you")

    def __len__(self):
        raise SystemExit(3)


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    return Trap([(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)])
