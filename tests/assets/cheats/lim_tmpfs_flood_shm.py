"""Cheat (class: a tmpfs flood; caught by: resource_limit tmpfs).

The other tmpfs a sandbox may write: POSIX shared memory (``/dev/shm``), filled in ``setup()`` with 16 MiB
files until the writes fail.  It has a size of its own too, and a full one is named.
"""

import os

import torch

_BLOCK = b"\xa5" * (16 << 20)


def setup(hidden_states, weight):
    try:
        for n in range(100_000):
            fd = os.open(f"/dev/shm/flood{n}", os.O_CREAT | os.O_WRONLY, 0o600)
            try:
                os.write(fd, _BLOCK)
            finally:
                os.close(fd)
    except OSError:
        pass


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
