"""Cheat (class 3): caches its answer per (storage address, ``_version``), the counter torch bumps on every
in-place write, so that it answers from the cache only while the inputs look untouched.

kictl writes every timed call's fresh values into the input tensors in place, which bumps ``_version``; but
its probes write the last call's values with a few swapped through ``.data``, which leaves ``_version`` alone:
the cache answers the probe with the last call's outputs and the probe's audit finds them wrong
(timedOutputsCorrect).
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
