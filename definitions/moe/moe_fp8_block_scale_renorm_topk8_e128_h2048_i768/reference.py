import torch


@torch.no_grad()
def run(
    routing_logits: torch.Tensor,
    hidden_states: torch.Tensor,
    hidden_states_scale: torch.Tensor,
    gemm1_weights: torch.Tensor,
    gemm1_weights_scale: torch.Tensor,
    gemm2_weights: torch.Tensor,
    gemm2_weights_scale: torch.Tensor,
):
    """
    FP8 block-scale MoE reference — Renormalize routing (routing_method_type=1).
    Routing: TopK -> Softmax (renormalize). No routing bias.
    FP8 block-scale dequantization: float ≈ fp8 * scale (block size = 128).
    Activation: SwiGLU.
    """
    E = 128
    H = 2048
    I = 768
    TOP_K = 8
    BLOCK = 128

    T = routing_logits.shape[0]
    device = routing_logits.device

    num_h_blocks = H // BLOCK
    num_i_blocks = I // BLOCK

    # 1) FP8 block-scale dequantization of hidden_states
    # hidden_states: [T, H], scale: [H/128, T] (transposed layout)
    A_fp32 = hidden_states.to(torch.float32)
    A_scale = hidden_states_scale.to(torch.float32)            # [H/128, T]
    A_scale_TH = A_scale.permute(1, 0).contiguous()           # [T, H/128]
    A = (A_fp32.view(T, num_h_blocks, BLOCK) *
         A_scale_TH.unsqueeze(-1)).view(T, H)                 # [T, H]

    # W13: [E, 2I, H], scale: [E, (2I)/128, H/128]
    W13_fp32 = gemm1_weights.to(torch.float32)
    S13 = gemm1_weights_scale.to(torch.float32)               # [E, 2I/128, H/128]
    W13 = (W13_fp32.view(E, 2 * num_i_blocks, BLOCK, num_h_blocks, BLOCK) *
           S13.unsqueeze(2).unsqueeze(4)).view(E, 2 * I, H)

    # W2: [E, H, I], scale: [E, H/128, I/128]
    W2_fp32 = gemm2_weights.to(torch.float32)
    S2 = gemm2_weights_scale.to(torch.float32)                # [E, H/128, I/128]
    W2 = (W2_fp32.view(E, num_h_blocks, BLOCK, num_i_blocks, BLOCK) *
          S2.unsqueeze(2).unsqueeze(4)).view(E, H, I)

    # 2) Renormalize routing: TopK -> Softmax
    logits = routing_logits.to(torch.float32)                  # [T, E]
    topk_logits, topk_idx = torch.topk(logits, k=TOP_K, dim=-1)  # [T, K]
    probs = torch.softmax(topk_logits, dim=-1)                 # [T, K]

    # 3) Compute expert outputs and accumulate
    output = torch.zeros(T, H, dtype=torch.float32, device=device)
    for e in range(E):
        for k in range(TOP_K):
            tok_mask = (topk_idx[:, k] == e)
            if not tok_mask.any():
                continue
            tok_idx = torch.nonzero(tok_mask, as_tuple=False).squeeze(1)
            w = probs[tok_idx, k].unsqueeze(1)                 # [Tk, 1]
            g1 = A[tok_idx] @ W13[e].t()                      # [Tk, 2I]
            up, gate = g1[:, :I], g1[:, I:]
            c = torch.nn.functional.silu(gate) * up            # [Tk, I]
            o = (c @ W2[e].t()) * w                            # [Tk, H]
            output.index_add_(0, tok_idx, o)

    return output.to(torch.bfloat16)
