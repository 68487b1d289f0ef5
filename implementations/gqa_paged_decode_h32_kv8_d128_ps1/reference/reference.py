"""Reference for gqa_paged_decode_h32_kv8_d128_ps1, in float32.

One query token per sequence attends to every key of its sequence (pages
kv_indices[kv_indptr[b]:kv_indptr[b+1]], one token each); query head h uses
KV head h // (32 / 8).  The log-sum-exp is in base 2; a sequence with no key
gets output 0 and lse -inf.
"""

import math

import torch

NUM_QO_HEADS = 32
NUM_KV_HEADS = 8
HEAD_DIM = 128
PAGE_SIZE = 1


@torch.no_grad()
def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    batch_size = q.shape[0]
    assert tuple(q.shape[1:]) == (NUM_QO_HEADS, HEAD_DIM)
    assert tuple(k_cache.shape[1:]) == (PAGE_SIZE, NUM_KV_HEADS, HEAD_DIM)
    assert tuple(v_cache.shape) == tuple(k_cache.shape)
    assert kv_indptr.shape[0] == batch_size + 1
    assert int(kv_indptr[-1]) == kv_indices.shape[0]
    group = NUM_QO_HEADS // NUM_KV_HEADS
    scale = float(sm_scale)
    device = q.device
    output = torch.zeros((batch_size, NUM_QO_HEADS, HEAD_DIM), dtype=torch.bfloat16, device=device)
    lse = torch.full((batch_size, NUM_QO_HEADS), -math.inf, dtype=torch.float32, device=device)
    kv = kv_indptr.tolist()
    for b in range(batch_size):
        pages = kv_indices[kv[b] : kv[b + 1]].long()
        if pages.numel() == 0:
            continue
        keys = k_cache[pages].reshape(-1, NUM_KV_HEADS, HEAD_DIM).float().repeat_interleave(group, dim=1)
        values = v_cache[pages].reshape(-1, NUM_KV_HEADS, HEAD_DIM).float().repeat_interleave(group, dim=1)
        logits = torch.einsum("hd,khd->hk", q[b].float(), keys) * scale  # [heads, kv]
        row_lse = torch.logsumexp(logits, dim=-1)
        weights = torch.exp(logits - row_lse[:, None])
        output[b] = torch.einsum("hk,khd->hd", weights, values).to(torch.bfloat16)
        lse[b] = row_lse / math.log(2.0)
    return output, lse
