"""PyTorch rotary embedding (NeoX style, cos/sin cache) for the ``rope_with_cos_sin_cache_*`` definitions.

The outputs start as copies of ``q`` and ``k``; only their rotary part (the cache's last axis, ``rotary_dim``,
split in a cosine and a sine half) is recomputed: with ``x1, x2`` the two halves of that part,
``(x1 cos - x2 sin, x2 cos + x1 sin)`` in float32, written back in the inputs' dtype.  The pass-through part is
never converted or concatenated, unlike the reference.  Sizes come from the inputs.
"""

import torch


def _rotate(x, cos, sin, rotary):
    out = x.clone()
    half = rotary // 2
    x1 = x[..., :half].float()
    x2 = x[..., half:rotary].float()
    out[..., :half] = (x1 * cos - x2 * sin).to(x.dtype)
    out[..., half:rotary] = (x2 * cos + x1 * sin).to(x.dtype)
    return out


@torch.no_grad()
def run(q, k, cos_sin_cache, positions):
    rotary = cos_sin_cache.shape[-1]
    cos, sin = cos_sin_cache[positions].float().chunk(2, dim=-1)  # [tokens, rotary / 2] each
    cos, sin = cos[:, None, :], sin[:, None, :]  # one per token, every head
    return _rotate(q, cos, sin, rotary), _rotate(k, cos, sin, rotary)
