import torch


@torch.no_grad()
def run(
    routing_logits: torch.Tensor,
    hidden_states: torch.Tensor,
    gemm1_weights: torch.Tensor,
    gemm2_weights: torch.Tensor,
):
    """
    FP4 block scale MoE reference — Renormalize routing (routing_method_type=1).
    Routing: TopK -> Softmax.
    Weights: float32 (kernel uses MxFP4-quantized + shuffled weights).
    Activation: SwiGLU.
    """
    E = 128
    H = 2048
    I = 512
    TOP_K = 10

    T = routing_logits.shape[0]
    device = routing_logits.device

    logits_f32 = routing_logits.to(torch.float32)
    topk_logits, topk_idx = torch.topk(logits_f32, k=TOP_K, dim=-1)
    probs_topk = torch.softmax(topk_logits, dim=-1)
    probs = torch.zeros(T, E, dtype=torch.float32, device=device)
    probs.scatter_(1, topk_idx, probs_topk)

    A = hidden_states.to(torch.float32)
    W13 = gemm1_weights.to(torch.float32)
    W2 = gemm2_weights.to(torch.float32)
    output = torch.zeros(T, H, dtype=torch.float32, device=device)

    for e in range(E):
        tok_mask = (topk_idx == e).any(dim=1)
        if not tok_mask.any():
            continue
        tok_idx = torch.nonzero(tok_mask, as_tuple=False).squeeze(1)
        A_e = A[tok_idx]
        g1 = A_e @ W13[e].t()
        act = g1[:, :I]
        gate = g1[:, I:]
        c = torch.nn.functional.silu(gate) * act
        o = c @ W2[e].t()
        w_tok = probs[tok_idx][:, e]
        output.index_add_(0, tok_idx, o * w_tok.unsqueeze(1))

    return output.to(torch.bfloat16)
