"""Cheat (class: lazy-audit; caught by: timedOutputsCorrect).

Each timed call returns an uncomputed buffer and sets a 1 ms timer; the ``SIGALRM`` handler fills the buffer
after the answer has gone (the parent's clock stopped), before an audit request is read.
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

import signal

signal.signal(signal.SIGALRM, lambda signum, frame: _settle())
_run = run


def run(hidden_states, weight):  # noqa: F811
    out = _run(hidden_states, weight)
    if _state["pending"] is not None:
        signal.setitimer(signal.ITIMER_REAL, 0.001)
    return out
