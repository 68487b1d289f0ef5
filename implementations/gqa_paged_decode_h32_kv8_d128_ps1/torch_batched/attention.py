"""PyTorch implementation of gqa_paged_decode_h32_kv8_d128_ps1, vectorised over the batch.

Every sequence's keys are gathered into one padded batch ``[batch, longest,
kv heads, D]`` (positions past a sequence's length are masked), and the one
query token per sequence attends to them with batched matmuls and a float32
softmax; the 32 query heads are viewed as 8 groups of 4, one per KV head, so
K/V are never repeated.  No Python loop over sequences: the whole batch
costs a handful of kernels.  The
log-sum-exp is returned in base 2, as the definition asks.
"""

import math

import torch

NUM_QO_HEADS = 32
NUM_KV_HEADS = 8
HEAD_DIM = 128
GROUP = NUM_QO_HEADS // NUM_KV_HEADS


@torch.no_grad()
def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    batch = q.shape[0]
    device = q.device
    output = torch.zeros((batch, NUM_QO_HEADS, HEAD_DIM), dtype=torch.bfloat16, device=device)
    lse = torch.full((batch, NUM_QO_HEADS), -math.inf, dtype=torch.float32, device=device)
    starts = kv_indptr[:-1].long()
    lengths = kv_indptr[1:].long() - starts
    longest = int(lengths.max()) if batch else 0
    if longest <= 0 or kv_indices.numel() == 0:
        return output, lse
    positions = torch.arange(longest, device=device)
    valid = positions[None, :] < lengths[:, None]  # [batch, longest]
    slots = (starts[:, None] + positions[None, :]).clamp(max=kv_indices.numel() - 1)
    pages = kv_indices.long()[slots]  # [batch, longest]; padding points at some page, masked below
    keys = k_cache[:, 0][pages].float()  # [batch, longest, kv heads, D]
    values = v_cache[:, 0][pages].float()
    queries = q.float().view(batch, NUM_KV_HEADS, GROUP, HEAD_DIM)
    logits = torch.einsum("bkgd,blkd->bkgl", queries, keys) * float(sm_scale)
    logits = logits.masked_fill(~valid[:, None, None, :], -math.inf)
    row_lse = torch.logsumexp(logits, dim=-1)  # [batch, kv heads, group]
    weights = torch.exp(logits - row_lse[..., None]).nan_to_num(0.0)
    attended = torch.einsum("bkgl,blkd->bkgd", weights, values)
    output = attended.reshape(batch, NUM_QO_HEADS, HEAD_DIM).to(torch.bfloat16)
    lse = (row_lse / math.log(2.0)).reshape(batch, NUM_QO_HEADS)
    return output, lse
