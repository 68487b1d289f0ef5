"""PyTorch FP8 block-scale MoE for every ``moe_fp8_block_scale_renorm_*`` definition, only the experts in use.

Same maths as the definitions' reference: hidden states and weights dequantized as ``fp8 * scale`` per 128x128
block (the hidden states' scales transposed, ``[H/128, T]``), renormalize routing (top-k of the float32 logits,
then a softmax over those k), per (token, expert) pair ``silu(gate) * up`` with ``up, gate = (x @ W13.T)[:, :I],
[:, I:]``, the down projection scaled by the routing weight and summed in float32, experts in ascending order;
bfloat16 out.  Where the reference dequantizes every expert's weights on every call and loops over all experts
and all k with a host sync each, this sorts the (token, k) pairs by expert, counts them with one host sync, and
dequantizes and multiplies only the experts some token chose.  Experts, hidden and intermediate sizes and the
block sizes are read from the inputs; ``top_k`` (a constant axis) comes as a keyword-only parameter.
"""

import torch


def _dequantize(weights, scales):
    """``weights`` [rows, cols] FP8, ``scales`` [rows / block, cols / block]: float32 ``weights * scale``."""
    rows, cols = weights.shape
    row_blocks, col_blocks = scales.shape
    blocks = weights.to(torch.float32).view(row_blocks, rows // row_blocks, col_blocks, cols // col_blocks)
    return (blocks * scales.to(torch.float32)[:, None, :, None]).view(rows, cols)


@torch.no_grad()
def run(
    routing_logits,
    hidden_states,
    hidden_states_scale,
    gemm1_weights,
    gemm1_weights_scale,
    gemm2_weights,
    gemm2_weights_scale,
    *,
    top_k,
):
    tokens, hidden = hidden_states.shape
    experts, intermediate = gemm1_weights.shape[0], gemm2_weights.shape[2]
    a = _dequantize(hidden_states, hidden_states_scale.t())  # [T, H]: one block per token row

    topk_logits, topk_idx = torch.topk(routing_logits.to(torch.float32), k=top_k, dim=-1)
    probs = torch.softmax(topk_logits, dim=-1).flatten()  # [T * K]
    chosen = topk_idx.flatten()
    order = torch.argsort(chosen, stable=True)  # the (token, k) pairs, grouped by expert
    counts = torch.bincount(chosen, minlength=experts).tolist()  # the one host sync

    output = torch.zeros(tokens, hidden, dtype=torch.float32, device=hidden_states.device)
    start = 0
    for expert, count in enumerate(counts):
        if count == 0:
            continue
        pairs = order[start : start + count]
        start += count
        rows = pairs // top_k  # each token at most once per expert
        w13 = _dequantize(gemm1_weights[expert], gemm1_weights_scale[expert])  # [2I, H]
        w2 = _dequantize(gemm2_weights[expert], gemm2_weights_scale[expert])  # [H, I]
        g1 = a[rows] @ w13.t()
        up, gate = g1[:, :intermediate], g1[:, intermediate:]
        o = (torch.nn.functional.silu(gate) * up) @ w2.t()
        output.index_add_(0, rows, o * probs[pairs].unsqueeze(1))
    return output.to(torch.bfloat16)
