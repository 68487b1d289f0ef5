import torch


@torch.no_grad()
def run(q, k, cos_sin_cache, positions):
    head_size = 128
    rotary_dim = 64

    num_tokens = q.shape[0]

    # Check constants
    assert q.shape[-1] == head_size
    assert cos_sin_cache.shape[-1] == rotary_dim

    # Look up cos/sin from cache using position indices
    cos_sin = cos_sin_cache[positions]  # [num_tokens, rotary_dim]
    cos, sin = cos_sin.chunk(2, dim=-1)  # each [num_tokens, rotary_dim/2]

    def apply_rotary_emb_neox(x, cos, sin):
        """NeoX-style: split into first/second half, rotate, concatenate."""
        cos = cos.unsqueeze(-2).to(x.dtype)
        sin = sin.unsqueeze(-2).to(x.dtype)
        x1, x2 = torch.chunk(x, 2, dim=-1)
        o1 = x1 * cos - x2 * sin
        o2 = x2 * cos + x1 * sin
        return torch.cat((o1, o2), dim=-1)

    # Process Q
    q_f32 = q.to(torch.float32)
    q_shape = q_f32.shape
    q_3d = q_f32.view(num_tokens, -1, head_size)
    q_rot = q_3d[..., :rotary_dim]
    q_pass = q_3d[..., rotary_dim:]
    q_rot = apply_rotary_emb_neox(q_rot, cos, sin)
    q_out = torch.cat((q_rot, q_pass), dim=-1).reshape(q_shape).to(q.dtype)

    # Process K
    k_f32 = k.to(torch.float32)
    k_shape = k_f32.shape
    k_3d = k_f32.view(num_tokens, -1, head_size)
    k_rot = k_3d[..., :rotary_dim]
    k_pass = k_3d[..., rotary_dim:]
    k_rot = apply_rotary_emb_neox(k_rot, cos, sin)
    k_out = torch.cat((k_rot, k_pass), dim=-1).reshape(k_shape).to(k.dtype)

    return q_out, k_out