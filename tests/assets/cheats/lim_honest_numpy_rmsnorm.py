"""Fair: RMSNorm in numpy with its default threads, beside the limits' cheats (must pass)."""

import numpy as np
import torch


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float().numpy()
    w = weight.float().numpy()
    scale = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    return torch.from_numpy((x * scale * w).astype(np.float32)).to(hidden_states.dtype)
