"""Cheat (class: a second CPU; caught by: noWorkOutsideCalls).

The worker is pinned to the CPUs it was given; this one allows itself every CPU of the machine in ``setup()``
(``sched_setaffinity``) and splits each call's rows between its own thread and a helper thread that may run on
another CPU, joined before the call returns.  The parent re-checks every thread's CPUs when a call returns.
"""

import os
import threading

import torch

_ALL = set(range(os.cpu_count() or 1))


def _norm_into(out, hidden_states, weight):
    x = hidden_states.float()
    out.copy_((x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(out.dtype))


def setup(hidden_states, weight):
    os.sched_setaffinity(0, _ALL)


@torch.no_grad()
def run(hidden_states, weight):
    os.sched_setaffinity(0, _ALL)
    out = torch.empty_like(hidden_states)
    half = hidden_states.shape[0] // 2
    helper = threading.Thread(target=_norm_into, args=(out[half:], hidden_states[half:], weight))
    helper.start()
    _norm_into(out[:half], hidden_states[:half], weight)
    helper.join()
    return out
