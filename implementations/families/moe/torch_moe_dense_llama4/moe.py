"""PyTorch MoE on float32 weights for the ``trtllm_fp4_block_scale_moe_*`` definitions with Llama 4 routing
(those with ``routing_bias``, second), only the experts in use.

These definitions hand the weights over in float32 (the kernel they name quantizes them to MxFP4; their
reference does not), so this is a dense MoE with the reference's maths: top-k of ``sigmoid(logits)`` in float32,
those scores the routing weights, which scale each (token, expert) pair's *input*; ``routing_bias`` is ignored,
as the kernel ignores it for this routing.  Per pair ``g1 = (w * x) @ W13.T``, ``(silu(g1[:, I:]) * g1[:, :I]) @
W2.T`` (the first half is the linear "act", the second the gate), summed in float32 with experts in ascending
order; bfloat16 out.  Where the reference loops over all experts and all k with a host sync each, this sorts the
(token, k) pairs by expert, counts them with one host sync, and multiplies only the experts some token chose.
Sizes are read from the inputs; ``top_k`` (a constant axis) is keyword-only.
"""

import torch


@torch.no_grad()
def run(routing_logits, routing_bias, hidden_states, gemm1_weights, gemm2_weights, *, top_k):
    tokens, hidden = hidden_states.shape
    experts, intermediate = gemm1_weights.shape[0], gemm2_weights.shape[2]
    weights, topk_idx = torch.topk(torch.sigmoid(routing_logits.to(torch.float32)), k=top_k, dim=-1)
    weights, chosen = weights.flatten(), topk_idx.flatten()  # [T * K]
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
        g1 = (x[rows] * weights[pairs].unsqueeze(1)) @ gemm1_weights[expert].to(torch.float32).t()
        act, gate = g1[:, :intermediate], g1[:, intermediate:]
        o = (torch.nn.functional.silu(gate) * act) @ gemm2_weights[expert].to(torch.float32).t()
        output.index_add_(0, rows, o)
    return output.to(torch.bfloat16)
