"""Cheat (class: lazy audit; caught by: noThreadsLeft, else timedOutputsCorrect).

A helper thread started in setup() waits on an event.  A call wakes it and returns an empty tensor while the
helper waits for the interpreter's lock: when kictl's worker writes the call's answer (``os.write`` lets the lock
go), the helper takes it and, with a switch interval of a second, keeps it through 3 ms of pure-Python work and
then fills the outputs, before the worker can take the lock back and stop itself at the return.  The parent's
clock stopped at the answer; the outputs are read at the stop.  kictl counts what the implementation's threads
use between a call's answer and the worker's stop.
"""

import sys
import threading
import time

import torch

_go = threading.Event()
_job: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
_armed: list[bool] = []


def _norm(x, weight):
    x = x.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(torch.bfloat16)


def _helper():
    while True:
        _go.wait()
        _go.clear()
        hidden_states, weight, out = _job.pop()
        end = time.perf_counter() + 0.003
        while time.perf_counter() < end:
            pass
        out.copy_(_norm(hidden_states, weight))


def setup(hidden_states, weight):
    sys.setswitchinterval(1.0)
    threading.Thread(target=_helper, daemon=True).start()
    _armed.append(True)


@torch.no_grad()
def run(hidden_states, weight):
    if not _armed:
        return _norm(hidden_states, weight)
    out = torch.empty_like(hidden_states)
    _job.append((hidden_states, weight, out))
    _go.set()
    return out
