import torch


@torch.no_grad()
def run(
    routing_logits: torch.Tensor,
    routing_bias: torch.Tensor,
    hidden_states: torch.Tensor,
    gemm1_weights: torch.Tensor,
    output1_scales_scalar: torch.Tensor,
    output1_scales_gate_scalar: torch.Tensor,
    gemm2_weights: torch.Tensor,
    output2_scales_scalar: torch.Tensor,
):
    """
    FP8 per-tensor scale MoE reference — Llama4 routing (routing_method_type=3).
    Routing: sigmoid(logits) -> Top-1. routing_bias and routed_scaling_factor
    are ignored by the kernel for routing_method_type=3.
    Dequant: float ≈ fp8 * per_expert_scale.
    Activation: SwiGLU.
    """
    E = 16
    H = 5120
    I = 8192
    TOP_K = 1

    T = routing_logits.shape[0]
    device = routing_logits.device

    scores = torch.sigmoid(routing_logits.to(torch.float32))
    topk_weights, topk_idx = torch.topk(scores, k=TOP_K, dim=-1)

    hs_f32 = hidden_states.to(torch.float32)
    W13 = gemm1_weights.to(torch.float32)
    W2 = gemm2_weights.to(torch.float32)
    output = torch.zeros(T, H, dtype=torch.float32, device=device)

    for e in range(E):
        for k in range(TOP_K):
            tok_mask = (topk_idx[:, k] == e)
            if not tok_mask.any():
                continue
            tok_idx = torch.nonzero(tok_mask, as_tuple=False).squeeze(1)
            w = topk_weights[tok_idx, k].unsqueeze(1)  # [Tk, 1]
            A_e = hs_f32[tok_idx] * w  # scale input by routing weight
            g1 = A_e @ W13[e].t()
            act = g1[:, :I] * output1_scales_scalar[e]
            gate = g1[:, I:] * output1_scales_gate_scalar[e]
            c = torch.nn.functional.silu(gate) * act
            o = (c @ W2[e].t()) * output2_scales_scalar[e]
            output.index_add_(0, tok_idx, o)

    return output.to(torch.bfloat16)
