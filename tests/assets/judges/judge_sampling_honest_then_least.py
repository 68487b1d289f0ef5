"""Defect: an honest top-k sampler for its first 100 calls (the distribution test's trials), then the least
probable token, outside the filtered distribution (caught by the audit of the timed calls)."""

import torch

CALLS = [0]


@torch.no_grad()
def run(probs, top_k):
    CALLS[0] += 1
    if CALLS[0] > 100:
        return torch.argmin(probs, dim=-1).to(torch.int64)
    out = []
    for row, k in zip(probs.double(), top_k.tolist(), strict=True):
        kept = torch.where(row >= torch.topk(row, k).values[-1], row, torch.zeros_like(row))
        out.append(torch.multinomial(kept / kept.sum(), 1))
    return torch.cat(out).to(torch.int64)
