"""kictl's parent takes a GPU call's outputs from the stopped worker's device memory (issue 40, ``judge.taken``,
``wire.cuda_ipc``).

The decisions run everywhere: a CPU run never reads device memory whatever the worker says, a GPU run's outputs
must all lie in one GPU's memory, and outputs the parent could not read are missing (never taken from the
worker).  The reading itself needs a GPU: the ``gpu``-marked test opens a real IPC handle of a stopped process.
"""

from __future__ import annotations

import importlib.util
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from kictl.bench import wire
from kictl.bench.judge import staging, taken
from kictl.bench.wire import cuda_ipc
from tests.bench.conftest import CHEATS, cuda_available

HANDLE = "ab" * 64


def _sample(*refs: wire.OutputRef) -> wire.Sample:
    return wire.Sample(ns=1, enqueued_ahead=None, notes=(), outputs=refs)


def test_a_cpu_run_never_reads_device_memory_whatever_the_worker_says() -> None:
    refs = [wire.OutputRef("float32", (4,), (1,), 0x1000, HANDLE, 0, "0000:01:00.0")]
    found = taken.read_outputs(os.getpid(), refs, 1 << 20)
    assert found == "an output said to lie in device memory on a CPU run"


def test_a_gpu_run_s_outputs_must_all_lie_in_one_gpu_s_memory() -> None:
    on_device = wire.OutputRef("float32", (4,), (1,), 0x1000, HANDLE, 0, "0000:01:00.0")
    in_host = wire.OutputRef("float32", (4,), (1,), 0x2000)
    other_gpu = wire.OutputRef("float32", (4,), (1,), 0x3000, HANDLE, 16, "0000:02:00.0")
    for refs in ([on_device, in_host], [on_device, other_gpu]):
        found = taken.read_outputs(os.getpid(), refs, 1 << 20, on_gpu=True)
        assert found == "outputs that do not all lie in one GPU's memory"


def test_device_outputs_are_bounded_before_anything_is_opened() -> None:
    huge = wire.OutputRef("float32", (1 << 30,), (1,), 0x1000, HANDLE, 0, "0000:01:00.0")
    found = taken.read_outputs(os.getpid(), [huge], 1 << 20, on_gpu=True)
    assert found == f"outputs spanning more than {1 << 20} bytes of the worker's memory"


@pytest.mark.skipif(cuda_ipc.available(), reason="a machine with CUDA's driver: the gpu test reads for real")
def test_without_a_driver_the_outputs_are_missing_not_taken_from_the_worker() -> None:
    ref = wire.OutputRef("float32", (4,), (1,), 0x1000, HANDLE, 0, "0000:01:00.0")
    found = taken.read_outputs(os.getpid(), [ref], 1 << 20, on_gpu=True)
    assert isinstance(found, str)
    assert found.startswith("kictl's parent could not read an output in device memory (no CUDA driver library")


def test_a_malformed_handle_is_refused_before_the_driver_is_asked() -> None:
    reader = cuda_ipc.DeviceReader()
    with pytest.raises(cuda_ipc.IpcError):
        # no driver here, or a handle of the wrong length: either way an IpcError, never a crash
        reader.read("0000:01:00.0", [("zz", 0, 4)])


def test_at_a_gpu_call_s_return_the_parent_names_an_output_in_the_timed_inputs() -> None:
    """``taken.take`` with the ranges the worker gave before ``setup()`` (``wire.Armed.inputs``): an output lying
    there is named while the worker is stopped, whatever its notes say; one beside them is not."""
    stopper = "import signal, sys; signal.raise_signal(signal.SIGSTOP); sys.stdin.read()"
    process = subprocess.Popen([sys.executable, "-c", stopper], stdin=subprocess.PIPE)
    try:
        base = 0x7F0000000000
        inputs = taken.ranges([wire.OutputRef("bfloat16", (64, 4096), (4096, 1), base)])
        inside = wire.OutputRef("bfloat16", (64, 4096), (4096, 1), base + 4096, HANDLE, 4096, "bus")
        beside = wire.OutputRef("bfloat16", (64, 4096), (4096, 1), base + 64 * 4096 * 2, HANDLE, 0, "bus")
        found = taken.take(process.pid, _sample(beside, inside), False, 1 << 20, on_gpu=True, inputs_ranges=inputs)
        assert found.aliased == (1,)
        assert not found.unstopped
    finally:
        process.kill()
        process.wait()


