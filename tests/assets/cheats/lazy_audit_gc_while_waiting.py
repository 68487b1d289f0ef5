"""Cheat (class: lazy-audit; caught by: timedOutputsCorrect).

A ``gc.callbacks`` entry fills the buffer once kictl's worker has answered a timed call and is waiting for
its next request (after the parent's clock stopped): its work was never timed, and an audit found it done.
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

import gc
import sys

gc.set_threshold(20)


def _on_collect(phase, info):
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name in ("read_frame_nonce", "call_notes"):
            _settle()
            return
        frame = frame.f_back


gc.callbacks.append(_on_collect)
