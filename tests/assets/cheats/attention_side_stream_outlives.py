"""Cheat (GPU): queues its work on a stream of its own behind a 5 ms device sleep and returns at once, so the
work is still running when the call returns (streamOrdered: it ends after the harness's end marker).

The answer is right once the side stream is done. For gqa_paged_decode_h32_kv8_d128_ps1.
"""

import math

import torch

_SIDE = {}


@torch.no_grad()
def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    side = _SIDE.setdefault(q.device, torch.cuda.Stream(device=q.device))
    batch = q.shape[0]
    output = torch.empty((batch, 32, 128), dtype=torch.bfloat16, device=q.device)
    lse = torch.empty((batch, 32), dtype=torch.float32, device=q.device)
    indptr = kv_indptr.tolist()
    side.wait_stream(torch.cuda.current_stream(q.device))
    with torch.cuda.stream(side):
        torch.cuda._sleep(10_000_000)  # about 5 ms at 2 GHz: the call has long returned when the work starts
        for b in range(batch):
            pages = kv_indices[indptr[b] : indptr[b + 1]].long()
            keys = k_cache[pages, 0].float().repeat_interleave(4, dim=1)
            values = v_cache[pages, 0].float().repeat_interleave(4, dim=1)
            logits = torch.einsum("hd,khd->hk", q[b].float(), keys) * float(sm_scale)
            row = torch.logsumexp(logits, dim=-1)
            output[b] = torch.einsum("hk,khd->hd", torch.exp(logits - row[:, None]), values).to(torch.bfloat16)
            lse[b] = row / math.log(2.0)
    return output, lse
