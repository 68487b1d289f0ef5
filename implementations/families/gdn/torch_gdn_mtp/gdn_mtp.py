"""PyTorch gated delta rule MTP for every ``gdn_mtp_*_k_last`` definition, batched over sequences and heads.

Each sequence starts from its state in the pool (``initial_state[initial_state_indices[b]]``, k-last:
``[v heads, V, K]``) and takes ``seq_len`` steps of the decode update: with ``g = exp(-exp(A_log) *
softplus(a + dt_bias))`` and ``beta = sigmoid(b)`` per token and value head, ``old = g S``, ``u = old k``,
``S' = old + (beta (v - u)) kᵀ`` and ``output = scale · S' q``; query and key heads are shared by groups of value
heads.  After step ``t`` the state is written to ``intermediate_states_buffer[index, t]`` (the definitions'
rollback cache: an input the call writes, which kictl judges as an output); slots no sequence uses keep what they
held, and where two sequences share a slot the later one's states stay, as in the reference's loop.  The pool
itself is not updated: ``final_state`` is a copy of ``initial_state``.  The reference loops over sequences,
tokens and heads; this loops over tokens only, in float32.  A scale of 0 means ``1/sqrt(K)``.
"""

import math

import torch
import torch.nn.functional as F


@torch.no_grad()
def run(q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b, scale, intermediate_states_buffer):
    batch, steps, q_heads, key_size = q.shape
    v_heads = v.shape[2]
    scale = float(scale) if float(scale) != 0.0 else 1.0 / math.sqrt(key_size)
    g = torch.exp(-torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float()))  # [batch, steps, v heads]
    beta = torch.sigmoid(b.float())
    queries = q.float().repeat_interleave(v_heads // q_heads, dim=2)  # [batch, steps, v heads, K]
    keys = k.float().repeat_interleave(v_heads // k.shape[2], dim=2)
    values = v.float()  # [batch, steps, v heads, V]
    indices = initial_state_indices.long()
    state = initial_state.float()[indices]  # [batch, v heads, V, K]
    # the sequences whose states the buffer keeps: the last of those sharing a slot
    order = torch.arange(batch, device=indices.device)
    last = torch.full((initial_state.shape[0],), -1, dtype=torch.long, device=indices.device)
    last.scatter_reduce_(0, indices, order, reduce="amax")
    kept = last[indices] == order
    slots = indices[kept]
    output = torch.empty((batch, steps, v_heads, values.shape[-1]), dtype=torch.bfloat16, device=q.device)
    for t in range(steps):
        old = g[:, t, :, None, None] * state
        recalled = torch.einsum("bhvk,bhk->bhv", old, keys[:, t])
        state = old + (beta[:, t, :, None] * (values[:, t] - recalled))[..., None] * keys[:, t, :, None, :]
        output[:, t] = (scale * torch.einsum("bhvk,bhk->bhv", state, queries[:, t])).to(torch.bfloat16)
        intermediate_states_buffer[slots, t] = state[kept].to(intermediate_states_buffer.dtype)
    return output, initial_state.clone()
