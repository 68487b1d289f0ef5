"""Cheat: writes the answer into its input and returns the input (outputsNotAliasInputs)."""

import torch


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    hidden_states.copy_(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float())
    return hidden_states
