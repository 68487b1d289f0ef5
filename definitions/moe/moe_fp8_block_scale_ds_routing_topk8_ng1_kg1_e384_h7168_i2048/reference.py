import torch


@torch.no_grad()
def run(
    routing_logits: torch.Tensor,
    routing_bias: torch.Tensor,
    hidden_states: torch.Tensor,
    hidden_states_scale: torch.Tensor,
    gemm1_weights: torch.Tensor,
    gemm1_weights_scale: torch.Tensor,
    gemm2_weights: torch.Tensor,
    gemm2_weights_scale: torch.Tensor,
    local_expert_offset: int,
    routed_scaling_factor: float,
):
    """
    FP8 block-scale MoE reference — DeepSeek routing (routing_method_type=2),
    n_group=1, topk_group=1 (no group selection, direct top-k).
    Routing: sigmoid(logits) + bias -> Top-K -> normalize s_nobias -> * rsf.
    FP8 block-scale dequantization: float ≈ fp8 * scale (block size = 128).
    Activation: SwiGLU.
    """
    E_global = 384
    H = 7168
    I = 2048
    TOP_K = 8
    BLOCK = 128

    T = routing_logits.shape[0]
    E_local = gemm1_weights.shape[0]
    device = routing_logits.device

    num_h_blocks = H // BLOCK
    num_i_blocks = I // BLOCK

    # 1) FP8 block-scale dequantization of hidden_states
    A_fp32 = hidden_states.to(torch.float32)
    A_scale = hidden_states_scale.to(torch.float32)            # [H/128, T]
    A_scale_TH = A_scale.permute(1, 0).contiguous()           # [T, H/128]
    A = (A_fp32.view(T, num_h_blocks, BLOCK) *
         A_scale_TH.unsqueeze(-1)).view(T, H)

    # 2) DeepSeek routing (ng=1, kg=1 => direct top-k)
    logits = routing_logits.to(torch.float32)
    bias = routing_bias.to(torch.float32).reshape(-1)
    s = torch.sigmoid(logits)                                  # [T, E] no bias
    s_with_bias = s + bias                                     # [T, E]
    _, topk_idx = torch.topk(s_with_bias, k=TOP_K, dim=-1)   # [T, K]

    # Combination weights: normalize s (without bias) over selected experts
    M = torch.zeros_like(s)
    M.scatter_(1, topk_idx, 1.0)
    weights = s * M
    weights_sum = weights.sum(dim=-1, keepdim=True).clamp(min=1e-20)
    weights = weights / weights_sum * routed_scaling_factor    # [T, E]

    # 3) Local expert computation (per-expert dequant to keep peak memory low)
    output = torch.zeros(T, H, dtype=torch.float32, device=device)
    local_start = int(local_expert_offset)
    for le in range(E_local):
        ge = local_start + le
        sel_mask = (topk_idx == ge).any(dim=1)
        if not sel_mask.any():
            continue
        tok_idx = torch.nonzero(sel_mask, as_tuple=False).squeeze(1)
        A_e = A.index_select(0, tok_idx)
        W13_e = (gemm1_weights[le].to(torch.float32).view(
            2 * num_i_blocks, BLOCK, num_h_blocks, BLOCK
        ) * gemm1_weights_scale[le].to(torch.float32).unsqueeze(1).unsqueeze(3)).view(2 * I, H)
        g1 = A_e @ W13_e.t()
        up, gate = g1[:, :I], g1[:, I:]
        c = torch.nn.functional.silu(gate) * up
        W2_e = (gemm2_weights[le].to(torch.float32).view(
            num_h_blocks, BLOCK, num_i_blocks, BLOCK
        ) * gemm2_weights_scale[le].to(torch.float32).unsqueeze(1).unsqueeze(3)).view(H, I)
        o = c @ W2_e.t()
        w_tok = weights[tok_idx, ge].unsqueeze(1)
        output.index_add_(0, tok_idx, o * w_tok)

    return output.to(torch.bfloat16)
