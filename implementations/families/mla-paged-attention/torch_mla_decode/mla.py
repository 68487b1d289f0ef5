"""PyTorch MLA decode for every ``mla_paged_decode_*`` definition, vectorised over the batch.

Every sequence's compressed-KV and rope-key tokens are gathered into one padded batch (token ``t`` lives in its
page ``t // page_size`` at slot ``t % page_size``; positions past a sequence's length are masked); the logits
are ``q_nope · ckv + q_pe · kpe`` (matrix-absorbed MLA: the values are the compressed KV itself), with batched
matmuls and a float32 softmax.  No Python loop over sequences.  Sizes come from the inputs; with page size 1 the
definitions pass no ``kv_last_page_len``, with larger pages it comes before ``sm_scale``.  The log-sum-exp is
returned in base 2.
"""

import math

import torch


@torch.no_grad()
def run(q_nope, q_pe, ckv_cache, kpe_cache, kv_indptr, kv_indices, *rest):
    if len(rest) not in (1, 2):
        raise TypeError("expected sm_scale, or kv_last_page_len and sm_scale, after kv_indices")
    last_page_len, sm_scale = (None, rest[0]) if len(rest) == 1 else rest
    batch, heads, ckv_dim = q_nope.shape
    page_size = ckv_cache.shape[1]
    device = q_nope.device
    output = torch.zeros((batch, heads, ckv_dim), dtype=torch.bfloat16, device=device)
    lse = torch.full((batch, heads), -math.inf, dtype=torch.float32, device=device)
    starts = kv_indptr[:batch].long()
    pages = kv_indptr[1 : batch + 1].long() - starts
    last = torch.ones_like(pages) if last_page_len is None else last_page_len[:batch].long()
    lengths = torch.where(pages > 0, (pages - 1) * page_size + last, torch.zeros_like(pages))
    longest = int(lengths.max()) if batch else 0
    if longest <= 0 or kv_indices.numel() == 0:
        return output, lse
    positions = torch.arange(longest, device=device)
    valid = positions[None, :] < lengths[:, None]  # [batch, longest]
    slots = (starts[:, None] + positions[None, :] // page_size).clamp(max=kv_indices.numel() - 1)
    page_ids = kv_indices.long()[slots]
    offsets = (positions % page_size)[None, :].expand(batch, longest)
    compressed = ckv_cache[page_ids, offsets].float()  # [batch, longest, ckv dim]
    rope_keys = kpe_cache[page_ids, offsets].float()  # [batch, longest, kpe dim]
    logits = torch.bmm(q_nope.float(), compressed.transpose(1, 2)) + torch.bmm(q_pe.float(), rope_keys.transpose(1, 2))
    logits = (logits * float(sm_scale)).masked_fill(~valid[:, None, :], -math.inf)  # [batch, heads, longest]
    row_lse = torch.logsumexp(logits, dim=-1)
    weights = torch.exp(logits - row_lse[..., None]).nan_to_num(0.0)
    output = torch.bmm(weights, compressed).to(torch.bfloat16)
    return output, row_lse / math.log(2.0)
