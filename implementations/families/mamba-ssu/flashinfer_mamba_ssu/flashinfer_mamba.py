"""FlashInfer baseline for every ``mamba_ssu_decode_*`` definition: ``flashinfer.mamba.selective_state_update``.

The API the definitions name, with the definitions' maths: ``dt`` goes through ``softplus(dt + dt_bias)``
(``dt_softplus=True``), no ``z`` gate, ``D`` as the skip connection, and each sequence's state slot read from
``state_batch_indices`` (a negative slot is padding, FlashInfer's ``pad_slot_id`` of -1).  The kernel updates
the state cache in place, and kictl checks that a call leaves its inputs unchanged, so it works on a copy of the
cache (timed with the call), which is the ``new_state`` output.

The kernel takes ``A``, ``D`` and ``dt_bias`` per head and ``dt`` per token and head, broadcast over ``head_dim``
(stride 0), as Mamba-2 holds them and as kictl draws them (``kictl.families.mamba``): each goes in as its first
value along ``head_dim``, made contiguous (a few hundred bytes, copied inside the timed call) and expanded back.
"""

import flashinfer.mamba
import torch


def _per_head(values, free):
    """``values``' first entry along every axis after the first ``free``, broadcast back (stride 0)."""
    index = (slice(None),) * free + (0,) * (values.dim() - free)
    head = values[index].contiguous()
    return head.reshape(head.shape + (1,) * (values.dim() - free)).expand(values.shape)


@torch.no_grad()
def run(state, x, dt, A, B, C, D, dt_bias, state_batch_indices):
    new_state = state.clone()
    output = flashinfer.mamba.selective_state_update(
        new_state,
        x,
        _per_head(dt, 2),
        _per_head(A, 1),
        B,
        C,
        _per_head(D, 1),
        dt_bias=_per_head(dt_bias, 1),
        dt_softplus=True,
        state_batch_indices=state_batch_indices,
        pad_slot_id=-1,
    )
    return output, new_state
