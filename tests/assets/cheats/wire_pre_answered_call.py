"""Cheat (class: a pre-answered call; caught by: wireIntact).

Writes the answer to the next timed call before that call is asked for: a ``Sample`` frame of 1 µs on the
worker's answer pipe (its number is in the worker's command line), at the end of each call, so that the parent
would read it the moment it sends the next request and stop its clock at once.  Every request carries a fresh
nonce that its answer must echo; a frame written before the request cannot know it.
"""

import sys

import torch

wire = sys.modules["kictl.bench.wire"]
FD_OUT = int(sys.argv[sys.argv.index("--fd-out") + 1])
calls = [0]


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    calls[0] += 1
    if calls[0] >= 4:  # the timed calls (after the correctness rounds and the warm-up)
        wire.write_frame(FD_OUT, wire.Sample(ns=1000, enqueued_ahead=None, notes=()), None, 0)
    return out
