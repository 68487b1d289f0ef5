"""Defect: returns float32 where the definition says bfloat16 (incorrect_dtype)."""

import torch


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()
