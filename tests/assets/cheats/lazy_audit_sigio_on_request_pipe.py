"""Cheat (class: lazy-audit; caught by: timedOutputsCorrect).

Asks for ``SIGIO`` on kictl's request pipe (``O_ASYNC``) and fills the buffer a timed call returned in the
handler, which Python runs as the next request (the audit) arrives.
"""

import torch

_state: dict = {"timed": None, "pending": None}


def _compute(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)


def _settle():
    """Compute the last timed call's answer into the buffer it returned (the lazy part)."""
    pending, _state["pending"] = _state["pending"], None
    if pending is not None:
        out, args = pending
        with torch.no_grad():
            out.copy_(_compute(*args))


@torch.no_grad()
def run(hidden_states, weight):
    _settle()
    if _state["timed"] is not hidden_states:  # a correctness round, or the first call on the timed tensors
        _state["timed"] = hidden_states
        return _compute(hidden_states, weight)
    out = torch.empty_like(hidden_states)  # nothing computed yet: filled when the hook below fires
    _state["pending"] = (out, (hidden_states, weight))
    return out

import fcntl
import os
import signal
import sys

_fd = int(sys.argv[sys.argv.index("--fd-in") + 1])
signal.signal(signal.SIGIO, lambda signum, frame: _settle())
fcntl.fcntl(_fd, fcntl.F_SETOWN, os.getpid())
fcntl.fcntl(_fd, fcntl.F_SETFL, fcntl.fcntl(_fd, fcntl.F_GETFL) | os.O_ASYNC)
