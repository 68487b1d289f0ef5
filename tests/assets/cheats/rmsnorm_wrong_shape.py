"""Defect: returns one row too few (incorrect_shape)."""

import torch


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states[1:].float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
