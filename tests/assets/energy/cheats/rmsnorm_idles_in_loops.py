"""A hostile rmsnorm_h4096 for the energy loop (issue 31): honest whenever its inputs were just staged (every
correctness round and timed call), but a call on the same values as the call before (what a
back-to-back loop is) returns an output it never computed, to draw no energy.  The loop's audit must catch it.

What it returns is its input, not ``torch.empty_like``: fresh memory from the allocator is often the block the
call before freed, which held this very answer, so an empty output would sometimes be right by accident.
"""

import torch

HIDDEN_SIZE = 4096
EPS = 1e-5
_SEEN = {}


@torch.no_grad()
def run(hidden_states, weight):
    # the values and their places (a timed call's inputs are rolled or have a few values swapped)
    flat = hidden_states.float().flatten()
    key = float((flat * torch.arange(1, flat.numel() + 1, dtype=torch.float32)).sum())
    if _SEEN.get("key") == key:
        return hidden_states.clone()
    _SEEN["key"] = key
    normed = torch.nn.functional.rms_norm(hidden_states.float(), (HIDDEN_SIZE,), weight.float(), EPS)
    return normed.to(hidden_states.dtype)
