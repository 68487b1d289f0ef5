import torch
import math


@torch.no_grad()
def run(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    batch_size, num_qo_heads, head_dim = q.shape
    _, page_size, num_kv_heads, _ = k_cache.shape

    # Check constants
    assert num_qo_heads == 24
    assert num_kv_heads == 8
    assert head_dim == 128
    assert page_size == 64

    device = q.device
    output = torch.zeros(
        (batch_size, num_qo_heads, head_dim), dtype=torch.bfloat16, device=device
    )
    lse = torch.full(
        (batch_size, num_qo_heads), -float("inf"), dtype=torch.float32, device=device
    )

    gqa_ratio = num_qo_heads // num_kv_heads
    k_cache_f32 = k_cache.to(torch.float32)
    v_cache_f32 = v_cache.to(torch.float32)
    q_f32 = q.to(torch.float32)

    for b in range(batch_size):
        ps_idx = int(kv_indptr[b].item())
        pe_idx = int(kv_indptr[b + 1].item())
        last_len = int(kv_last_page_len[b].item())
        if ps_idx >= pe_idx:
            output[b].zero_()
            continue

        page_ids = kv_indices[ps_idx:pe_idx].to(torch.long)
        num_full_pages = len(page_ids) - 1

        if num_full_pages > 0:
            k_full = k_cache_f32[page_ids[:num_full_pages]].reshape(-1, num_kv_heads, head_dim)
            v_full = v_cache_f32[page_ids[:num_full_pages]].reshape(-1, num_kv_heads, head_dim)
        else:
            k_full = torch.empty(0, num_kv_heads, head_dim, device=device)
            v_full = torch.empty(0, num_kv_heads, head_dim, device=device)
        k_tokens = torch.cat([k_full, k_cache_f32[page_ids[-1], :last_len]], dim=0)
        v_tokens = torch.cat([v_full, v_cache_f32[page_ids[-1], :last_len]], dim=0)

        k = k_tokens.permute(1, 0, 2).repeat_interleave(gqa_ratio, dim=0)
        v = v_tokens.permute(1, 0, 2).repeat_interleave(gqa_ratio, dim=0)
        q_b = q_f32[b].unsqueeze(1)  # [num_qo_heads, 1, head_dim]

        logits = torch.bmm(q_b, k.transpose(1, 2)).squeeze(1) * sm_scale  # [H, T]
        lse[b] = torch.logsumexp(logits, dim=-1) / math.log(2.0)
        attn = torch.softmax(logits, dim=-1)
        output[b] = torch.bmm(attn.unsqueeze(1), v).squeeze(1).to(torch.bfloat16)

    return output, lse