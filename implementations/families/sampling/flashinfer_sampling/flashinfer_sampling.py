"""FlashInfer baseline for every sampling definition: the ``flashinfer.sampling`` function its ``fi_api`` names.

``run(probs, top_k)`` calls ``top_k_sampling_from_probs``, ``run(probs, top_p)`` ``top_p_sampling_from_probs``
(a float32 second argument is ``top_p``) and ``run(probs, top_k, top_p)`` ``top_k_top_p_sampling_from_probs``
with ``filter_apply_order="top_k_first"``, the definitions' order (top-k, renormalise, then top-p).  The
per-row ``top_k`` and ``top_p`` tensors are passed as they are (FlashInfer takes a tensor or a scalar).
FlashInfer's rejection sampler returns int32 ids; the definitions' ``samples`` are int64, so they are widened.
"""

import flashinfer
import torch


@torch.no_grad()
def run(probs, *rest):
    if len(rest) == 2:
        top_k, top_p = rest
        samples = flashinfer.sampling.top_k_top_p_sampling_from_probs(
            probs, top_k, top_p, filter_apply_order="top_k_first"
        )
    elif len(rest) == 1 and rest[0].is_floating_point():
        samples = flashinfer.sampling.top_p_sampling_from_probs(probs, rest[0])
    elif len(rest) == 1:
        samples = flashinfer.sampling.top_k_sampling_from_probs(probs, rest[0])
    else:
        raise TypeError("expected top_k, top_p, or top_k and top_p after probs")
    return samples.to(torch.int64)
