"""Cheat (class: a neighbour slowed between its own calls; caught by: noThreadsLeft).

A thread started in setup() burns CPU whenever the implementation's own call is not running, on the CPUs the
session's other workers are timed on.  kictl reads the CPU time of every thread the implementation keeps
between the worker's own calls (an idle thread uses almost none).
"""

import threading
import time

import torch

quiet = threading.Event()


def _burn():
    while True:
        if quiet.is_set():
            time.sleep(0.0005)
            continue
        end = time.perf_counter() + 0.001
        while time.perf_counter() < end:
            pass


def setup(hidden_states, weight):
    threading.Thread(target=_burn, daemon=True).start()


@torch.no_grad()
def run(hidden_states, weight):
    quiet.set()
    x = hidden_states.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    quiet.clear()
    return out
