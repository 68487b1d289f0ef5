"""PyTorch sampling for every ``top_k_*``, ``top_p_*`` and ``top_k_top_p_*`` sampling definition, batched.

The definitions' references filter each row in a Python loop; this does the whole batch at once: one descending
sort per row, then on the sorted probabilities a top-k mask (ranks ``k`` and beyond dropped where ``0 < k <
vocab``), the renormalised cumulative sum, a top-p mask (tokens after the first whose cumulative probability
exceeds ``p`` dropped, where ``p < 1``; ``p <= 0`` takes the most probable token), and one
``torch.multinomial`` draw per row over what is kept, mapped back to vocabulary ids.  Top-k is applied before
top-p, as the definitions do.  The three signatures are ``run(probs, top_k)``, ``run(probs, top_p)`` and
``run(probs, top_k, top_p)``: a float32 second argument is ``top_p``.
"""

import torch


def _split(rest):
    if len(rest) == 2:
        return rest[0], rest[1]
    if len(rest) != 1:
        raise TypeError("expected top_k, top_p, or top_k and top_p after probs")
    (only,) = rest
    return (None, only) if only.is_floating_point() else (only, None)


@torch.no_grad()
def run(probs, *rest):
    top_k, top_p = _split(rest)
    vocab = probs.shape[1]
    values, order = torch.sort(probs.float(), dim=-1, descending=True)
    ranks = torch.arange(vocab, device=probs.device)[None, :]
    if top_k is not None:
        k = top_k.long()[:, None]
        limited = (k > 0) & (k < vocab)
        values = torch.where(limited & (ranks >= k), torch.zeros_like(values), values)
    if top_p is not None:
        p = top_p.float()[:, None]
        cdf = torch.cumsum(values, dim=-1)
        cdf = cdf / cdf[:, -1:].clamp_min(torch.finfo(torch.float32).tiny)
        beyond = cdf > p
        remove = torch.zeros_like(beyond)
        remove[:, 1:] = beyond[:, :-1]  # keep the first token that crosses p
        remove = remove & (p < 1.0)
        remove = remove | ((p <= 0.0) & (ranks > 0))  # p <= 0: the most probable token
        values = torch.where(remove, torch.zeros_like(values), values)
    picked = torch.multinomial(values, 1, replacement=True)  # [batch, 1], ranks in the sorted order
    return order.gather(1, picked).squeeze(1).to(torch.int64)
