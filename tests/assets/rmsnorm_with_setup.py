"""A stateful implementation: setup() prepares per input tensors, run() sets up itself when not prepared.

Every setup and run is appended to the file named by $KICTL_TEST_CALL_LOG.
"""

import os

import torch

_PREPARED = set()


def _log(word):
    with open(os.environ["KICTL_TEST_CALL_LOG"], "a", encoding="utf-8") as handle:
        handle.write(word + "\n")


def setup(hidden_states, weight):
    _log("setup")
    _PREPARED.add((id(hidden_states), id(weight)))


@torch.no_grad()
def run(hidden_states, weight):
    if (id(hidden_states), id(weight)) not in _PREPARED:
        setup(hidden_states, weight)
    _log("run")
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
