"""Cheat: returns at once and lets a thread compute the answer afterwards (noThreadsLeft)."""

import threading
import time

import torch


def _fill(out, hidden_states, weight):
    time.sleep(0.2)
    x = hidden_states.float()
    out.copy_(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float())


@torch.no_grad()
def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    threading.Thread(target=_fill, args=(out, hidden_states, weight), daemon=True).start()
    return out
