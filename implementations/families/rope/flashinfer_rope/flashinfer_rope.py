"""FlashInfer baseline for the RoPE definition: ``flashinfer.apply_rope_with_cos_sin_cache_inplace``, NeoX style.

The API the definition names.  It rotates ``q`` and ``k`` in place, and kictl checks that a call leaves its
inputs unchanged, so it runs on copies of both (the copies are part of the timed call, as in FlashInfer-Bench's
own check of this definition); the rotary size is the cache's last axis, the head size ``q``'s.  ``q`` and ``k``
are passed as ``[tokens, heads * head size]`` views, the layout the API documents.
"""

import flashinfer
import torch


@torch.no_grad()
def run(q, k, cos_sin_cache, positions):
    q_out, k_out = q.clone(), k.clone()
    tokens, head_size = q.shape[0], q.shape[-1]
    flashinfer.apply_rope_with_cos_sin_cache_inplace(
        positions, q_out.view(tokens, -1), k_out.view(tokens, -1), head_size, cos_sin_cache, is_neox=True
    )
    return q_out, k_out
