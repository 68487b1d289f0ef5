"""Many large audits (class: many-large-audits; must pass, and kictl's parent stays bounded).

Every call returns correct outputs as a view of a buffer twice their size (each row followed by as many unused
values), so that the memory the parent reads for an audited call spans twice the definition's outputs, the most it
reads.  Run with many timed calls of a large workload, it makes the parent read and judge many large audits: the
parent keeps a bounded number of them (docs/bench.md, "The parent stays bounded"), and the run passes.
"""

import torch


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    rows, hidden = hidden_states.shape
    wide = torch.empty(rows, 2 * hidden, dtype=hidden_states.dtype)
    out = wide[:, :hidden]
    out.copy_(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float())
    return out
