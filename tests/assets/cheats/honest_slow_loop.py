"""Fair: a slow but correct implementation, one row at a time in a Python loop (must pass)."""

import torch


@torch.no_grad()
def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    w = weight.float()
    for row in range(hidden_states.shape[0]):
        x = hidden_states[row].float()
        out[row] = (x * torch.rsqrt(x.pow(2).mean() + 1e-5) * w).to(hidden_states.dtype)
    return out
