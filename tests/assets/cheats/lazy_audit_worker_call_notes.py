"""Cheat (class: lazy-audit; caught by: timedOutputsCorrect).

Sets an attribute on kictl's worker object: its ``call_notes`` (kictl's checks of a CPU call, run after the
call's answer has gone, the parent's clock stopped) fills the buffer the last timed call returned first, so an
audit packed it done and the work was never timed.
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

for _worker in [o for o in gc.get_objects() if type(o).__name__ == "Worker"]:
    _notes = _worker.call_notes
    _worker.call_notes = lambda sample, _notes=_notes: (_settle(), _notes(sample))[1]
