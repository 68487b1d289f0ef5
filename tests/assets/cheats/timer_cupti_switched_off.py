"""Cheat (GPU): switches CUPTI's kernel collection off around its own work and back on before returning, so
that the CUPTI timer sees none of its kernels (and would fall back to the events figure).

CUPTI still delivers the harness's own spin and end marker around the call, and no kernel, copy or memset of
the call's: the harness names it (timerNotPatched). Calling CUPTI is not patching it, so the module watch of
``timerNotPatched`` alone would not see this.
"""

import torch

try:
    from cupti import cupti
except Exception:  # no CUPTI here: nothing to switch off
    cupti = None


def _switch(on):
    if cupti is None:
        return
    kind = cupti.ActivityKind.CONCURRENT_KERNEL
    try:
        (cupti.activity_enable if on else cupti.activity_disable)(kind)
    except Exception:
        pass


@torch.no_grad()
def run(hidden_states, weight):
    _switch(False)
    x = hidden_states.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    _switch(True)
    return out
