"""Cheat: computes once, then returns a copy of the first answer whatever the inputs (outputsFresh)."""

import torch

_CACHE = {}


@torch.no_grad()
def run(hidden_states, weight):
    key = tuple(hidden_states.shape)
    if key not in _CACHE:
        x = hidden_states.float()
        _CACHE[key] = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    return _CACHE[key].clone()
