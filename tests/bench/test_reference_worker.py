"""kictl's reference worker, a real process: what it answers is always for the plan it was given."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kictl.bench import wire
from kictl.bench.judge import sandbox
from kictl.bench.judge.implementation import reference_load
from kictl.bench.judge.inputs import materialize_spec, plan_inputs, to_wire, with_secret_values
from kictl.bench.judge.runner import WorkerProcess
from kictl.bench.judge.session import BenchOptions, run_bench, select_workloads
from kictl.bench.wire.values import _rolled
from kictl.bench.worker.main import unpack
from kictl.definitions import signature
from kictl.records import DefinitionSpec
from kictl.store.registry import Registry
from tests.bench.fakes import rmsnorm


def test_inputs_are_made_again_for_another_plan_under_the_same_label(shared_registry: Registry, tmp_path: Path) -> None:
    """Every workload has an "input set 0": a worker that kept its inputs by label answered one workload's
    audit with another's inputs (seen on the H200 with several reference workers, as outputs of the wrong
    shape).  Two workloads and two secrets under one label, one after another, each answered for its own."""
    definition = shared_registry.resolve("rmsnorm_h4096", ["Definition"])
    spec = definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    order = signature(spec, source="rmsnorm").inputs
    workloads = select_workloads(shared_registry, definition, ["b1", "b7"])
    label = "input set 0"
    plans = [
        to_wire(with_secret_values(plan_inputs(spec, w, order, shared_registry.read_blob), secret, label), label)
        for w in workloads
        for secret in ("one secret", "another secret")
    ]
    outputs = (wire.OutputSpec(name="output", shape=(0,), dtype="bfloat16"),)
    worker = WorkerProcess("reference", "cpu", tmp_path, sandbox.Isolation(None))
    try:
        worker.start()
        worker.request(reference_load(spec), 60, frozenset({wire.Loaded.TYPE}))
        for plan in [*plans, plans[0]]:
            answer = worker.request(
                wire.Reference(plan=plan, outputs=outputs, shift=5, perturb=0), 60, frozenset({wire.Outputs.TYPE})
            )
            assert isinstance(answer, wire.Outputs)
            got = unpack(answer.tensors[0])
            args = [materialize_spec(item, "cpu") for item in plan.inputs]
            args = [
                _rolled(value, 5, k) if item.kind == "random" else value
                for k, (value, item) in enumerate(zip(args, plan.inputs, strict=True))
            ]
            want = rmsnorm(*args)
            assert got.shape == want.shape
            assert torch.allclose(got.float(), want.float(), atol=2e-2, rtol=2e-2)
    finally:
        worker.stop()


def test_the_reference_workers_do_not_attach_cupti_and_keep_freed_memory(
    shared_registry: Registry, tmp_path: Path
) -> None:
    """kictl's reference workers time nothing: they start without CUPTI (on a GPU, its activity records
    would cost the reference's many small kernels and their start); the implementations' workers attach it.
    Their malloc keeps freed memory (``worker.keep_freed_memory``); an implementation's does not."""
    from kictl.bench.judge.session import KeptWorkers
    from tests.bench.conftest import IMPLEMENTATIONS, UNSANDBOXED

    kept = KeptWorkers(tmp_path / "kept")
    try:
        report = run_bench(
            shared_registry,
            "rmsnorm_h4096",
            [str(IMPLEMENTATIONS / "rmsnorm_h4096" / "torch_rmsnorm")],
            BenchOptions(
                device="cpu", workloads=("b1",), rounds=1, warmup=0, iterations=3, no_sandbox=bool(UNSANDBOXED)
            ),
            kept=kept,
        )
        assert [run.status for run in report.runs] == ["passed"]
        flags = {worker.label: worker.cupti for worker in kept.workers()}
        assert flags == {"impl0": True, "reference": False}, flags
        # and only the reference's malloc keeps what it frees (an implementation keeps its author's allocator)
        kept_memory = {
            worker.label: worker.process is not None and "--keep-freed-memory" in str(worker.process.args)
            for worker in kept.workers()
        }
        assert kept_memory == {"impl0": False, "reference": True}, kept_memory
    finally:
        kept.close()


_REALLOCATE = """
import ctypes, resource, sys
from kictl.bench.worker.main import keep_freed_memory
if sys.argv[1] == "keep" and not keep_freed_memory():
    print("unsupported"); raise SystemExit
libc = ctypes.CDLL(None)  # torch's CPU allocator takes its memory from the same malloc
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
libc.free.argtypes, libc.memset.argtypes = (ctypes.c_void_p,), (ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t)
for _ in range(4):  # the heap settles in the first two (it may grow twice); the last is what every later block sees
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = libc.malloc(SIZE)
    libc.memset(block, 1, SIZE)
    libc.free(block)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
_BLOCK = 256 << 20  # far above malloc's largest mmap threshold (32 MB), as a large reference's temporaries are


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc (mallopt) on Linux")
def test_keeping_freed_memory_spares_the_kernel_fresh_pages() -> None:
    """A reference worker's blocks of 256 MB reuse the pages of those freed before: without ``keep_freed_memory``
    glibc unmaps a freed block that large and the kernel faults in (and zeroes) every page of the next one."""

    def faults(mode: str) -> int:
        code = _REALLOCATE.replace("SIZE", str(_BLOCK))
        done = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, check=True)
        if done.stdout.strip() == "unsupported":
            pytest.skip("this C library has no mallopt")
        return int(done.stdout)

    pages = _BLOCK // resource.getpagesize()
    assert faults("plain") > pages // 2  # every page of the new block is new (huge pages would be fewer: 1/512)
    assert faults("keep") < pages // 50
