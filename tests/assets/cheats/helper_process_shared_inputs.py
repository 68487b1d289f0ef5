"""Cheat (class: another process does the work; caught by: noProcessesLeft).

setup() forks a helper that keeps the timed tensors (on the CPU they lie in memory kictl's parent writes each
call's values into, which the fork inherits) and computes on them whenever they change, writing its answers
into memory it shares with the worker; ``run()`` would then only copy the helper's latest answer.  No thread of
the worker's, and the helper's work is between the worker's calls.  kictl counts the processes in the sandbox
after every timed call (and the helper's CPU time between calls, ``noWorkOutsideCalls``); the sandbox's PID
namespace ends it with the worker.
"""

import os
import time

import torch

shared = {}


def _helper(hidden_states, weight, out):
    last = None
    while True:
        now = hidden_states[0, :8].tolist()
        if now != last:
            x = hidden_states.float()
            out.copy_((x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(out.dtype))
            last = now
        time.sleep(0.0002)


def setup(hidden_states, weight):
    out = torch.empty_like(hidden_states).share_memory_()
    shared["out"] = out
    torch.set_num_threads(1)
    if os.fork() == 0:
        try:
            _helper(hidden_states, weight, out)
        finally:
            os._exit(0)


@torch.no_grad()
def run(hidden_states, weight):
    if "out" in shared:
        return shared["out"].clone()
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
