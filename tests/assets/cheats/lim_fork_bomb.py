"""Cheat (class: a process flood; caught by: resource_limit processes).

A fork bomb, bounded so that it ends on its own: at import every process forks until the kernel refuses,
the children sleep a second and leave; then an honest implementation.  The sandbox's task limit (its cgroup's
``pids.max``) refuses the forks past it, and the run says which limit it met.
"""

import os
import time

import torch


def _bomb(depth):
    children = []
    for _ in range(8):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            if depth < 3:
                _bomb(depth + 1)
            time.sleep(1.0)
            os._exit(0)
        children.append(pid)
    return children


for child in _bomb(0):
    try:
        os.waitpid(child, 0)
    except OSError:
        pass


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
