import torch
import math

CHUNK_Q = 512  # chunk query tokens to bound peak memory for large prefills


@torch.no_grad()
def run(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, sm_scale):
    total_q, num_qo_heads, head_dim = q.shape
    num_pages, page_size, num_kv_heads, _ = k_cache.shape
    batch_size = int(qo_indptr.shape[0]) - 1

    # Check constants
    assert num_qo_heads == 32
    assert num_kv_heads == 4
    assert head_dim == 128
    assert page_size == 1

    device = q.device
    output = torch.zeros((total_q, num_qo_heads, head_dim), dtype=torch.bfloat16, device=device)
    lse = torch.full((total_q, num_qo_heads), -float("inf"), dtype=torch.float32, device=device)

    gqa_ratio = num_qo_heads // num_kv_heads
    q_f32 = q.to(torch.float32)
    # page_size=1: squeeze page dim -> [num_pages, num_kv_heads, head_dim]
    k_flat = k_cache.squeeze(1).to(torch.float32)
    v_flat = v_cache.squeeze(1).to(torch.float32)

    for b in range(batch_size):
        qs = int(qo_indptr[b].item())
        qe = int(qo_indptr[b + 1].item())
        kvs = int(kv_indptr[b].item())
        kve = int(kv_indptr[b + 1].item())
        if qs >= qe or kvs >= kve:
            continue

        page_ids = kv_indices[kvs:kve].to(torch.long)
        k = k_flat[page_ids]  # [num_kv, num_kv_heads, head_dim]
        v = v_flat[page_ids]
        num_kv = k.shape[0]
        num_q = qe - qs
        delta = num_kv - num_q  # causal offset: q_i can attend to kv_j if j <= i + delta

        # Expand KV heads: [num_qo_heads, num_kv, head_dim]
        k_exp = k.permute(1, 0, 2).repeat_interleave(gqa_ratio, dim=0)
        v_exp = v.permute(1, 0, 2).repeat_interleave(gqa_ratio, dim=0)
        kv_pos = torch.arange(num_kv, device=device)

        for chunk_start in range(0, num_q, CHUNK_Q):
            chunk_end = min(chunk_start + CHUNK_Q, num_q)
            q_chunk = q_f32[qs + chunk_start:qs + chunk_end]  # [cq, num_qo_heads, head_dim]

            # logits: [num_qo_heads, cq, num_kv]
            logits = torch.einsum("qhd,hkd->hqk", q_chunk, k_exp) * sm_scale

            # Causal mask: kv_pos > q_idx + delta  =>  mask out future tokens
            q_pos = torch.arange(chunk_start, chunk_end, device=device).unsqueeze(1)  # [cq, 1]
            mask = kv_pos.unsqueeze(0) > q_pos + delta  # [cq, num_kv]
            logits.masked_fill_(mask.unsqueeze(0), float("-inf"))

            lse[qs + chunk_start:qs + chunk_end] = (
                torch.logsumexp(logits, dim=-1) / math.log(2.0)
            ).permute(1, 0)  # [cq, num_qo_heads]

            attn = torch.softmax(logits, dim=-1)  # [num_qo_heads, cq, num_kv]
            output[qs + chunk_start:qs + chunk_end] = torch.einsum(
                "hqk,hkd->qhd", attn, v_exp
            ).to(torch.bfloat16)

    return output, lse