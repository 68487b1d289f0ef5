import torch
import torch.nn.functional as F


@torch.no_grad()
def run(state, x, dt, A, B, C, D, dt_bias, state_batch_indices):
    """
    Mamba2 Selective State Update decode reference implementation.

    Implements the decode-step recurrent update for Mamba2 SSM layers.
    For each batch element, the SSM state is looked up via state_batch_indices,
    updated using the SSM recurrence, and the output is computed.

    SSM recurrence (per head h, group g = h // ratio):
        dt_f[h] = softplus(dt[h] + dt_bias[h])
        dA[h] = exp(A[h] * dt_f[h])          # decay factor
        state[h] = state[h] * dA[h] + (dt_f[h] * x[h])[:, None] * B[g][None, :]
        output[h] = sum(state[h] * C[g][None, :], dim=-1) + x[h] * D[h]
    """
    batch, nheads, head_dim = x.shape
    ngroups, dstate = B.shape[1], B.shape[2]
    ratio = nheads // ngroups

    assert nheads == 128 and head_dim == 64 and dstate == 128 and ngroups == 8

    # Apply dt_bias and softplus: dt_f[b,h,d] = softplus(dt[b,h,d] + dt_bias[h,d])
    dt_f = F.softplus(dt.float() + dt_bias.float())  # (batch, nheads, head_dim)

    # Compute dA = exp(A * dt_f) -- per-element decay factor for state update
    # A: (nheads, head_dim, dstate), dt_f: (batch, nheads, head_dim)
    dA = torch.exp(A.float().unsqueeze(0) * dt_f.unsqueeze(-1))  # (batch, nheads, head_dim, dstate)

    # Expand B and C: groups -> heads (each group shared by ratio=16 heads)
    B_exp = B.float().repeat_interleave(ratio, dim=1)  # (batch, nheads, dstate)
    C_exp = C.float().repeat_interleave(ratio, dim=1)  # (batch, nheads, dstate)

    # Per-element state input contribution: (dt_f * x) outer-product B
    dt_x = dt_f * x.float()  # (batch, nheads, head_dim)
    dB_x = dt_x.unsqueeze(-1) * B_exp.unsqueeze(-2)  # (batch, nheads, head_dim, dstate)

    new_state = state.clone()
    output = torch.zeros(batch, nheads, head_dim, dtype=torch.float32, device=x.device)

    for b in range(batch):
        slot = int(state_batch_indices[b])
        if slot < 0:  # PAD_SLOT_ID: skip update, output zeros
            continue

        # Update SSM state
        s = new_state[slot].float()  # (nheads, head_dim, dstate)
        s = s * dA[b] + dB_x[b]     # (nheads, head_dim, dstate)
        new_state[slot] = s.to(state.dtype)

        # Compute output: y = sum(s * C, dim=dstate) + x * D
        # C_exp[b]: (nheads, dstate) -> unsqueeze(-2): (nheads, 1, dstate)
        y = (s * C_exp[b].unsqueeze(-2)).sum(-1)  # (nheads, head_dim)
        y = y + x[b].float() * D.float()
        output[b] = y

    return output.to(x.dtype), new_state