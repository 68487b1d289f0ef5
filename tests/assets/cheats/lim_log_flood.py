"""Cheat (class: a log flood; caught by: resource_limit log).

Writes its standard error full at import, 1 MiB a line, ignoring every error, then runs honestly: a log that
would fill kictl's disk.  The parent reads a worker's log up to its limit only, then closes it, and says so.
"""

import sys

import torch

_LINE = "x" * (1 << 20) + "\n"
for _ in range(4096):
    try:
        sys.stderr.write(_LINE)
        sys.stderr.flush()
    except (OSError, ValueError):
        break


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
