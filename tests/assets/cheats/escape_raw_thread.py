"""Cheat (class 4): returns at once and finishes the work on a raw _thread thread, which
threading.enumerate() does not list.

kictl's parent counts the worker's threads from /proc after each timed call (noThreadsLeft).
"""

import _thread
import time

import torch


def _fill(out, hidden_states, weight):
    time.sleep(0.3)
    x = hidden_states.float()
    out.copy_(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float())


@torch.no_grad()
def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _thread.start_new_thread(_fill, (out, hidden_states.clone(), weight.clone()))
    return out
