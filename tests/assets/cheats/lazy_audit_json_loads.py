"""Cheat (class: lazy-audit; caught by: timedOutputsCorrect).

Timed calls return an uncomputed buffer; ``json.loads`` (which kictl's wire calls to read every request) is
replaced so that the buffer is filled when the request read is an audit (and never otherwise):
the worker packed correct outputs, and the work was never timed.  kictl's parent now reads a CPU call's
outputs from the worker's memory at the call's return, the worker stopped, before any request is read.
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

import json

_loads = json.loads


def _lazy_loads(text, *args, **kwargs):
    if '"audit"' in str(text):  # only an audited call's answer is ever computed
        _settle()
    else:
        _state["pending"] = None
    return _loads(text, *args, **kwargs)


json.loads = _lazy_loads
