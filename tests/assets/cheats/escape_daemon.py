"""Cheat (class 4): double-forks a setsid daemon in setup() that burns CPU (slowing every later measurement)
and would outlive the worker and kictl.

kictl sees the extra process in the worker's sandbox (noProcessesLeft), and the sandbox's PID namespace
ends it with the worker.  The daemon carries a marker in its command line so that a test can look for it.
"""

import os
import sys

import torch

MARKER = "kictl-cheat-daemon-marker"


def setup(hidden_states, weight):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "while True: pass", MARKER])
        os._exit(0)
    os.wait()


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
