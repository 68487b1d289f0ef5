"""FlashInfer baseline for every ``gdn_prefill_*_k_last`` definition: ``flashinfer.gdn.chunk_gated_delta_rule``.

The API the definitions name, over the variable-length batch (``cu_seqlens``), from the definitions' initial
state (k-last ``[sequences, v heads, V, K]``, float32, as FlashInfer's Hopper kernel takes it) to the final one.
FlashInfer takes the gates themselves, so they are computed first in float32 by PyTorch as the references
define them (``g = exp(-exp(A_log) * softplus(a + dt_bias))``, ``beta = sigmoid(b)``; part of the timed call).
The references normalise neither ``q`` nor ``k`` and take a scale of 0 as ``1/sqrt(K)`` (FlashInfer's ``None``).
The initial state is passed as a copy, in case a kernel writes it, and the final state into a fresh buffer.
FlashInfer's GDN kernels need Hopper (sm90) or later.
"""

import flashinfer.gdn_prefill
import torch
import torch.nn.functional as F


@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    scale = float(scale)
    g = torch.exp(-torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float()))
    beta = torch.sigmoid(b.float())
    final = torch.empty_like(state, dtype=torch.float32)
    output, final = flashinfer.gdn_prefill.chunk_gated_delta_rule(
        q.contiguous(),
        k.contiguous(),
        v.contiguous(),
        g=g,
        beta=beta,
        scale=scale if scale != 0.0 else None,
        initial_state=state.float().clone(),
        output_final_state=True,
        cu_seqlens=cu_seqlens,
        use_qk_l2norm_in_kernel=False,
        output_state=final,
    )
    return output, final
