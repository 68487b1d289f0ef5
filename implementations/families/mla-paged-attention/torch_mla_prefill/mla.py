"""PyTorch MLA prefill for every ``mla_paged_prefill_causal_*`` definition.

Per sequence: gather its compressed-KV and rope-key tokens (trimmed to the last page's length), then every
query and head at once, in blocks of queries: logits ``q_nope · ckv + q_pe · kpe`` in float32 matmuls, the
definitions' causal mask (a sequence's queries are its last tokens: query ``i`` of ``q`` sees keys up to
``kv - q + i``), softmax, and the compressed KV as the values.  The reference loops over single queries; this
does a block of queries and all heads per matmul.  Sizes come from the inputs; with page size 1 the definitions
pass no ``kv_last_page_len``, with larger pages it comes before ``sm_scale``.  The log-sum-exp is returned in
base 2.
"""

import math

import torch

BLOCK = 256


@torch.no_grad()
def run(q_nope, q_pe, ckv_cache, kpe_cache, qo_indptr, kv_indptr, kv_indices, *rest):
    if len(rest) not in (1, 2):
        raise TypeError("expected sm_scale, or kv_last_page_len and sm_scale, after kv_indices")
    last_page_len, sm_scale = (None, rest[0]) if len(rest) == 1 else rest
    total_q, heads, ckv_dim = q_nope.shape
    page_size = ckv_cache.shape[1]
    device = q_nope.device
    scale = float(sm_scale)
    output = torch.zeros((total_q, heads, ckv_dim), dtype=torch.bfloat16, device=device)
    lse = torch.full((total_q, heads), -math.inf, dtype=torch.float32, device=device)
    qo = qo_indptr.tolist()
    kv = kv_indptr.tolist()
    last = [1] * len(qo) if last_page_len is None else last_page_len.tolist()
    for b in range(len(qo) - 1):
        q_lo, q_hi = qo[b], qo[b + 1]
        n_pages = kv[b + 1] - kv[b]
        if q_hi <= q_lo or n_pages <= 0:
            continue
        n_kv = (n_pages - 1) * page_size + last[b]
        pages = kv_indices[kv[b] : kv[b + 1]].long()
        compressed = ckv_cache[pages].reshape(-1, ckv_dim)[:n_kv].float()  # [n_kv, ckv dim]
        rope_keys = kpe_cache[pages].reshape(-1, kpe_cache.shape[-1])[:n_kv].float()
        prefix = n_kv - (q_hi - q_lo)
        keys = torch.arange(n_kv, device=device)
        for start in range(q_lo, q_hi, BLOCK):
            stop = min(start + BLOCK, q_hi)
            logits = q_nope[start:stop].float() @ compressed.T + q_pe[start:stop].float() @ rope_keys.T
            logits = logits * scale  # [block, heads, n_kv]
            visible = keys[None, :] <= (prefix + torch.arange(start - q_lo, stop - q_lo, device=device))[:, None]
            logits = logits.masked_fill(~visible[:, None, :], -math.inf)
            block_lse = torch.logsumexp(logits, dim=-1)
            weights = torch.exp(logits - block_lse[..., None]).nan_to_num(0.0)
            output[start:stop] = (weights @ compressed).to(torch.bfloat16)
            lse[start:stop] = block_lse / math.log(2.0)
    return output, lse
