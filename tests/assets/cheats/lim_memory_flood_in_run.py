"""Cheat (class: a memory flood; caught by: resource_limit memory).

Every call keeps 64 MiB more of memory it touched, as a cache that never stops growing: the sandbox's memory
limit stops it (the kernel kills the worker at the limit its cgroup holds), and the run says which limit.
"""

import torch

_KEPT = []


def _norm(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)


@torch.no_grad()
def run(hidden_states, weight):
    for _ in range(4):
        _KEPT.append(torch.ones(16 << 20))  # 64 MiB of float32, every page written
    return _norm(hidden_states, weight)