def test_a_handle_keeps_all_its_bytes_nul_bytes_included() -> None:
    """A legacy IPC handle holds NUL bytes: read as the ``c_char`` field's value it would stop at the first
    (found on the H100: every handle arrived short, and every honest GPU run's outputs went unread)."""
    raw = bytes([7, 0, 0, 9] * 16)
    assert cuda_ipc.handle_bytes(cuda_ipc.handle_of(raw)) == raw
    with pytest.raises(cuda_ipc.IpcError):
        cuda_ipc.handle_of(raw[:63])


def test_an_output_lying_in_the_timed_inputs_is_named_by_address() -> None:
    inputs = [wire.OutputRef("bfloat16", (64, 4096), (4096, 1), 0x7F0000000000)]
    inside = wire.OutputRef("bfloat16", (64, 4096), (4096, 1), 0x7F0000000000, HANDLE, 0, "bus")
    after = wire.OutputRef("bfloat16", (64, 4096), (4096, 1), 0x7F0000000000 + 64 * 4096 * 2, HANDLE, 0, "bus")
    assert taken.aliased([inside, after], taken.ranges(inputs)) == [0]


def test_a_probe_the_parent_could_not_read_in_device_memory_is_a_problem_never_a_pass() -> None:
    """The GPU session's first check (``loop.RunDriver._probe``, before any import) says what is wrong; a worker
    that names host memory, nothing, or memory the parent cannot open never passes it."""
    probe = wire.OutputRef("int32", (16,), (1,), 0x1000, HANDLE, 0, "0000:01:00.0")
    assert taken.probe_problem(os.getpid(), wire.Probed(error="no IPC handle"), 16) == "no IPC handle"
    assert taken.probe_problem(None, wire.Probed(outputs=(probe,)), 16) == "the worker's process is not known"
    in_host = wire.OutputRef("int32", (16,), (1,), torch.arange(16, dtype=torch.int32).data_ptr())
    for outputs in ((), (in_host,), (probe, probe)):
        problem = taken.probe_problem(os.getpid(), wire.Probed(outputs=outputs), 16)
        assert problem == "the worker did not name the probe's device memory"
    if not cuda_ipc.available():
        problem = taken.probe_problem(os.getpid(), wire.Probed(outputs=(probe,)), 16)
        assert problem is not None
        assert problem.startswith("kictl's parent could not read an output in device memory")


def test_the_refs_travel_the_wire_with_their_handles() -> None:
    ref = wire.OutputRef("float16", (2, 3), (3, 1), 0x7000, HANDLE, 512, "0000:1b:00.0")
    for message in (
        wire.Armed(notes=(), inputs=(ref,)),
        _sample(ref),
        wire.Probe(count=16),
        wire.Probed(outputs=(ref,)),
    ):
        read, write = os.pipe()
        try:
            os.write(write, wire.encode(message))
            os.close(write)
            assert wire.read_frame(read, deadline=time.monotonic() + 5) == message
        finally:
            os.close(read)


# a process holding a known tensor in device memory, saying where (its allocation's IPC handle), then stopping
# itself as kictl's worker does; once it goes on it overwrites the tensor: too late for the parent
HOLDER = """
import signal, sys, torch
from kictl.bench.wire import cuda_ipc
t = torch.arange(4096, dtype=torch.float32, device="cuda").reshape(64, 64)
view = t[:, 1:9:2]
torch.cuda.synchronize()
for tensor in (t, view):
    found = cuda_ipc.export(tensor.data_ptr())
    print(found.handle, found.offset, found.device, tensor.data_ptr(), flush=True)
signal.raise_signal(signal.SIGSTOP)
t.fill_(-1.0)
torch.cuda.synchronize()
sys.stdin.read()
"""


@pytest.fixture
def holder() -> Iterator[tuple[subprocess.Popen[str], list[list[str]]]]:
    process = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    lines = [process.stdout.readline().split() for _ in range(2)]
    yield process, lines
    process.kill()
    process.wait()


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU")
def test_the_parent_reads_a_stopped_process_s_device_memory_through_its_handles(
    holder: tuple[subprocess.Popen[str], list[list[str]]],
) -> None:
    process, lines = holder
    (whole_handle, whole_offset, bus, whole_address), (view_handle, view_offset, view_bus, view_address) = lines
    assert view_handle == whole_handle  # one allocation
    assert view_bus == bus
    refs = (
        wire.OutputRef("float32", (64, 64), (64, 1), int(whole_address), whole_handle, int(whole_offset), bus),
        wire.OutputRef("float32", (64, 4), (64, 2), int(view_address), view_handle, int(view_offset), bus),
    )
    found = taken.take(process.pid, _sample(*refs), True, 1 << 22, on_gpu=True).outputs
    assert isinstance(found, list), found
    expected = torch.arange(4096, dtype=torch.float32).reshape(64, 64)
    assert torch.equal(found[0], expected)
    assert torch.equal(found[1], expected[:, 1:9:2])
    assert not taken.stopped(process.pid)
    # the handle's bytes past the allocation are refused, not read
    beyond = wire.OutputRef("float32", (1 << 20,), (1,), int(whole_address), whole_handle, int(whole_offset), bus)
    os.kill(process.pid, signal.SIGSTOP)
    assert taken.wait_stopped(process.pid)
    refused = taken.read_outputs(process.pid, [beyond], 1 << 23, on_gpu=True)
    os.kill(process.pid, signal.SIGCONT)
    assert isinstance(refused, str)
    assert "outside the allocation" in refused, refused


