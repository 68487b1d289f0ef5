"""A neighbour that spends its between-call allowance inside the next worker's call (issue 40; must not move the
neighbour's figure, and is itself within its allowance, so it passes).

Each call, as it returns, arms a one-shot timer (``SIGALRM`` 0.2 ms later) whose handler burns 0.8 ms of CPU:
the worker is waiting for kictl's next request by then, and on the CPU the workers share, the parent is timing
another implementation's call.  kictl counts the sandbox's CPU time between its calls (at most 1 ms a call plus
50 ms a run), which this stays within.  While a call is timed every other worker's group is idle
(``cpu.idle``): the handler runs when the timed call leaves the CPU, never inside it.
"""

import signal
import time

import torch


def _burn(signum, frame):
    end = time.process_time() + 0.0008
    while time.process_time() < end:
        pass


signal.signal(signal.SIGALRM, _burn)


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    signal.setitimer(signal.ITIMER_REAL, 0.0002)
    return out
