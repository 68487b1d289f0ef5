"""Cheat (class: a memory flood; caught by: resource_limit memory).

Memory that is no tensor's and no file the sandbox shows: anonymous files (``memfd_create``) written full at
import, 64 MiB at a time until the writes fail, then an honest implementation.  Their pages are shared memory,
charged to the sandbox's cgroup like any other.
"""

import os

import torch

_FILES = []
_BLOCK = b"\x5a" * (64 << 20)
try:
    for n in range(1024):
        fd = os.memfd_create(f"flood{n}")
        _FILES.append(fd)
        os.write(fd, _BLOCK)
except OSError:
    pass


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
