"""FlashInfer baseline for every ``mamba_ssu_decode_*`` definition: ``flashinfer.mamba.selective_state_update``.

The API the definitions name, with the definitions' maths: ``dt`` goes through ``softplus(dt + dt_bias)``
(``dt_softplus=True``), no ``z`` gate, ``D`` as the skip connection, and each sequence's state slot read from
``state_batch_indices`` (a negative slot is padding, FlashInfer's ``pad_slot_id`` of -1).  The kernel updates
the state cache in place, and kictl checks that a call leaves its inputs unchanged, so it works on a copy of the
cache (timed with the call), which is the ``new_state`` output.
"""

import flashinfer.mamba
import torch


@torch.no_grad()
def run(state, x, dt, A, B, C, D, dt_bias, state_batch_indices):
    new_state = state.clone()
    output = flashinfer.mamba.selective_state_update(
        new_state,
        x,
        dt,
        A,
        B,
        C,
        D,
        dt_bias=dt_bias,
        dt_softplus=True,
        state_batch_indices=state_batch_indices,
        pad_slot_id=-1,
    )
    return output, new_state
