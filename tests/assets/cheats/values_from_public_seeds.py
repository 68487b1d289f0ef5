"""Cheat (class 3): rebuilds the inputs from the workload's published seeds (as kictl used to draw them),
precomputes the answers at import and returns them without reading its inputs.

The values kictl uses are seeded from a secret drawn at bench time: wrong answers (incorrect_numerical).
"""

import torch

_answers = {}


def _published(shape, seed, dtype):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=torch.float32).to(dtype)


@torch.no_grad()
def run(hidden_states, weight):
    key = tuple(hidden_states.shape)
    if key not in _answers:
        x = _published(hidden_states.shape, 1, hidden_states.dtype).float()
        w = _published(weight.shape, 2, weight.dtype).float()
        _answers[key] = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w).to(hidden_states.dtype)
    return _answers[key].clone()
