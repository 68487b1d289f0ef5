"""PyTorch prefill attention for every ``gqa_paged_prefill_causal_*`` definition, with PyTorch's fused SDPA kernel.

Per sequence: gather the sequence's K/V pages (trimmed to its last page's length), expand the KV heads to the
query heads, and attend with PyTorch's fused scaled-dot-product attention kernel that also returns the
log-sum-exp (flash attention on CUDA, the flash kernel for CPU otherwise).  The definitions' causal mask aligns
the last query with the last key, which for ``q`` queries and ``kv`` keys splits in two: the first ``kv - q``
keys are seen by every query (plain attention) and the last ``q`` keys form a square causal block (where
top-left and bottom-right alignment agree).  The two parts are merged through their log-sum-exps.  If the fused
kernels are not available, the same maths runs through matmul and logsumexp in float32.  Heads, head size and
page size are read from the inputs; with page size 1 the definitions pass no ``kv_last_page_len`` (every page
holds one token), with larger pages it comes before ``sm_scale``.  The log-sum-exp is returned in base 2.
"""

import math

import torch

FALLBACK_BLOCK = 64
_FUSED = {"usable": True}


def _fused(q, k, v, scale, causal):
    """q [H, n, D], k/v [H, m, D] -> (output [H, n, D], natural-log lse [H, n] float32)."""
    if q.is_cuda:
        found = torch.ops.aten._scaled_dot_product_flash_attention(
            q[None], k[None], v[None], 0.0, causal, False, scale=scale
        )
        output, lse = found[0], found[1]
    else:
        output, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q[None], k[None], v[None], 0.0, causal, scale=scale
        )
    heads, n = q.shape[0], q.shape[1]
    lse = lse[0]
    if lse.shape[0] != heads and lse.shape[-1] == heads:  # [n, H] in some versions
        lse = lse.transpose(0, 1)
    lse = lse[:, :n]  # some kernels pad the query axis
    if tuple(output.shape) != (1, heads, n, v.shape[-1]) or tuple(lse.shape) != (heads, n):
        raise RuntimeError("unexpected shapes from the fused attention kernel")
    return output[0].float(), lse.float()


def _explicit(q, k, v, scale, causal):
    """The same as ``_fused`` with matmul and logsumexp, in blocks of queries."""
    n, m = q.shape[1], k.shape[1]
    output = torch.empty((q.shape[0], n, v.shape[-1]), dtype=torch.float32, device=q.device)
    lse = torch.empty((q.shape[0], n), dtype=torch.float32, device=q.device)
    keys, values = k.float(), v.float()
    for start in range(0, n, FALLBACK_BLOCK):
        stop = min(start + FALLBACK_BLOCK, n)
        logits = torch.matmul(q[:, start:stop].float(), keys.transpose(1, 2)) * scale
        if causal:
            rows = torch.arange(start, stop, device=q.device)[:, None]
            cols = torch.arange(m, device=q.device)[None, :]
            logits = logits.masked_fill(cols > rows, -math.inf)
        block_lse = torch.logsumexp(logits, dim=-1)
        weights = torch.exp(logits - block_lse[..., None]).nan_to_num(0.0)
        output[:, start:stop] = torch.matmul(weights, values)
        lse[:, start:stop] = block_lse
    return output, lse


def _attend(q, k, v, scale, causal):
    if _FUSED["usable"]:
        try:
            return _fused(q, k, v, scale, causal)
        except (RuntimeError, AttributeError, NotImplementedError):
            _FUSED["usable"] = False
    return _explicit(q, k, v, scale, causal)


def _merge(first, second):
    """Two partial attentions over disjoint keys, combined by their log-sum-exps."""
    (out_a, lse_a), (out_b, lse_b) = first, second
    lse = torch.logaddexp(lse_a, lse_b)
    weight_a = torch.exp(lse_a - lse).nan_to_num(0.0)[..., None]
    weight_b = torch.exp(lse_b - lse).nan_to_num(0.0)[..., None]
    return out_a * weight_a + out_b * weight_b, lse


def _heads(cache, pages, length, group):
    """[pages, page, kv_heads, D] gathered -> [query heads, length, D], KV heads repeated."""
    tokens = cache[pages].reshape(-1, cache.shape[2], cache.shape[3])[:length]
    return tokens.transpose(0, 1).repeat_interleave(group, dim=0).contiguous()


@torch.no_grad()
def run(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, *rest):
    if len(rest) not in (1, 2):
        raise TypeError("expected sm_scale, or kv_last_page_len and sm_scale, after kv_indices")
    kv_last_page_len, sm_scale = (None, rest[0]) if len(rest) == 1 else rest
    total_q, num_qo_heads, _ = q.shape
    page_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = num_qo_heads // num_kv_heads
    scale = float(sm_scale)
    output = torch.zeros((total_q, num_qo_heads, v_cache.shape[3]), dtype=torch.bfloat16, device=q.device)
    lse = torch.full((total_q, num_qo_heads), -math.inf, dtype=torch.float32, device=q.device)
    qo = qo_indptr.tolist()
    kv = kv_indptr.tolist()
    last = [1] * len(qo) if kv_last_page_len is None else kv_last_page_len.tolist()
    for b in range(len(qo) - 1):
        q_lo, q_hi = qo[b], qo[b + 1]
        n_pages = kv[b + 1] - kv[b]
        n_q = q_hi - q_lo
        if n_q <= 0 or n_pages <= 0:
            continue
        n_kv = (n_pages - 1) * page_size + last[b]
        pages = kv_indices[kv[b] : kv[b + 1]].long()
        keys = _heads(k_cache, pages, n_kv, group)
        values = _heads(v_cache, pages, n_kv, group)
        queries = q[q_lo:q_hi].transpose(0, 1).contiguous()  # [heads, n_q, D]
        seen = n_kv - n_q  # keys every query sees before its own diagonal
        if seen >= 0:
            tail = _attend(queries, keys[:, seen:], values[:, seen:], scale, True)
            result = (
                tail if seen == 0 else _merge(_attend(queries, keys[:, :seen], values[:, :seen], scale, False), tail)
            )
            first = 0
        else:  # more queries than keys: the first -seen queries see nothing
            first = -seen
            result = _attend(queries[:, first:].contiguous(), keys, values, scale, True)
        part_out, part_lse = result
        output[q_lo + first : q_hi] = part_out.transpose(0, 1).to(torch.bfloat16)
        lse[q_lo + first : q_hi] = (part_lse / math.log(2.0)).transpose(0, 1)
    return output, lse
