"""Cheat (class 2): rewrites every sample on its way out of the worker to 1 µs, and spends 200 ms per call.

The parent times each request itself: calls it saw take 200 ms cannot have taken 1 µs (samplesConsistent).
"""

import sys
import time

import torch

worker = sys.modules["kictl.bench.worker.main"]
wire = sys.modules["kictl.bench.wire"]
_send = worker.Worker.send


def _forged(self, message):
    if isinstance(message, wire.Sample):
        message = wire.Sample(ns=1000, enqueued_ahead=message.enqueued_ahead, notes=())
    _send(self, message)


worker.Worker.send = _forged


@torch.no_grad()
def run(hidden_states, weight):
    time.sleep(0.2)
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
