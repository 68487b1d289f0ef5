"""Cheat (class: a neighbour slowed between its own calls; caught by: noProcessesLeft, or noWorkOutsideCalls).

After each of its calls it starts a short-lived process (a double fork: the worker waits for the first child
only, and the sandbox's init reaps the grandchild) that burns 40 ms of CPU while the other implementations are
timed.  kictl counts the processes in the sandbox when each call returns (the burner is usually still alive:
noProcessesLeft); one that is already gone took its CPU time out of ``/proc``'s counters, but not out of the
sandbox's cgroup, which every process of the sandbox joins and from which kictl's parent reads the sandbox's
CPU time between its calls (noWorkOutsideCalls).
"""

import os
import time

import torch


def _burn_elsewhere():
    child = os.fork()
    if child == 0:
        if os.fork() == 0:
            end = time.perf_counter() + 0.04
            while time.perf_counter() < end:
                pass
        os._exit(0)
    os.waitpid(child, 0)


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    _burn_elsewhere()
    return out
