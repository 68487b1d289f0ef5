"""Fair: RMSNorm computed in float64 throughout (more precise than the reference), then cast (must pass)."""

import torch


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.double()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.double()
    return y.to(hidden_states.dtype)
