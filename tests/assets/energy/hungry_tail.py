# ruff: noqa: F821  (a fragment: benchmarks/energy.py appends it to an implementation's entry file, which defines torch and run)
# --------------------------------------------------------------------------- the power-hungry variant (issues 31, 43)
# Appended by benchmarks/energy.py to an honest implementation's entry file (the FlashInfer wrapper of a bundled
# attention definition): the same maths, plus redundant work that changes no output. Each call first launches, on
# a side stream, a Triton kernel of SPIN_BLOCKS blocks that runs chains of fused multiply-adds on registers for
# SPIN_SHARE of the wrapper's own device time, so that it runs beside the honest kernel, inside its time, on issue
# slots a memory-bound kernel leaves idle; the call's stream waits for it at the end. The latency (the span of the
# call's device work) should stay within a few percent; the energy per call should rise.
#
# The calibration (setup(), on CUDA inputs) times the wrapper's device work, not its host path: a spin on the
# calling stream keeps the GPU busy while several calls are enqueued behind it, and the events around those calls
# then read the kernels alone. Timing one call on an idle GPU reads the host's launch path (MEASURED.md: 50 µs for
# a 12.5 µs kernel): the H100 call of 2026-12-07 15:45 calibrated that way spun 1.2-6.5x the wrapper's latency.
# It is done once per workload (the inputs' shapes): kictl keeps one worker for all of an implementation's
# workloads, and the 19:08 call, which calibrated once per process, spun every workload as long as the first
# (a constant 200-310 µs added). Each reading is the least of five (another process on the GPU, as kictl's
# other workers are while it prepares, only lengthens one). Then the loop is closed: the variant itself is timed
# the same way, and the spin shortened until the variant's calls take at most LATENCY_SLACK more than the
# wrapper's, whatever keeps the two from overlapping on that workload. benchmarks/energy.py writes SPIN_BLOCKS
# and SPIN_SHARE above this fragment, one pair per variant.

import triton
import triton.language as tl

SPIN_BLOCKS = globals().get("SPIN_BLOCKS", 16)
SPIN_SHARE = globals().get("SPIN_SHARE", 0.6)
# "fma": chains of fused multiply-adds on the CUDA cores; "mma": chains of float16 matrix products on the tensor
# cores, which a memory-bound kernel (paged decode) leaves idle and which draw the most power per SM (issue 43:
# the H100 call of 2026-12-07 21:15 found the FMA spin's energy within the board's tie rule everywhere)
SPIN_KIND = globals().get("SPIN_KIND", "fma")
# "after": the spin is launched after the wrapper's kernels, on a side stream forked before them (it waits for
# none of them): the GPU dispatches the wrapper's blocks first and the spin's on the SMs they leave, so the call's
# span starts with the wrapper's kernel, and a spin short enough ends inside it. "first": launched before them, as
# until stop 60, whose H100 call found every such spin, down to 1.4 µs alone, 2-4% longer than the call: a spin
# that starts first opens the call's span itself, and where the wrapper's blocks fill every SM it runs beside none
SPIN_ORDER = globals().get("SPIN_ORDER", "after")
SPIN_WIDTH = 128
SPIN_TILE = 64  # the "mma" spin's square tile: one 64x64x64 product an iteration
#: iterations the speed probe runs (about half a millisecond on an H100 for each kind)
PROBE_ITERATIONS = {"fma": 200000, "mma": 2000}
#: the variant's calls may take this much longer than the wrapper's, measured in setup(), before the spin shrinks
LATENCY_SLACK = 0.02
_SPIN = {"iterations": 0, "by_shape": {}, "log": []}  # iterations for the workload run, per workload's shapes
# "log": one entry per calibration (benchmarks/energy.py --calibration prints them): the wrapper's device ms a call,
# each spin tried (iterations, its ms alone, the variant's ms a call) and the one kept


@triton.jit(do_not_specialize=["iterations"])  # the probe and the calibrated spin: one compiled kernel
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


