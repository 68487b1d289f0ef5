"""Cheat (class: a second CPU; caught by: noWorkOutsideCalls).

Careful where ``lim_second_cpu_left_wide`` is not: each call puts a helper thread on the CPUs it was not given, lets it compute
half the rows, joins it and waits until its OS thread is gone, and keeps its own thread on the CPUs it was
given, so that no extra thread and no CPU of another shows when the call returns.  The sandbox's CPU time over
the calls is more than the CPUs it was given can run in their wall time: the parent counts it across the whole
sandbox.
"""

import os
import threading

import torch

_ALL = set(range(os.cpu_count() or 1))


def _norm_into(out, hidden_states, weight, given):
    os.sched_setaffinity(0, (_ALL - given) or _ALL)  # on another CPU than the caller's
    x = hidden_states.float()
    out.copy_((x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(out.dtype))


@torch.no_grad()
def run(hidden_states, weight):
    before = len(os.listdir("/proc/self/task"))
    given = os.sched_getaffinity(0)
    out = torch.empty_like(hidden_states)
    half = hidden_states.shape[0] // 2
    helper = threading.Thread(target=_norm_into, args=(out[half:], hidden_states[half:], weight, given))
    helper.start()
    x = hidden_states[:half].float()
    out[:half] = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(out.dtype)
    helper.join()
    while len(os.listdir("/proc/self/task")) > before:
        pass
    return out
