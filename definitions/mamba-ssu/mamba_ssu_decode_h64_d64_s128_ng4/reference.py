import torch
import torch.nn.functional as F


@torch.no_grad()
def run(state, x, dt, A, B, C, D, dt_bias, state_batch_indices):
    """
    Mamba2 Selective State Update decode reference (TP=2 variant).
    Same math as TP=1 but with nheads=64, ngroups=4 (both halved by TP=2).
    nheads/ngroups ratio remains 16, supported by FlashInfer.
    """
    batch, nheads, head_dim = x.shape
    ngroups, dstate = B.shape[1], B.shape[2]
    ratio = nheads // ngroups

    assert nheads == 64 and head_dim == 64 and dstate == 128 and ngroups == 4

    dt_f = F.softplus(dt.float() + dt_bias.float())  # (batch, nheads, head_dim)
    dA = torch.exp(A.float().unsqueeze(0) * dt_f.unsqueeze(-1))  # (batch, nheads, head_dim, dstate)

    B_exp = B.float().repeat_interleave(ratio, dim=1)  # (batch, nheads, dstate)
    C_exp = C.float().repeat_interleave(ratio, dim=1)  # (batch, nheads, dstate)

    dt_x = dt_f * x.float()  # (batch, nheads, head_dim)
    dB_x = dt_x.unsqueeze(-1) * B_exp.unsqueeze(-2)  # (batch, nheads, head_dim, dstate)

    new_state = state.clone()
    output = torch.zeros(batch, nheads, head_dim, dtype=torch.float32, device=x.device)

    for b in range(batch):
        slot = int(state_batch_indices[b])
        if slot < 0:
            continue
        s = new_state[slot].float()  # (nheads, head_dim, dstate)
        s = s * dA[b] + dB_x[b]
        new_state[slot] = s.to(state.dtype)
        y = (s * C_exp[b].unsqueeze(-2)).sum(-1)  # (nheads, head_dim)
        y = y + x[b].float() * D.float()
        output[b] = y

    return output.to(x.dtype), new_state