"""PyTorch gated delta rule decode for every ``gdn_decode_*_k_last`` definition, batched over sequences and heads.

With the k-last state ``S [batch, v heads, V, K]``, the gate ``g = exp(-exp(A_log) * softplus(a + dt_bias))`` and
``beta = sigmoid(b)`` per value head, the definitions' update is ``old = g S``, ``u = old k`` (what the state
recalls for the key), ``S' = old + (beta (v - u)) kᵀ`` (one rank-1 correction) and ``output = scale · S' q``; the
query and key heads are shared by groups of value heads.  The references loop over sequences and heads; this is a
handful of batched kernels in float32.  A scale of 0 means ``1/sqrt(K)``.
"""

import math

import torch
import torch.nn.functional as F


@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, scale):
    q_heads, key_size = q.shape[2], q.shape[3]
    v_heads = v.shape[2]
    scale = float(scale) if float(scale) != 0.0 else 1.0 / math.sqrt(key_size)
    g = torch.exp(-torch.exp(A_log.float()) * F.softplus(a[:, 0].float() + dt_bias.float()))  # [batch, v heads]
    beta = torch.sigmoid(b[:, 0].float())
    queries = q[:, 0].float().repeat_interleave(v_heads // q_heads, dim=1)  # [batch, v heads, K]
    keys = k[:, 0].float().repeat_interleave(v_heads // k.shape[2], dim=1)
    values = v[:, 0].float()  # [batch, v heads, V]
    old = g[..., None, None] * state.float()  # [batch, v heads, V, K]
    recalled = torch.einsum("bhvk,bhk->bhv", old, keys)
    correction = (beta[..., None] * (values - recalled))[..., None] * keys[:, :, None, :]
    new_state = old + correction
    output = scale * torch.einsum("bhvk,bhk->bhv", new_state, queries)
    return output[:, None].to(torch.bfloat16), new_state
