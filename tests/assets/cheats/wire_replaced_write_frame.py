"""Cheat (class: a replaced wire function; caught by: timerNotPatched).

Replaces ``kictl.bench.wire.write_frame`` (a module kictl's watch did not cover before issue 27) so that every
``Sample`` leaves the worker saying 1 µs, and spends 30 ms a call.  On the CPU the figure is now the parent's
own clock, so the forged number moves nothing, and ``kictl.bench.wire`` is among the modules whose functions
must stay kictl's: the run is refused.
"""

import dataclasses
import sys
import time

import torch

wire = sys.modules["kictl.bench.wire"]
_write = wire.write_frame


def _forged(fd, message, region=None, nonce=0):
    if isinstance(message, wire.Sample) and message.ns is not None:
        message = dataclasses.replace(message, ns=1000)
    _write(fd, message, region, nonce)


wire.write_frame = _forged


@torch.no_grad()
def run(hidden_states, weight):
    time.sleep(0.03)
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
