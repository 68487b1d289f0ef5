"""Cheat (class: a log flood; caught by: resource_limit log).

Writes 256 KiB straight to file descriptor 1 (standard output: the same log) in every call, errors ignored:
no one write is large, the total is.
"""

import os

import torch

_CHUNK = b"y" * (256 << 10)


@torch.no_grad()
def run(hidden_states, weight):
    try:
        os.write(1, _CHUNK)
    except OSError:
        pass
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
