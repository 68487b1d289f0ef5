"""PyTorch Mamba2 selective state update for every ``mamba_ssu_decode_*`` definition, batched over sequences.

``dt' = softplus(dt + dt_bias)``, ``dA = exp(A dt')``; each sequence's state slot (``state_batch_indices``; a
negative one is padding, skipped) is updated as ``s' = s dA + (dt' x) Bᵀ`` and read out as ``y = s' C + D x``,
with ``B`` and ``C`` shared by groups of heads.  The reference loops over sequences; this gathers the live slots,
updates them in float32 at once and scatters them back into a copy of the cache.  Sizes come from the inputs.
"""

import torch
import torch.nn.functional as F


@torch.no_grad()
def run(state, x, dt, A, B, C, D, dt_bias, state_batch_indices):
    heads, groups = x.shape[1], B.shape[1]
    step = F.softplus(dt.float() + dt_bias.float())  # [batch, heads, dim]
    decay = torch.exp(A.float()[None] * step[..., None])  # [batch, heads, dim, dstate]
    inputs = B.float().repeat_interleave(heads // groups, dim=1)  # [batch, heads, dstate]
    readout = C.float().repeat_interleave(heads // groups, dim=1)
    new_state = state.clone()
    output = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    live = (state_batch_indices >= 0).nonzero().squeeze(1)
    slots = state_batch_indices[live].long()
    updated = state[slots].float() * decay[live] + (step[live] * x[live].float())[..., None] * inputs[live][:, :, None]
    new_state[slots] = updated.to(state.dtype)
    output[live] = (updated * readout[live][:, :, None, :]).sum(-1) + x[live].float() * D.float()
    return output.to(x.dtype), new_state
