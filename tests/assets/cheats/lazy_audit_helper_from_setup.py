"""Cheat (class: lazy audit; caught by: timedOutputsCorrect, outputsFullyWritten).

A helper thread started in setup() waits on a queue (idle, as an honest helper is).  From the first timed call on
(setup() has run, and the correctness rounds before it were computed in full) a call returns an empty tensor at
once and hands the helper the work, which it does after the return.  kictl's parent reads an audited call's
outputs while the worker is stopped at the return: the helper has not run yet.
"""

import queue
import threading

import torch

_jobs: queue.Queue = queue.Queue()
_armed: list[bool] = []


def _norm(x, weight):
    x = x.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(torch.bfloat16)


def _helper():
    while True:
        hidden_states, weight, out = _jobs.get()
        out.copy_(_norm(hidden_states, weight))


def setup(hidden_states, weight):
    threading.Thread(target=_helper, daemon=True).start()
    _armed.append(True)


@torch.no_grad()
def run(hidden_states, weight):
    if not _armed:
        return _norm(hidden_states, weight)
    out = torch.empty_like(hidden_states)
    _jobs.put((hidden_states.clone(), weight.clone(), out))
    return out
