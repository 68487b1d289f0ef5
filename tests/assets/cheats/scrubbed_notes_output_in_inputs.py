"""Cheat (class: scrubbed-notes; caught by: outputsNotAliasInputs).

Timed calls write their outputs into the timed input's own memory and return that tensor, and kictl's worker
object is given a notes list that keeps nothing, so the worker's findings (an output sharing an input's
storage, an input changed) never reach the parent.  The parent now finds the output in the inputs region
itself, in the worker's map, at the call's return, and reads the region back itself.
"""

import gc

import torch


class _Dropping(list):
    """A notes list that keeps nothing."""

    def append(self, item):
        pass

    def extend(self, items):
        pass


for _worker in [o for o in gc.get_objects() if type(o).__name__ == "Worker"]:
    _worker.pending = _Dropping()


def _compute(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)


_seen = {"timed": None}


@torch.no_grad()
def run(hidden_states, weight):
    out = _compute(hidden_states, weight)
    if _seen["timed"] is hidden_states:
        hidden_states.copy_(out)
        return hidden_states
    _seen["timed"] = hidden_states
    return out
