"""Defect: FP8 maths wrong on one output element in ten (caught by the low-bit matched ratio, 0.95).

The product is right, then every tenth element is scaled by 1.5: a matched ratio of about 0.9.
"""

import torch


@torch.no_grad()
def run(x, w, scale):
    out = (x.float() @ w.float().T) * scale.float()
    flat = out.reshape(-1)
    flat[::10] *= 1.5
    return out.to(torch.bfloat16)
