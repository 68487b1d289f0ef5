"""Honest (class: honest; must pass).

Installs signal handlers of its own at import (a ``SIGUSR1`` handler that is never sent, and a ``SIGALRM``
watchdog armed at every call for ten minutes and disarmed as it returns), and computes every call's outputs
in full inside the call.
"""

import signal

import torch

_fired = []
signal.signal(signal.SIGUSR1, lambda signum, frame: _fired.append(signum))
signal.signal(signal.SIGALRM, lambda signum, frame: _fired.append(signum))


@torch.no_grad()
def run(hidden_states, weight):
    signal.alarm(600)
    try:
        x = hidden_states.float()
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    finally:
        signal.alarm(0)
