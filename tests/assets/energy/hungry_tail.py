# ruff: noqa: F821  (a fragment: benchmarks/energy.py appends it to torch_sdpa's attention.py, which defines torch and run)
# --------------------------------------------------------------------------- the power-hungry variant (issue 31)
# Appended by benchmarks/energy.py to the bundled torch_sdpa implementation: the same maths, plus redundant
# work that changes no output. Each call first launches, on a side stream, a Triton kernel of SPIN_BLOCKS
# blocks (16 of the H200's 132 SMs) that runs a chain of fused multiply-adds on registers for about SPIN_SHARE
# of the call's device time (calibrated in setup()), so it occupies SMs the attention leaves idle; the call's
# stream waits for it at the end. Latency should stay within a few percent; the energy per call should rise.

import triton
import triton.language as tl

SPIN_BLOCKS = 16
SPIN_WIDTH = 128
SPIN_SHARE = 0.7
_SPIN = {"iterations": 0}


@triton.jit
def _spin_kernel(buffer, iterations, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(buffer + offsets)
    b = a + 1.0
    c = a + 2.0
    d = a + 3.0
    for _ in range(iterations):
        a = a * 0.9999999 + 1e-7
        b = b * 0.9999998 + 2e-7
        c = c * 0.9999997 + 3e-7
        d = d * 0.9999996 + 4e-7
    tl.store(buffer + offsets, a + b + c + d)


def _spin(stream, iterations):
    buffer = _SPIN["buffer"]
    with torch.cuda.stream(stream):
        _spin_kernel[(SPIN_BLOCKS,)](buffer, iterations, BLOCK=SPIN_WIDTH, num_warps=4)


_run_plain = run


def _device_ms(function, repeat=5):
    times = []
    for _ in range(repeat):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        function()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[len(times) // 2]


def setup(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, sm_scale):
    if not q.is_cuda:
        return
    _SPIN["buffer"] = torch.zeros(SPIN_BLOCKS * SPIN_WIDTH, dtype=torch.float32, device=q.device)
    _SPIN["stream"] = torch.cuda.Stream(device=q.device)
    call_ms = _device_ms(lambda: _run_plain(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, sm_scale))
    probe = 20000
    _spin(torch.cuda.current_stream(), probe)
    spin_ms = _device_ms(lambda: _spin(torch.cuda.current_stream(), probe))
    _SPIN["iterations"] = max(1, int(probe * SPIN_SHARE * call_ms / max(spin_ms, 1e-6)))
    torch.cuda.synchronize()


@torch.no_grad()
def run(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, sm_scale):
    if not q.is_cuda or not _SPIN["iterations"]:
        return _run_plain(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, sm_scale)
    side = _SPIN["stream"]
    side.wait_stream(torch.cuda.current_stream())
    _spin(side, _SPIN["iterations"])
    result = _run_plain(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, sm_scale)
    torch.cuda.current_stream().wait_stream(side)
    return result
