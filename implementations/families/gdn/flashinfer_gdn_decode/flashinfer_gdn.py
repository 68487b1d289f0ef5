"""FlashInfer baseline for every ``gdn_decode_*_k_last`` definition: the gated delta rule decode kernel.

The definitions name ``flashinfer.gdn.gated_delta_rule_decode``; their state is k-last (``[batch, v heads, V,
K]``), the layout of FlashInfer's ``gated_delta_rule_decode_pretranspose`` (its ``gated_delta_rule_decode``
takes the k-major layout), so that is the function called, as FlashInfer-Bench's own check of these definitions
does.  The references normalise neither ``q`` nor ``k`` (``use_qk_l2norm=False``), and take a scale of 0 as
``1/sqrt(K)`` (FlashInfer's ``None``).  The kernel updates the state in place and kictl checks that a call leaves
its inputs unchanged, so it works on a copy of the state (timed with the call), which is the ``new_state``
output.  FlashInfer's GDN kernels need Hopper (sm90) or later.
"""

import flashinfer.gdn_decode
import torch


@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, scale):
    scale = float(scale)
    output, new_state = flashinfer.gdn_decode.gated_delta_rule_decode_pretranspose(
        q,
        k,
        v,
        state.clone(),
        A_log,
        a,
        dt_bias,
        b,
        scale=scale if scale != 0.0 else None,
        use_qk_l2norm=False,
    )
    return output, new_state
