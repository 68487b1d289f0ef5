"""PyTorch decode attention for every ``gqa_paged_decode_*`` definition, vectorised over the batch.

Every sequence's tokens are gathered into one padded batch ``[batch, longest, kv heads, D]`` (token ``t`` of a
sequence lives in its page ``t // page_size`` at slot ``t % page_size``; positions past its length are masked),
and the one query token per sequence attends to them with batched matmuls and a float32 softmax; the query heads
are viewed as groups, one per KV head, so K/V are never repeated.  No Python loop over sequences.  Heads, head
size and page size are read from the inputs.  With page size 1 the definitions pass no ``kv_last_page_len``
(every page holds one token); with larger pages it comes before ``sm_scale``.  The log-sum-exp is returned in
base 2, as the definitions ask.
"""

import math

import torch


@torch.no_grad()
def run(q, k_cache, v_cache, kv_indptr, kv_indices, *rest):
    if len(rest) not in (1, 2):
        raise TypeError("expected sm_scale, or kv_last_page_len and sm_scale, after kv_indices")
    last_page_len, sm_scale = (None, rest[0]) if len(rest) == 1 else rest
    batch, num_qo_heads, head_dim = q.shape
    page_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = num_qo_heads // num_kv_heads
    device = q.device
    output = torch.zeros((batch, num_qo_heads, head_dim), dtype=torch.bfloat16, device=device)
    lse = torch.full((batch, num_qo_heads), -math.inf, dtype=torch.float32, device=device)
    starts = kv_indptr[:batch].long()
    pages = kv_indptr[1 : batch + 1].long() - starts
    if last_page_len is None:
        last = torch.ones_like(pages)
    else:
        last = last_page_len[:batch].long()
    lengths = torch.where(pages > 0, (pages - 1) * page_size + last, torch.zeros_like(pages))
    longest = int(lengths.max()) if batch else 0
    if longest <= 0 or kv_indices.numel() == 0:
        return output, lse
    positions = torch.arange(longest, device=device)
    valid = positions[None, :] < lengths[:, None]  # [batch, longest]
    slots = (starts[:, None] + positions[None, :] // page_size).clamp(max=kv_indices.numel() - 1)
    page_ids = kv_indices.long()[slots]  # [batch, longest]; padding points at some page, masked below
    offsets = (positions % page_size)[None, :].expand(batch, longest)
    keys = k_cache[page_ids, offsets].float()  # [batch, longest, kv heads, D]
    values = v_cache[page_ids, offsets].float()
    queries = q.float().view(batch, num_kv_heads, group, head_dim)
    logits = torch.einsum("bkgd,blkd->bkgl", queries, keys) * float(sm_scale)
    logits = logits.masked_fill(~valid[:, None, None, :], -math.inf)
    row_lse = torch.logsumexp(logits, dim=-1)  # [batch, kv heads, group]
    weights = torch.exp(logits - row_lse[..., None]).nan_to_num(0.0)
    attended = torch.einsum("bkgl,blkd->bkgd", weights, values)
    output = attended.reshape(batch, num_qo_heads, head_dim).to(torch.bfloat16)
    lse = (row_lse / math.log(2.0)).reshape(batch, num_qo_heads)
    return output, lse
