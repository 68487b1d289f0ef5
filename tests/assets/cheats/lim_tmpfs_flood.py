"""Cheat (class: a tmpfs flood; caught by: resource_limit tmpfs).

Fills the sandbox's private ``/tmp`` (memory, as every tmpfs is) with 16 MiB files until the writes fail, and
keeps them; then an honest implementation.  ``/tmp`` has a size of its own, and a full one is named.
"""

import os

import torch

_BLOCK = b"\xa5" * (16 << 20)
try:
    for n in range(100_000):
        with open(f"/tmp/flood{n}", "wb") as handle:
            handle.write(_BLOCK)
except OSError:
    pass


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
