"""FlashInfer baseline for every ``gdn_mtp_*_k_last`` definition: ``flashinfer.gdn_decode.gated_delta_rule_mtp``.

The definitions' reference runs ``seq_len`` gated delta rule steps from each sequence's slot of the k-last state
pool, normalises neither ``q`` nor ``k`` (``use_qk_l2norm=False``), takes a scale of 0 as ``1/sqrt(K)``
(FlashInfer's ``None``), and leaves the pool as it is (``disable_state_update=True``; ``final_state`` is a copy,
made here and timed).  It writes the state after step ``t`` to ``intermediate_states_buffer[slot, t]``, the
sequence's slot of the pool; FlashInfer's kernel writes it to row ``b`` of its buffer, the sequence's position in
the batch.  So the kernel writes into a scratch buffer of ``batch_size`` rows, and each call copies those rows to
the sequences' slots (one ``index_copy_``, timed with the call); slots no sequence uses keep what they held, and
where two sequences share a slot the later one's states stay, as in the reference's loop.  Which rows go where
depends on ``initial_state_indices`` alone, an index tensor kictl never restages: it is worked out once per
indices tensor (its identity and version), in ``setup()`` outside the timed region where kictl calls it.
FlashInfer's GDN kernels need Hopper (sm90) or later.
"""

import flashinfer.gdn_decode
import torch

#: (indices' identity, data pointer, version, shape; buffer's shape) -> (the indices tensor, held so that its
#: identity stays its own; scratch buffer; batch rows kept; their slots; whether every row is kept)
_PLANS = {}


def _plan(initial_state_indices, intermediate_states_buffer):
    key = (
        id(initial_state_indices),
        initial_state_indices.data_ptr(),
        initial_state_indices._version,
        tuple(initial_state_indices.shape),
        tuple(intermediate_states_buffer.shape),
    )
    found = _PLANS.get(key)
    if found is None:
        batch = initial_state_indices.shape[0]
        slots = initial_state_indices.long()
        order = torch.arange(batch, device=slots.device)
        last = torch.full((intermediate_states_buffer.shape[0],), -1, dtype=torch.long, device=slots.device)
        last.scatter_reduce_(0, slots, order, reduce="amax")
        kept = (last[slots] == order).nonzero().flatten()
        scratch = torch.empty(
            (batch, *intermediate_states_buffer.shape[1:]),
            dtype=torch.float32,
            device=intermediate_states_buffer.device,
        )
        found = (initial_state_indices, scratch, kept, slots[kept], bool(kept.numel() == batch))
        _PLANS.clear()  # one workload's plan at a time
        _PLANS[key] = found
    return found


def setup(q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b, scale, intermediate_states_buffer):
    _plan(initial_state_indices, intermediate_states_buffer)


@torch.no_grad()
def run(q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b, scale, intermediate_states_buffer):
    _, scratch, kept, slots, every = _plan(initial_state_indices, intermediate_states_buffer)
    scale = float(scale)
    output, _ = flashinfer.gdn_decode.gated_delta_rule_mtp(
        q,
        k,
        v,
        initial_state,
        initial_state_indices,
        A_log,
        a,
        dt_bias,
        b,
        scale=scale if scale != 0.0 else None,
        intermediate_states_buffer=scratch,
        disable_state_update=True,
        use_qk_l2norm=False,
    )
    intermediate_states_buffer.index_copy_(0, slots, scratch if every else scratch.index_select(0, kept))
    return output, initial_state.clone()
