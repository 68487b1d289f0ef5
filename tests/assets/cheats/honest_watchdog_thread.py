"""Honest (class: honest; must pass).

Keeps a watchdog thread of its own, started at import: it wakes every 50 ms (``Event.wait``, never spinning) to
see whether a call has run for more than ten minutes, and would say so on stderr.  Every call's outputs are
computed in full inside the call.
"""

import sys
import threading
import time

import torch

_started: list[float] = []
_wake = threading.Event()


def _watch():
    while True:
        _wake.wait(0.05)
        if _started and time.monotonic() - _started[-1] > 600:
            print("rmsnorm: a call has run for ten minutes", file=sys.stderr)
            _started.clear()


threading.Thread(target=_watch, name="rmsnorm-watchdog", daemon=True).start()


@torch.no_grad()
def run(hidden_states, weight):
    _started.append(time.monotonic())
    try:
        x = hidden_states.float()
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    finally:
        _started.clear()
