"""Cheat (class: a neighbour slowed between its own calls; caught by: noThreadsLeft).

A thread started at import burns 1 ms of CPU in every 5 ms, whether a call runs or not: on the CPUs the session's
other workers are timed on, a fifth of their time while this worker is between calls.  It is alive before the
timed calls begin (an honest watchdog is too): kictl judges such a thread by the CPU it uses between the
worker's own calls (at most 2% of that wall time).
"""

import threading
import time

import torch


def _burn():
    while True:
        end = time.perf_counter() + 0.001
        while time.perf_counter() < end:
            pass
        time.sleep(0.004)


threading.Thread(target=_burn, daemon=True).start()


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
