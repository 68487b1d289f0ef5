"""Cheat (class: code in kictl's work through a profile hook; caught by: timerNotPatched).

``sys.setprofile`` in setup(): the function runs at every Python call and return in the worker's main
thread, inside kictl's staging, audits, flush and finish, where it could do the timed work unseen by the
timer (here it only counts).  kictl refuses a run when a profile or trace function is active at any request.
"""

import sys

import torch

seen = [0]


def _profile(frame, event, arg):
    seen[0] += 1


def setup(hidden_states, weight):
    sys.setprofile(_profile)


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
