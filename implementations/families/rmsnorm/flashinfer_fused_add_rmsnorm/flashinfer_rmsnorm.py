"""FlashInfer baseline for every ``fused_add_rmsnorm_h*`` definition: ``flashinfer.norm.fused_add_rmsnorm``.

The API the definitions name (``fi_api:flashinfer.norm.fused_add_rmsnorm``), with the catalogue's epsilon, 1e-6.
The kernel works in place (``residual += input``, then ``input = rmsnorm(residual) * weight``), and kictl
checks that a call leaves its inputs unchanged, so it runs on copies of both inputs; the copies are part of the
timed call (two more reads and writes of the activations: this baseline is slower than the kernel alone, and
says so).  The result is the copy of ``hidden_states``.
"""

import flashinfer
import torch

EPS = 1e-6


@torch.no_grad()
def run(hidden_states, residual, weight):
    output = hidden_states.clone()
    flashinfer.norm.fused_add_rmsnorm(output, residual.clone(), weight, eps=EPS)
    return output
