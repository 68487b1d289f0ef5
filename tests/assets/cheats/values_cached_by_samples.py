"""Cheat (class 3): caches its answer keyed on a cheap fingerprint of the inputs, a few sampled values and
the sum of one row, hoping that kictl's timed input sets repeat (or are the same values moved around).

Every timed call's values are new, but kictl's probes repeat the last call's values with a few of them
swapped: the fingerprint matches, the cheat answers with the last call's outputs, and the probe's audit
finds them wrong (timedOutputsCorrect).
"""

import torch

_cache = {}


@torch.no_grad()
def run(hidden_states, weight):
    flat = hidden_states.reshape(-1)
    key = (tuple(flat[:: max(1, flat.numel() // 8)][:8].tolist()), float(hidden_states[0].float().sum()))
    if key not in _cache:
        x = hidden_states.float()
        _cache[key] = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    return _cache[key].clone()
