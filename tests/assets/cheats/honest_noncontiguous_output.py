"""Fair: returns a correct but non-contiguous output (a transposed view of a column-major buffer; must pass)."""

import torch


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    result = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    out = torch.empty(result.shape[1], result.shape[0], dtype=result.dtype, device=result.device).t()
    out.copy_(result)
    assert not out.is_contiguous() or out.shape[0] == 1
    return out
