"""PyTorch FP8 per-tensor-scale MoE for the ``trtllm_fp8_per_tensor_scale_moe_*`` definitions with renormalize
routing (those without ``routing_bias``), only the experts in use.

Same maths as the definitions' reference: top-k of the float32 logits, a softmax over those k; per (token,
expert) pair ``g1 = x @ W13.T`` on the FP8 values as float32, ``act = g1[:, :I] * output1_scales_scalar[e]``,
``gate = g1[:, I:] * output1_scales_gate_scalar[e]``, ``(silu(gate) * act) @ W2.T * output2_scales_scalar[e]``
times the routing weight, summed in float32 with experts in ascending order; bfloat16 out.  Where the reference
converts every expert's weights to float32 on every call and loops over all experts with a host sync each, this
sorts the (token, k) pairs by expert, counts them with one host sync, and converts and multiplies only the
experts some token chose.  Sizes are read from the inputs; ``top_k`` (a constant axis) is keyword-only.
"""

import torch


@torch.no_grad()
def run(
    routing_logits,
    hidden_states,
    gemm1_weights,
    output1_scales_scalar,
    output1_scales_gate_scalar,
    gemm2_weights,
    output2_scales_scalar,
    *,
    top_k,
):
    tokens, hidden = hidden_states.shape
    experts, intermediate = gemm1_weights.shape[0], gemm2_weights.shape[2]
    topk_logits, topk_idx = torch.topk(routing_logits.to(torch.float32), k=top_k, dim=-1)
    weights = torch.softmax(topk_logits, dim=-1).flatten()  # [T * K]
    chosen = topk_idx.flatten()
    order = torch.argsort(chosen, stable=True)  # the (token, k) pairs, grouped by expert
    counts = torch.bincount(chosen, minlength=experts).tolist()  # the one host sync

    x = hidden_states.to(torch.float32)
    output = torch.zeros(tokens, hidden, dtype=torch.float32, device=hidden_states.device)
    start = 0
    for expert, count in enumerate(counts):
        if count == 0:
            continue
        pairs = order[start : start + count]
        start += count
        rows = pairs // top_k  # each token at most once per expert
        g1 = x[rows] @ gemm1_weights[expert].to(torch.float32).t()
        act = g1[:, :intermediate] * output1_scales_scalar[expert]
        gate = g1[:, intermediate:] * output1_scales_gate_scalar[expert]
        c = torch.nn.functional.silu(gate) * act
        o = (c @ gemm2_weights[expert].to(torch.float32).t()) * output2_scales_scalar[expert]
        output.index_add_(0, rows, o * weights[pairs].unsqueeze(1))
    return output.to(torch.bfloat16)
