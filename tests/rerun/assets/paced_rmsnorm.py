"""rmsnorm_h4096 paced to 50 ms a call: its latency hardly depends on how busy the CPU is.

The rerun tests need a latency that a shared CI machine reproduces within a
tight tolerance; PyTorch's own kernels on a busy CPU do not.
"""

import time

import torch

PACE_S = 0.05


@torch.no_grad()
def run(hidden_states, weight):
    start = time.perf_counter()
    normed = torch.nn.functional.rms_norm(hidden_states.float(), (4096,), weight.float(), 1e-5)
    result = normed.to(hidden_states.dtype)
    left = PACE_S - (time.perf_counter() - start)
    if left > 0:
        time.sleep(left)
    return result
