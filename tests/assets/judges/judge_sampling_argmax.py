"""Defect: a sampler that always returns the most probable token (caught by the distribution judge).

Every sample lies inside the top-k/top-p filtered distribution, so a check of the support alone passes it;
all of them fall in the first cell of the distribution test.
"""

import torch


@torch.no_grad()
def run(probs, top_k):
    return torch.argmax(probs, dim=-1).to(torch.int64)
