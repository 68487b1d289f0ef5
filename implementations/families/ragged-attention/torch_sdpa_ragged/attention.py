"""PyTorch prefill attention for the ragged definitions (``gqa_ragged_*``, ``mla_ragged_*``), with fused SDPA.

Per sequence of the ragged batch: take its keys and values (``kv_indptr`` delimits them), expand the KV heads to
the query heads, and attend with PyTorch's fused scaled-dot-product attention kernel that also returns the
log-sum-exp (flash attention on CUDA, memory-efficient attention where the value head size differs from the
query's as in MLA, the flash kernel for CPU otherwise).  The definitions' causal mask aligns
the last query with the last key, which for ``q`` queries and ``kv`` keys splits in two: the first ``kv - q``
keys are seen by every query (plain attention) and the last ``q`` keys form a square causal block (where
top-left and bottom-right alignment agree).  The two parts are merged through their log-sum-exps.  If the fused
kernels are not available (or refuse the shapes), the same maths runs through matmul and logsumexp in float32.
Heads and head sizes are read from the inputs.  The log-sum-exp is returned in base 2, as the definitions ask.
"""

import math

import torch

FALLBACK_BLOCK = 64
_FUSED = {"usable": True}


def _fused(q, k, v, scale, causal):
    """q [H, n, D], k/v [H, m, D] -> (output [H, n, D], natural-log lse [H, n] float32)."""
    if q.is_cuda and q.shape[-1] != v.shape[-1]:  # MLA's 192/128: the flash kernel wants one head size
        found = torch.ops.aten._scaled_dot_product_efficient_attention(
            q[None], k[None], v[None], None, True, 0.0, causal, scale=scale
        )
        output, lse = found[0], found[1]
    elif q.is_cuda:
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


def _heads(tokens, group):
    """[length, kv_heads, D] -> [query heads, length, D], KV heads repeated."""
    return tokens.transpose(0, 1).repeat_interleave(group, dim=0).contiguous()


@torch.no_grad()
def run(q, k, v, qo_indptr, kv_indptr, sm_scale):
    total_q, num_qo_heads, _ = q.shape
    group = num_qo_heads // k.shape[1]
    scale = float(sm_scale)
    output = torch.zeros((total_q, num_qo_heads, v.shape[2]), dtype=torch.bfloat16, device=q.device)
    lse = torch.full((total_q, num_qo_heads), -math.inf, dtype=torch.float32, device=q.device)
    qo = qo_indptr.tolist()
    kv = kv_indptr.tolist()
    for b in range(len(qo) - 1):
        q_lo, q_hi = qo[b], qo[b + 1]
        kv_lo, kv_hi = kv[b], kv[b + 1]
        n_q, n_kv = q_hi - q_lo, kv_hi - kv_lo
        if n_q <= 0 or n_kv <= 0:
            continue
        keys = _heads(k[kv_lo:kv_hi], group)
        values = _heads(v[kv_lo:kv_hi], group)
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
