"""Fair: writes its answer into a larger buffer of its own and returns a view at an offset into it, computed
in blocks of 16 rows (must pass: a view of the implementation's own memory is a plain tensor)."""

import torch


@torch.no_grad()
def run(hidden_states, weight):
    rows, hidden = hidden_states.shape
    buffer = torch.empty(rows + 3, hidden, dtype=hidden_states.dtype, device=hidden_states.device)
    out = buffer[3:]
    w = weight.float()
    for start in range(0, rows, 16):
        x = hidden_states[start : start + 16].float()
        out[start : start + 16] = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w).to(out.dtype)
    return out
