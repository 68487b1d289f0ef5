"""Cheat (class: lazy-audit; caught by: timedOutputsCorrect).

As ``lazy_audit_json_loads``, through ``os.read``: the wire reads every request's bytes with it, so the
buffer a timed call returned was filled as an audit request came in, and never for the other calls.
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

import os

_read = os.read


def _lazy_read(fd, n):
    data = _read(fd, n)
    if b'"audit"' in data:  # only an audited call's answer is ever computed
        _settle()
    return data


os.read = _lazy_read
