"""Cheat (class: a process flood; caught by: resource_limit processes).

Threads rather than processes: at import it starts threads until the kernel refuses one, then lets them all
end and runs honestly, so that no thread is left when the timed calls begin.  The sandbox's task limit counts
threads too (``pids.max``), and the refusal stays counted.
"""

import threading

import torch

_STOP = threading.Event()
_THREADS = []
try:
    for _ in range(100_000):
        thread = threading.Thread(target=_STOP.wait, daemon=True)
        thread.start()
        _THREADS.append(thread)
except (RuntimeError, OSError):
    pass
_STOP.set()
for _thread in _THREADS:
    _thread.join()
del _THREADS


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
