"""Cheat (class 3): computes the answer in setup(), outside the timed region, and returns it from run().

setup() is shown values that are never timed (timedOutputsCorrect).
"""

import torch

_answer = {}


@torch.no_grad()
def _norm(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)


def setup(hidden_states, weight):
    _answer["out"] = _norm(hidden_states, weight)


def run(hidden_states, weight):
    if "out" in _answer:
        return _answer["out"].clone()
    return _norm(hidden_states, weight)