@triton.jit(do_not_specialize=["iterations"])
def _spin_mma_kernel(buffer, iterations, TILE: tl.constexpr):
    # the operands in the buffer's first half, each block's product stored in its second half: the operands stay
    # the small values they were drawn as, call after call (stored back over them, the sums would grow to inf)
    rows = tl.arange(0, TILE)
    tile = buffer + tl.program_id(0) * TILE * TILE + rows[:, None] * TILE + rows[None, :]
    a = tl.load(tile).to(tl.float16)
    b = (tl.load(tile) * 0.5).to(tl.float16)
    acc = tl.zeros((TILE, TILE), dtype=tl.float32)
    for _ in range(iterations):
        acc = tl.dot(a, b, acc)
    tl.store(tile + tl.num_programs(0) * TILE * TILE, acc)


def _launch(iterations):
    """The spin kernel on the current stream (Triton's launcher: tens of µs of Python on the host)."""
    buffer = _SPIN["buffer"]
    if SPIN_KIND == "mma":
        _spin_mma_kernel[(SPIN_BLOCKS,)](buffer, iterations, TILE=SPIN_TILE, num_warps=4)
    else:
        _spin_kernel[(SPIN_BLOCKS,)](buffer, iterations, BLOCK=SPIN_WIDTH, num_warps=4)


def _spin(stream, iterations):
    with torch.cuda.stream(stream):
        _launch(iterations)


def _graph(iterations):
    """The spin of ``iterations`` captured once as a CUDA graph (``None`` where capture fails): a replay costs the
    host a few µs where Triton's launcher costs tens. The H100 call of 2026-12-07 21:15 found the variant's energy
    loop host-bound on the short workloads (114 µs a call against the wrapper's 67-70 µs: the GPU idled between
    calls and the joules a call fell), so the variant's calls replay the calibrated spin."""
    graphs = _SPIN.setdefault("graphs", {})
    if iterations not in graphs and "graph_failed" not in _SPIN:
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                _launch(iterations)
            graphs[iterations] = graph
        except Exception as exc:  # a direct launch from here on; the calibration log says why
            _SPIN["graph_failed"] = f"{type(exc).__name__}: {exc}"
    return graphs.get(iterations)


def _spin_call(stream, iterations):
    """The variant's spin beside the wrapper: the captured graph replayed on ``stream``, else a direct launch."""
    graph = _graph(iterations)
    with torch.cuda.stream(stream):
        if graph is not None:
            graph.replay()
        else:
            _launch(iterations)


_run_plain = run
_setup_plain = globals().get("setup")


def _elapsed_ms(enqueue, delay_iterations=0):
    """Device milliseconds of what enqueue() puts on the current stream, behind a spin of delay_iterations (so
    that the host enqueues all of it before the GPU starts), and whether the host was done first."""
    stream = torch.cuda.current_stream()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if delay_iterations:
        _spin(stream, delay_iterations)
    start.record()
    enqueue()
    ahead = not start.query()  # the GPU had not reached the start event when the host was done
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop), ahead


def _iterations_per_ms():
    if "rate" in _SPIN:  # the spin's speed is the GPU's, not the workload's: probed once
        return _SPIN["rate"]
    probe = PROBE_ITERATIONS[SPIN_KIND]  # about half a millisecond: the events' own overhead is small beside it
    _spin(torch.cuda.current_stream(), probe)  # compiles
    times = [_elapsed_ms(lambda: _spin(torch.cuda.current_stream(), probe))[0] for _ in range(5)]
    _SPIN["rate"] = probe / max(min(times), 1e-6)  # the least: another process's share of the GPU only lengthens one
    return _SPIN["rate"]


def _device_ms_per_call(args, rate, call=None, calls=5, readings=5):
    """The device time per call of ``call`` (the wrapper's by default), back to back (warm L2: a lower bound of
    the cold-L2 call kictl times): the least of ``readings`` readings taken with the host ahead of the GPU."""
    call = call or _run_plain
    call(*args)
    delay_ms, taken = 2.0, []
    for _ in range(6 + readings):
        ms, ahead = _elapsed_ms(lambda: [call(*args) for _ in range(calls)], int(rate * delay_ms))
        if not ahead:
            delay_ms *= 2  # the host was slower than the delay: longer, until it is ahead
            continue
        taken.append(ms / calls)
        if len(taken) == readings:
            return min(taken)
    raise RuntimeError(f"hungry variant: could not get the host {calls} calls ahead of a {delay_ms:g} ms spin")


