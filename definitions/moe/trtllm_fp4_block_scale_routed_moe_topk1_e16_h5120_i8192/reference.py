import torch


@torch.no_grad()
def run(
    topk_ids: torch.Tensor,
    hidden_states: torch.Tensor,
    gemm1_weights: torch.Tensor,
    gemm2_weights: torch.Tensor,
):
    """
    FP4 block scale routed MoE reference — Llama4 pre-computed routing.
    topk_ids: int32 packed; use_routing_scales_on_input=True (weight applied to input).
    Activation: SwiGLU.
    """
    E = 16
    H = 5120
    I = 8192
    TOP_K = 1

    T = topk_ids.shape[0]
    device = topk_ids.device

    expert_idx = (topk_ids >> 16).to(torch.int16).to(torch.int64)
    weight_bits = (topk_ids & 0xFFFF).to(torch.int16)
    probs = weight_bits.view(torch.bfloat16).to(torch.float32)

    A = hidden_states.to(torch.float32)
    W13 = gemm1_weights.to(torch.float32)
    W2 = gemm2_weights.to(torch.float32)
    output = torch.zeros(T, H, dtype=torch.float32, device=device)

    for e in range(E):
        for k in range(TOP_K):
            tok_mask = (expert_idx[:, k] == e)
            if not tok_mask.any():
                continue
            tok_idx = torch.nonzero(tok_mask, as_tuple=False).squeeze(1)
            w = probs[tok_idx, k].unsqueeze(1)
            A_e = A[tok_idx] * w  # scale at input
            g1 = A_e @ W13[e].t()
            act = g1[:, :I]
            gate = g1[:, I:]
            c = torch.nn.functional.silu(gate) * act
            o = c @ W2[e].t()
            output.index_add_(0, tok_idx, o)

    return output.to(torch.bfloat16)
