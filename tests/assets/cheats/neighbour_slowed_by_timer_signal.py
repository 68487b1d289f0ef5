"""Cheat (class: a neighbour slowed between its own calls; caught by: noWorkOutsideCalls).

An interval timer (``SIGALRM`` every 2 ms of wall time) whose handler burns 1.5 ms of CPU: the handler runs
in the worker's main thread even while it waits for kictl's next request (Python retries the read after
it), so the worker burns CPU while the other implementations of the session are timed on the same CPUs, and
they read slower.  No thread, no process: kictl's parent counts the sandbox's CPU time from each of its answers
to its next request, where only kictl's own checks of the call may run.
"""

import signal
import time

import torch


def _burn(signum, frame):
    end = time.perf_counter() + 0.0015
    while time.perf_counter() < end:
        pass


signal.signal(signal.SIGALRM, _burn)


def setup(hidden_states, weight):
    signal.setitimer(signal.ITIMER_REAL, 0.002, 0.002)


@torch.no_grad()
def run(hidden_states, weight):
    signal.setitimer(signal.ITIMER_REAL, 0, 0)  # quiet while its own call is timed
    x = hidden_states.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    signal.setitimer(signal.ITIMER_REAL, 0.002, 0.002)
    return out
