import torch
import math


@torch.no_grad()
def run(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    total_q, num_qo_heads, head_dim = q.shape
    num_pages, page_size, num_kv_heads, _ = k_cache.shape
    len_indptr = qo_indptr.shape[0]
    num_kv_indices = kv_indices.shape[0]

    # Check constants
    assert num_qo_heads == 32
    assert num_kv_heads == 4
    assert head_dim == 128
    assert page_size == 64

    # Check constraints
    assert total_q == qo_indptr[-1].item()

    device = q.device
    batch_size = len_indptr - 1

    output = torch.zeros(
        (total_q, num_qo_heads, head_dim), dtype=torch.bfloat16, device=device
    )
    lse = torch.full(
        (total_q, num_qo_heads), -float("inf"), dtype=torch.float32, device=device
    )

    gqa_ratio = num_qo_heads // num_kv_heads
    q_f32 = q.to(torch.float32)
    k_cache_f32 = k_cache.to(torch.float32)
    v_cache_f32 = v_cache.to(torch.float32)

    for b in range(batch_size):
        q_start = int(qo_indptr[b].item())
        q_end = int(qo_indptr[b + 1].item())

        kv_start = int(kv_indptr[b].item())
        kv_end = int(kv_indptr[b + 1].item())
        last_page_len = int(kv_last_page_len[b].item())

        if q_start >= q_end or kv_start >= kv_end:
            continue

        page_ids = kv_indices[kv_start:kv_end].to(torch.long)
        num_pages_for_seq = page_ids.shape[0]
        num_full_pages = num_pages_for_seq - 1
        num_kv_tokens = num_full_pages * page_size + last_page_len

        k_batch = torch.zeros((num_kv_tokens, num_kv_heads, head_dim), dtype=torch.float32, device=device)
        v_batch = torch.zeros((num_kv_tokens, num_kv_heads, head_dim), dtype=torch.float32, device=device)

        token_idx = 0
        for p_idx, page_id in enumerate(page_ids):
            if p_idx < num_full_pages:
                k_batch[token_idx:token_idx + page_size] = k_cache_f32[page_id]
                v_batch[token_idx:token_idx + page_size] = v_cache_f32[page_id]
                token_idx += page_size
            else:
                k_batch[token_idx:token_idx + last_page_len] = k_cache_f32[page_id, :last_page_len]
                v_batch[token_idx:token_idx + last_page_len] = v_cache_f32[page_id, :last_page_len]
                token_idx += last_page_len

        q_batch = q_f32[q_start:q_end]
        num_q_tokens = q_batch.shape[0]
        delta = num_kv_tokens - num_q_tokens

        # Vectorized: expand KV heads to match QO heads
        k_exp = k_batch.repeat_interleave(gqa_ratio, dim=1)  # [num_kv, num_qo_heads, head_dim]
        v_exp = v_batch.repeat_interleave(gqa_ratio, dim=1)

        # Process in chunks to avoid OOM for large sequences
        CHUNK = 512
        for q_off in range(0, num_q_tokens, CHUNK):
            q_end_c = min(q_off + CHUNK, num_q_tokens)
            q_c = q_batch[q_off:q_end_c]  # [chunk, num_qo_heads, head_dim]

            max_kv = min(q_end_c + delta, num_kv_tokens)
            if max_kv <= 0:
                continue

            k_c = k_exp[:max_kv]
            v_c = v_exp[:max_kv]

            logits = torch.einsum("qhd,khd->qhk", q_c, k_c) * sm_scale  # [chunk, num_qo_heads, max_kv]

            q_pos = torch.arange(q_off, q_end_c, device=device)
            k_pos = torch.arange(max_kv, device=device)
            mask = k_pos[None, :] <= (q_pos[:, None] + delta)
            logits.masked_fill_(~mask[:, None, :], float("-inf"))

            lse_c = torch.logsumexp(logits, dim=-1) / math.log(2.0)
            lse[q_start + q_off : q_start + q_end_c] = lse_c

            attn = torch.softmax(logits, dim=-1)
            out_c = torch.einsum("qhk,khd->qhd", attn, v_c).to(torch.bfloat16)
            output[q_start + q_off : q_start + q_end_c] = out_c

    return output, lse