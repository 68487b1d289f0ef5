"""Cheat (class: a neighbour slowed between its own calls; caught by: noThreadsLeft).

A helper thread started in setup() waits on a queue, as an honest helper does; each call computes its outputs in
full and then hands the helper 5 ms of CPU to spin, which it starts 2 ms later (once the worker has answered and
waits for its next request): inside the calls of the workers timed next.  Over 12 calls that is 60 ms, about the sandbox's
between-call allowance (1 ms a call plus 50 ms: noWorkOutsideCalls), but far above what an idle thread uses
between calls (1% of that wall time plus 5 ms).
"""

import queue
import threading
import time

import torch

_jobs: queue.Queue = queue.Queue()


def _helper():
    while True:
        seconds = _jobs.get()
        time.sleep(0.002)
        end = time.thread_time() + seconds  # CPU time: while another worker is timed, this one's group is idle
        while time.thread_time() < end:
            pass


def setup(hidden_states, weight):
    threading.Thread(target=_helper, daemon=True).start()


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    _jobs.put(0.005)
    return out
