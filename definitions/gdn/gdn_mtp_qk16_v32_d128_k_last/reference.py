import math
import torch
import torch.nn.functional as F


def matmul(a: torch.Tensor, b: torch.Tensor):
    """Float32 matmul for numerical stability."""
    return a.float() @ b.float()


@torch.no_grad()
def run(q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b, scale, intermediate_states_buffer=None):
    """
    Gated Delta Net MTP (Multi-Token Prediction) reference implementation.
    
    State layout: [pool_size, H, V, K] (k-last, K dimension at the end)
    
    Gate computation:
    g = exp(-exp(A_log) * softplus(a + dt_bias))
    beta = sigmoid(b)
    
    For each token t in sequence:
        state_new = g_t * state_old + k_t^T @ (beta_t * v_t + (1-beta_t) * k_t @ state_old) - k_t^T @ (k_t @ state_old)
        output_t = scale * q_t @ state_new
        state_old = state_new  # Update for next token
    """
    B, T, num_q_heads, head_size = q.shape
    _, _, num_k_heads, _ = k.shape
    _, _, num_v_heads, _ = v.shape
    pool_size = initial_state.shape[0]
    device = q.device
    
    assert num_q_heads == 16
    assert num_k_heads == 16
    assert num_v_heads == 32
    assert head_size == 128
    assert T > 1, "MTP requires seq_len > 1"
    
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(head_size)
    
    # Compute g and beta from raw parameters
    x = a.float() + dt_bias.float()  # [B, T, HV]
    g = torch.exp(-torch.exp(A_log.float()) * F.softplus(x))  # [B, T, HV]
    beta = torch.sigmoid(b.float())  # [B, T, HV]
    
    # Expand q, k to match v heads
    q_exp = q.repeat_interleave(num_v_heads // num_q_heads, dim=2)  # [B, T, HV, K]
    k_exp = k.repeat_interleave(num_v_heads // num_k_heads, dim=2)  # [B, T, HV, K]
    
    output = torch.zeros(
        (B, T, num_v_heads, head_size), dtype=torch.bfloat16, device=device
    )
    
    # Cache intermediate states if buffer provided
    cache_intermediate = intermediate_states_buffer is not None
    
    # Process each batch independently
    for b_idx in range(B):
        # Get initial state for this batch from pool
        state_idx = int(initial_state_indices[b_idx].item())
        state_HVK = initial_state[state_idx].clone().float().transpose(-1, -2)  # [H,V,K] -> [H,K,V]
        
        # Process tokens sequentially
        for t in range(T):
            q_HK = q_exp[b_idx, t].float()  # [HV, K]
            k_HK = k_exp[b_idx, t].float()  # [HV, K]
            v_HV = v[b_idx, t].float()  # [HV, V]
            g_H = g[b_idx, t]  # [HV]
            beta_H = beta[b_idx, t]  # [HV]
            
            # Per-head processing
            for h_idx in range(num_v_heads):
                q_h = q_HK[h_idx]  # [K]
                k_h = k_HK[h_idx]  # [K]
                v_h = v_HV[h_idx]  # [V]
                h_state = state_HVK[h_idx]  # [K, V]
                g_val = g_H[h_idx]
                beta_val = beta_H[h_idx]
                
                # Delta rule update
                old_state = g_val * h_state
                old_v = k_h @ old_state
                new_v = beta_val * v_h + (1 - beta_val) * old_v
                state_remove = k_h.unsqueeze(1) @ old_v.unsqueeze(0)
                state_update = k_h.unsqueeze(1) @ new_v.unsqueeze(0)
                h_state = old_state - state_remove + state_update
                
                # Compute output
                output[b_idx, t, h_idx] = (scale * (q_h @ h_state)).to(torch.bfloat16)
                
                # Update state for next token
                state_HVK[h_idx] = h_state
            
            # Cache intermediate state if requested
            if cache_intermediate:
                intermediate_states_buffer[state_idx, t] = state_HVK.transpose(-1, -2)  # [H,K,V] -> [H,V,K]
    
    # Final states are already updated in-place in initial_state
    # For reference implementation, we don't modify initial_state (matches disable_state_update=True)
    final_state = initial_state.clone()
    
    return output, final_state