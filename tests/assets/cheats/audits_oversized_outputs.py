"""Many large audits (class: many-large-audits; caught by: timedOutputsCorrect, plainTensorOutputs).

Its correctness rounds are honest; its timed calls return outputs 64 times the definition's size (the right values
in the first columns), to make kictl's parent read and keep far more than the definition's outputs for every
audited call.  The parent reads at most twice the definition's outputs plus 1 MiB of a worker's memory for a call:
the call's outputs count as unreadable, so wrong.
"""

import torch

_armed: list[bool] = []


def _norm(x, weight):
    x = x.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(torch.bfloat16)


def setup(hidden_states, weight):
    _armed.append(True)


@torch.no_grad()
def run(hidden_states, weight):
    if not _armed:
        return _norm(hidden_states, weight)
    rows, hidden = hidden_states.shape
    out = torch.zeros(rows, 64 * hidden, dtype=hidden_states.dtype)
    out[:, :hidden] = _norm(hidden_states, weight)
    return out