# ----------------------------------------------------------------- the parent stages a GPU run's timed inputs

SPECS = (
    wire.InputSpec("hidden_states", "random", "bfloat16", (64, 4096), seed=7),
    wire.InputSpec("weight", "random", "bfloat16", (4096,), seed=8),
    wire.InputSpec("eps", "values", "float32", (), scalar=1e-5),
)


def _placed(position: int, device: str = "0000:01:00.0", shape: tuple[int, ...] = (64, 4096)) -> wire.DeviceInput:
    stride = tuple(math.prod(shape[k + 1 :]) for k in range(len(shape)))
    ref = wire.OutputRef("bfloat16", shape, stride, 0x1000, HANDLE, 0, device)
    return wire.DeviceInput(position, ref)


@pytest.mark.parametrize(
    ("staged", "named"),
    [
        ((), "hidden_states, weight"),
        ((_placed(0),), "weight"),
        ((_placed(0), _placed(1, shape=(4096,)), _placed(2, shape=())), "inputs that are not the timed ones"),
        ((_placed(0), _placed(0)), "weight"),
    ],
    ids=["none", "one-missing", "a-scalar-too", "one-twice"],
)
def test_a_gpu_worker_that_does_not_say_where_each_timed_input_lies_is_refused(
    staged: tuple[wire.DeviceInput, ...], named: str
) -> None:
    """The parent writes every random timed input itself: an ``Armed`` that leaves one out (or names another) would
    leave values the worker staged, so the run fails before any timed call, naming what is missing."""
    with pytest.raises(staging.StagingError, match="did not say where its timed inputs lie") as raised:
        staging.DeviceStager(staged, (), SPECS)
    assert named in str(raised.value)


def test_timed_inputs_said_to_lie_on_two_gpus_are_refused() -> None:
    staged = (_placed(0), _placed(1, device="0000:02:00.0", shape=(4096,)))
    with pytest.raises(staging.StagingError, match="one GPU's memory"):
        staging.DeviceStager(staged, (), SPECS)


def test_a_run_with_no_random_input_stages_nothing_and_needs_no_gpu() -> None:
    stager = staging.DeviceStager((), (), SPECS[2:])
    stager.stage(0, 5, 3)
    assert stager.changed() == []
    stager.close()


def _probe_module() -> Any:
    spec = importlib.util.spec_from_file_location("inputs_probe", CHEATS / "inputs_found_in_worker_memory.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _arm(timed: tuple[wire.Plan, ...]) -> wire.Arm:
    plan = wire.Plan("setup", SPECS)
    return wire.Arm(setup_plan=plan, timed_plans=timed, outputs=(), timer="cupti", time_setup=False, flush_bytes=0)


@pytest.mark.parametrize("holds", ["nothing", "seeds", "sets"])
def test_the_inputs_probe_finds_timed_sets_or_seeds_where_setup_can_reach_them(holds: str) -> None:
    """``inputs_found_in_worker_memory`` (the GPU corpus's witness that the worker holds no timed set) does find
    them where they are: an ``Arm`` with the timed plans in a caller's frame, or the sets made before setup()."""
    probe = _probe_module()
    given, weight = torch.randn(64, 8), torch.ones(8)
    request = _arm((wire.Plan("timed 0", SPECS),) if holds == "seeds" else ())  # noqa: F841 - found in this frame
    sets = [[torch.ones(64, 8)], [torch.ones(64, 8)]] if holds == "sets" else []  # noqa: F841 - found by gc
    probe.setup(given, weight)
    assert bool(probe.FOUND) == (holds != "nothing"), probe.FOUND
    honest = given * torch.rsqrt(given.pow(2).mean(-1, keepdim=True) + 1e-5)
    # what it found, it says by answering wrongly: the run fails timedOutputsCorrect
    assert torch.allclose(probe.run(given, weight), honest * 2 if probe.FOUND else honest)
