import torch
import math

CHUNK_Q = 512  # chunk query tokens to bound peak memory for large prefills


@torch.no_grad()
def run(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    total_q, num_qo_heads, head_dim = q.shape
    num_pages, page_size, num_kv_heads, _ = k_cache.shape
    batch_size = int(qo_indptr.shape[0]) - 1

    # Check constants
    assert num_qo_heads == 24
    assert num_kv_heads == 8
    assert head_dim == 128
    assert page_size == 64

    device = q.device
    output = torch.zeros((total_q, num_qo_heads, head_dim), dtype=torch.bfloat16, device=device)
    lse = torch.full((total_q, num_qo_heads), -float("inf"), dtype=torch.float32, device=device)

    gqa_ratio = num_qo_heads // num_kv_heads
    q_f32 = q.to(torch.float32)
    k_cache_f32 = k_cache.to(torch.float32)
    v_cache_f32 = v_cache.to(torch.float32)

    for b in range(batch_size):
        qs = int(qo_indptr[b].item())
        qe = int(qo_indptr[b + 1].item())
        kvs = int(kv_indptr[b].item())
        kve = int(kv_indptr[b + 1].item())
        last_len = int(kv_last_page_len[b].item())
        if qs >= qe or kvs >= kve:
            continue

        page_ids = kv_indices[kvs:kve].to(torch.long)
        num_full_pages = len(page_ids) - 1

        if num_full_pages > 0:
            k_full = k_cache_f32[page_ids[:num_full_pages]].reshape(-1, num_kv_heads, head_dim)
            v_full = v_cache_f32[page_ids[:num_full_pages]].reshape(-1, num_kv_heads, head_dim)
        else:
            k_full = torch.empty(0, num_kv_heads, head_dim, device=device)
            v_full = torch.empty(0, num_kv_heads, head_dim, device=device)
        k_tokens = torch.cat([k_full, k_cache_f32[page_ids[-1], :last_len]], dim=0)
        v_tokens = torch.cat([v_full, v_cache_f32[page_ids[-1], :last_len]], dim=0)

        num_kv = k_tokens.shape[0]
        num_q = qe - qs
        delta = num_kv - num_q

        k_exp = k_tokens.permute(1, 0, 2).repeat_interleave(gqa_ratio, dim=0)
        v_exp = v_tokens.permute(1, 0, 2).repeat_interleave(gqa_ratio, dim=0)
        kv_pos = torch.arange(num_kv, device=device)

        for chunk_start in range(0, num_q, CHUNK_Q):
            chunk_end = min(chunk_start + CHUNK_Q, num_q)
            q_chunk = q_f32[qs + chunk_start:qs + chunk_end]

            logits = torch.einsum("qhd,hkd->hqk", q_chunk, k_exp) * sm_scale

            q_pos = torch.arange(chunk_start, chunk_end, device=device).unsqueeze(1)
            mask = kv_pos.unsqueeze(0) > q_pos + delta
            logits.masked_fill_(mask.unsqueeze(0), float("-inf"))

            lse[qs + chunk_start:qs + chunk_end] = (
                torch.logsumexp(logits, dim=-1) / math.log(2.0)
            ).permute(1, 0)

            attn = torch.softmax(logits, dim=-1)
            output[qs + chunk_start:qs + chunk_end] = torch.einsum(
                "hqk,hkd->qhd", attn, v_exp
            ).to(torch.bfloat16)

    return output, lse