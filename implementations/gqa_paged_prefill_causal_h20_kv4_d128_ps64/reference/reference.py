"""Reference for gqa_paged_prefill_causal_h20_kv4_d128_ps64, in float32.

Sequence b owns pages kv_indices[kv_indptr[b]:kv_indptr[b+1]]; every page but
the last is full (64 tokens), the last holds kv_last_page_len[b] tokens.  Query
head h uses KV head h // (20 / 4); the causal mask aligns the last query with
the last key (query i of q sees keys 0 .. i + kv - q).  The log-sum-exp is in
base 2; a query that sees no key gets output 0 and lse -inf.  Queries are
processed in blocks to bound memory.
"""

import math

import torch

NUM_QO_HEADS = 20
NUM_KV_HEADS = 4
HEAD_DIM = 128
PAGE_SIZE = 64
QUERY_BLOCK = 64


@torch.no_grad()
def run(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    total_q = q.shape[0]
    assert tuple(q.shape[1:]) == (NUM_QO_HEADS, HEAD_DIM)
    assert tuple(k_cache.shape[1:]) == (PAGE_SIZE, NUM_KV_HEADS, HEAD_DIM)
    assert tuple(v_cache.shape) == tuple(k_cache.shape)
    assert int(qo_indptr[-1]) == total_q
    assert int(kv_indptr[-1]) == kv_indices.shape[0]
    group = NUM_QO_HEADS // NUM_KV_HEADS
    scale = float(sm_scale)
    device = q.device
    output = torch.zeros((total_q, NUM_QO_HEADS, HEAD_DIM), dtype=torch.bfloat16, device=device)
    lse = torch.full((total_q, NUM_QO_HEADS), -math.inf, dtype=torch.float32, device=device)
    qo = qo_indptr.tolist()
    kv = kv_indptr.tolist()
    last_len = kv_last_page_len.tolist()
    for b in range(len(qo) - 1):
        q_lo, q_hi = qo[b], qo[b + 1]
        pages = kv_indices[kv[b] : kv[b + 1]].long()
        if q_hi <= q_lo or pages.numel() == 0:
            continue
        n_kv = (pages.numel() - 1) * PAGE_SIZE + last_len[b]
        keys = k_cache[pages].reshape(-1, NUM_KV_HEADS, HEAD_DIM)[:n_kv].float()
        values = v_cache[pages].reshape(-1, NUM_KV_HEADS, HEAD_DIM)[:n_kv].float()
        keys = keys.repeat_interleave(group, dim=1)  # [kv, heads, dim]
        values = values.repeat_interleave(group, dim=1)
        n_q = q_hi - q_lo
        key_pos = torch.arange(n_kv, device=device)
        for start in range(0, n_q, QUERY_BLOCK):
            stop = min(start + QUERY_BLOCK, n_q)
            block = q[q_lo + start : q_lo + stop].float()
            logits = torch.einsum("nhd,khd->hnk", block, keys) * scale
            query_pos = torch.arange(start, stop, device=device)
            hidden = key_pos[None, :] > query_pos[:, None] + (n_kv - n_q)
            logits = logits.masked_fill(hidden[None], -math.inf)
            row_lse = torch.logsumexp(logits, dim=-1)
            weights = torch.exp(logits - row_lse[..., None]).nan_to_num(0.0)
            out = torch.einsum("hnk,khd->nhd", weights, values)
            output[q_lo + start : q_lo + stop] = out.to(torch.bfloat16)
            lse[q_lo + start : q_lo + stop] = (row_lse / math.log(2.0)).transpose(0, 1)
    return output, lse
