"""Cheat (class 6): arms SIGALRM to raise KeyboardInterrupt a moment after each call returns, inside kictl's
post-call checks.

It happens in the implementation's own worker: its own runtime_error, every other run recorded.
"""

import signal

import torch


def _interrupt(signum, frame):
    raise KeyboardInterrupt("interrupting kictl's checks")


signal.signal(signal.SIGALRM, _interrupt)


@torch.no_grad()
def run(hidden_states, weight):
    signal.setitimer(signal.ITIMER_REAL, 0.0005)
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
