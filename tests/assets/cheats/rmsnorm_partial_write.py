"""Cheat: keeps one output buffer and rewrites only its first half after the first call (outputsFullyWritten)."""

import torch

_BUFFER = {}


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    full = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    key = tuple(hidden_states.shape)
    if key not in _BUFFER:
        _BUFFER[key] = full
        return full
    out = _BUFFER[key]
    half = out.shape[0] // 2 or 1
    out[:half] = full[:half]
    return out
