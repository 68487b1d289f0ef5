# ruff: noqa: F821  (a fragment: benchmarks/energy.py appends it to an implementation's entry file, which defines torch and run)
# --------------------------------------------------------------------------- the power-hungry variant (issues 31, 43)
# Appended by benchmarks/energy.py to an honest implementation's entry file (the FlashInfer wrapper of a bundled
# attention definition): the same maths, plus redundant work that changes no output. Each call first launches, on
# a side stream, a Triton kernel of SPIN_BLOCKS blocks that runs chains of fused multiply-adds on registers for
# about SPIN_SHARE of the call's device time (calibrated in setup()), so it runs beside the honest kernel, inside
# its time, on issue slots a memory-bound kernel leaves idle; the call's stream waits for it at the end. The
# latency (the span of the call's device work) should stay within a few percent; the energy per call should rise.
# benchmarks/energy.py writes SPIN_BLOCKS and SPIN_SHARE above this fragment, one pair per variant.

import triton
import triton.language as tl

SPIN_BLOCKS = globals().get("SPIN_BLOCKS", 16)
SPIN_SHARE = globals().get("SPIN_SHARE", 0.7)
SPIN_WIDTH = 128
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
_setup_plain = globals().get("setup")


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


def setup(*args):
    # the wrapper's own code calls setup() too (a plan for index tensors not planned yet): it gets the plan back,
    # and the spin is calibrated once, on the first CUDA inputs
    plan = _setup_plain(*args) if _setup_plain is not None else None
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if _SPIN["iterations"] or first is None or not first.is_cuda:
        return plan
    _SPIN["buffer"] = torch.zeros(SPIN_BLOCKS * SPIN_WIDTH, dtype=torch.float32, device=first.device)
    _SPIN["stream"] = torch.cuda.Stream(device=first.device)
    call_ms = _device_ms(lambda: _run_plain(*args))
    probe = 20000
    _spin(torch.cuda.current_stream(), probe)
    spin_ms = _device_ms(lambda: _spin(torch.cuda.current_stream(), probe))
    _SPIN["iterations"] = max(1, int(probe * SPIN_SHARE * call_ms / max(spin_ms, 1e-6)))
    torch.cuda.synchronize()
    return plan


@torch.no_grad()
def run(*args):
    if not _SPIN["iterations"]:
        return _run_plain(*args)
    side = _SPIN["stream"]
    side.wait_stream(torch.cuda.current_stream())
    _spin(side, _SPIN["iterations"])
    result = _run_plain(*args)
    torch.cuda.current_stream().wait_stream(side)
    return result
