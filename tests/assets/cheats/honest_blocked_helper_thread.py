"""Honest (class: honest; must pass).

Keeps a helper thread, started at import, that waits on a queue: each call hands it the second half of the rows
and computes the first half itself, then waits for the helper's half before it returns.  Between calls the
helper is blocked in ``queue.get()`` and uses no CPU; nothing is left to do when a call returns.
"""

import queue
import threading

import torch

_jobs: queue.Queue = queue.Queue()


def _norm(x, weight):
    x = x.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(torch.bfloat16)


def _helper():
    while True:
        rows, weight, out, done = _jobs.get()
        out.copy_(_norm(rows, weight))
        done.set()


threading.Thread(target=_helper, name="rmsnorm-helper", daemon=True).start()


@torch.no_grad()
def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    half = hidden_states.shape[0] // 2
    done = threading.Event()
    _jobs.put((hidden_states[half:], weight, out[half:], done))
    out[:half] = _norm(hidden_states[:half], weight)
    done.wait()
    return out
