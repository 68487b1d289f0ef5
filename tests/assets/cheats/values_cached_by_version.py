"""Would-be cheat (class 3): caches its answer per (storage address, ``_version``), the counter torch bumps on
every in-place write, so that it answers from the cache only while the inputs are untouched.

kictl writes every timed call's fresh values into the input tensors in place, which bumps ``_version``: the
cache never hits, the implementation computes every answer and gains nothing (it passes, at its true cost).
"""

import torch

_cache = {}
HITS = [0]


@torch.no_grad()
def run(hidden_states, weight):
    key = (hidden_states.data_ptr(), hidden_states._version, weight.data_ptr(), weight._version)
    if key in _cache:
        HITS[0] += 1
        return _cache[key].clone()
    x = hidden_states.float()
    _cache.clear()
    _cache[key] = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    return _cache[key].clone()
