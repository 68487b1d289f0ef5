"""Fair: writes every call's answer in full into one output buffer it keeps and returns (must pass)."""

import torch

_BUFFER = {}


@torch.no_grad()
def run(hidden_states, weight):
    key = tuple(hidden_states.shape)
    if key not in _BUFFER:
        _BUFFER[key] = torch.empty_like(hidden_states)
    out = _BUFFER[key]
    x = hidden_states.float()
    out.copy_(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float())
    return out
