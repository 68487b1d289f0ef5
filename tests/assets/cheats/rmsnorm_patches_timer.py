"""Cheat: replaces the clocks a harness reads so that every call looks ten times faster (timerNotPatched)."""

import time

import torch

_real = time.perf_counter_ns
_start = _real()
time.perf_counter_ns = lambda: _start + (_real() - _start) // 10
_elapsed = torch.cuda.Event.elapsed_time
torch.cuda.Event.elapsed_time = lambda self, end: _elapsed(self, end) / 10


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
