"""Defect: off by 10% (incorrect_numerical)."""

import torch


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    return (1.1 * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
