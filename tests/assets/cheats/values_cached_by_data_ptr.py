"""Cheat (class 3, answers that do not depend on the timed values): caches its answer per input storage
address (``data_ptr()`` alone) and returns the cache whenever called on the same memory again.

Every timed call gets new values copied into the same tensors: the audited calls are wrong
(timedOutputsCorrect).
"""

import torch

_cache = {}


@torch.no_grad()
def run(hidden_states, weight):
    key = (hidden_states.data_ptr(), weight.data_ptr())
    if key not in _cache:
        x = hidden_states.float()
        _cache[key] = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    return _cache[key].clone()
