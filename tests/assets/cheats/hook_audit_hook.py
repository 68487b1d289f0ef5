"""Cheat (class: code in kictl's work through an audit hook; defended by: the hook never gets in).

An audit hook runs at every ``open``, ``import``, ``compile``, ``ctypes`` call... of the process, kictl's
included.  kictl's worker adds its own hook before any implementation is imported, which refuses every later
one (Python then does not add it, and the caller sees no error).  So this hook never runs, and the run is
judged as the honest code it otherwise is: ``passed`` (refusing the run would condemn honest libraries that
add hooks: an honest FlashInfer rerun on the H200 was).  tests/bench/test_integrity.py checks that a
refused hook never runs.
"""

import sys

import torch


def _hook(event, args):
    pass


sys.addaudithook(_hook)


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
