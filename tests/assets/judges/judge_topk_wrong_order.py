"""Defect: the right top-k indices in the wrong order (caught by the index-sequence judge where order matters).

The same set, least score first: an index-set judge passes it, as it should where order carries nothing.
"""

import torch


@torch.no_grad()
def run(scores):
    return torch.topk(scores.float(), 8, dim=-1).indices.flip(-1).to(torch.int64)