def _shapes(args):
    """A workload's key: its tensors' shapes and dtypes, and its other arguments' values where they hash."""
    key = []
    for value in args:
        if isinstance(value, torch.Tensor):
            key.append((tuple(value.shape), str(value.dtype)))
        else:
            try:
                hash(value)
            except TypeError:
                value = type(value).__name__
            key.append(value)
    return tuple(key)


def setup(*args):
    # the wrapper's own code calls setup() too (a plan for index tensors not planned yet): it gets the plan back,
    # and the spin is calibrated once per workload, on the first CUDA inputs of those shapes
    plan = _setup_plain(*args) if _setup_plain is not None else None
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if _SPIN.get("calibrating") or first is None or not first.is_cuda:
        return plan
    key = _shapes(args)
    if key in _SPIN["by_shape"]:
        _SPIN["iterations"] = _SPIN["by_shape"][key]
        return plan
    _SPIN["calibrating"] = True  # the wrapper's calls below may plan through this setup() again
    try:
        if "buffer" not in _SPIN:
            # small nonzero values: a product of zeros toggles few bits and draws less than real data would; the
            # "mma" tile's sums grow by at most 64 * 5e-7 an iteration (operands below 1e-3 and 5e-4), far from
            # overflow, and its operands and products lie in two halves
            size = SPIN_BLOCKS * (2 * SPIN_TILE * SPIN_TILE if SPIN_KIND == "mma" else SPIN_WIDTH)
            generator = torch.Generator(device=first.device).manual_seed(0)
            values = torch.rand(size, generator=generator, device=first.device, dtype=torch.float32)
            _SPIN["buffer"] = values * 1e-3
            _SPIN["stream"] = torch.cuda.Stream(device=first.device)
        rate = _iterations_per_ms()
        plain_ms = _device_ms_per_call(args, rate)
        iterations, kept, tried = max(1, int(rate * SPIN_SHARE * plain_ms)), 0, []
        for _ in range(10):  # the loop closed: shorter until the variant keeps the wrapper's time
            _SPIN["iterations"] = iterations
            variant_ms = _device_ms_per_call(args, rate, call=_run_hungry)
            tried.append((iterations, iterations / rate, variant_ms))
            if variant_ms <= (1 + LATENCY_SLACK) * plain_ms:
                kept = iterations
                break
            if iterations == 1:
                break
            iterations = max(1, int(iterations * 0.7))
        # no spin that keeps the latency: on this workload the variant is the wrapper (0: run() calls it plainly)
        _SPIN["by_shape"][key] = _SPIN["iterations"] = kept
        launch = "direct: " + _SPIN["graph_failed"] if "graph_failed" in _SPIN else "graph"
        _SPIN["log"].append(
            {
                "shapes": repr(key),
                "plain_ms": plain_ms,
                "tried": tried,
                "kept": kept,
                "rate": rate,
                "launch": f"{launch}, {SPIN_ORDER}",
            }
        )
        torch.cuda.synchronize()
    finally:
        _SPIN["calibrating"] = False
    return plan


@torch.no_grad()
def run(*args):
    if not _SPIN["iterations"] or _SPIN.get("calibrating"):
        return _run_plain(*args)
    return _run_hungry(*args)


def _run_hungry(*args):
    side = _SPIN["stream"]
    side.wait_stream(torch.cuda.current_stream())  # the fork: before the wrapper's kernels, waiting for none of them
    if SPIN_ORDER == "first":
        _spin_call(side, _SPIN["iterations"])
        result = _run_plain(*args)
    else:
        result = _run_plain(*args)
        _spin_call(side, _SPIN["iterations"])
    torch.cuda.current_stream().wait_stream(side)
    return result
