"""Cheat: computes the right answer, then scribbles on its input (caught by inputsUnchanged)."""

import torch


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    hidden_states.mul_(0.5)
    return out
