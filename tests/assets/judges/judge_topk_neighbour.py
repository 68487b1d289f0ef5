"""Defect: top-k indices off by one (caught by the index-set judge).

Index 5000 for 5001 is within allclose's ``atol + rtol * |ref|`` (1e-2 + 1e-2 * 5001): the default comparison
passes every index of 99 or more moved to its neighbour.
"""

import torch


@torch.no_grad()
def run(scores):
    found = torch.topk(scores.float(), 8, dim=-1).indices
    return torch.where(found >= 100, found - 1, found).to(torch.int64)
