"""kictl's parent takes a CPU call's outputs from the stopped worker's memory (issue 40, ``judge.taken``)."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kictl.bench import wire
from kictl.bench.judge import taken

# a process holding a known tensor, saying where it lies, then stopping itself as kictl's worker does
# (no torch in it: it starts in milliseconds; a 4 x 6 float32 tensor's bytes, and a view starting at [0, 1])
HOLDER = """
import array, signal, sys
t = array.array("f", [float(n) for n in range(24)])
whole = t.buffer_info()[0]
print(whole, whole + 4, flush=True)
if sys.argv[1] == "stop":
    signal.raise_signal(signal.SIGSTOP)
    for n in range(24):
        t[n] = -1.0  # what it writes once it goes on: too late for the parent
sys.stdin.read()
"""


@pytest.fixture
def holder(request: pytest.FixtureRequest) -> Iterator[tuple[subprocess.Popen[str], int, int]]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, request.param], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    whole, view = (int(word) for word in process.stdout.readline().split())
    yield process, whole, view
    process.kill()
    process.wait()


@pytest.mark.parametrize("holder", ["stop"], indirect=True)
def test_the_parent_reads_what_the_call_returned_before_the_worker_goes_on(
    holder: tuple[subprocess.Popen[str], int, int],
) -> None:
    process, whole, view = holder
    refs = (
        wire.OutputRef("float32", (4, 6), (6, 1), whole),
        wire.OutputRef("float32", (4, 2), (6, 2), view),  # a strided view, read as it lies
    )
    answer = wire.Sample(ns=1, enqueued_ahead=None, notes=(), outputs=refs)
    found = taken.take(process.pid, answer, True, 1 << 20).outputs
    assert isinstance(found, list)
    expected = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    assert torch.equal(found[0], expected)
    assert torch.equal(found[1], expected[:, 1:5:2])
    assert not taken.stopped(process.pid)  # let go on afterwards


@pytest.mark.parametrize("holder", ["run"], indirect=True)
def test_a_worker_that_does_not_stop_has_no_outputs_taken(
    holder: tuple[subprocess.Popen[str], int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    process, whole, _ = holder
    monkeypatch.setattr(taken, "STOP_WAIT_S", 0.2)
    answer = wire.Sample(
        ns=1, enqueued_ahead=None, notes=(), outputs=(wire.OutputRef("float32", (4, 6), (6, 1), whole),)
    )
    found = taken.take(process.pid, answer, True, 1 << 20)
    assert found == taken.Taken(taken.UNSTOPPED, unstopped=True)
    assert not taken.stopped(process.pid)


@pytest.mark.parametrize("holder", ["stop"], indirect=True)
def test_what_the_worker_says_is_bounded_and_checked(holder: tuple[subprocess.Popen[str], int, int]) -> None:
    process, whole, _ = holder
    assert taken.wait_stopped(process.pid)
    try:
        big = (wire.OutputRef("float32", (1 << 20, 1 << 10), (1 << 10, 1), whole),)
        assert taken.read_outputs(process.pid, big, 1 << 20) == (
            f"outputs spanning more than {1 << 20} bytes of the worker's memory"
        )
        unmapped = (wire.OutputRef("float32", (4,), (1,), 8),)
        found = taken.read_outputs(process.pid, unmapped, 1 << 20)
        assert isinstance(found, str)
        assert found.startswith("kictl's parent could not read an output at 0x8")
        odd = (wire.OutputRef("float32", (4, 6), (1,), whole),)
        assert taken.read_outputs(process.pid, odd, 1 << 20) == "an output with strides that do not fit its shape"
        assert taken.read_outputs(process.pid, (wire.OutputRef("object", (1,), (1,), whole),), 64) == (
            "an output of dtype 'object'"
        )
    finally:
        process.send_signal(signal.SIGCONT)


@pytest.mark.parametrize("holder", ["stop"], indirect=True)
def test_the_worker_saying_why_it_has_no_outputs_is_the_finding(holder: tuple[subprocess.Popen[str], int, int]) -> None:
    process, _, _ = holder
    answer = wire.Sample(
        ns=1, enqueued_ahead=None, notes=(), outputs_error="returned output out, which is not a plain CPU tensor"
    )
    assert (
        taken.take(process.pid, answer, True, 1 << 20).outputs == "returned output out, which is not a plain CPU tensor"
    )
    assert taken.take(None, answer, False, 1 << 20).unstopped


def test_outputs_lying_in_a_mapped_file_are_seen_by_the_parent(tmp_path: Path) -> None:
    """The parent finds the inputs region in the worker's own map (by the memfd's inode), not in its notes."""
    import mmap
    import os

    path = tmp_path / "region"
    path.write_bytes(bytes(1 << 16))
    with open(path, "r+b") as handle:
        region = mmap.mmap(handle.fileno(), 1 << 16)
        try:
            start = torch.frombuffer(region, dtype=torch.uint8).data_ptr()
            ranges = taken.mapped(os.getpid(), os.stat(path).st_ino)
            assert ranges == [(start, start + (1 << 16))]
            inside = wire.OutputRef("float32", (8,), (1,), start + 64)
            across = wire.OutputRef("float32", (8,), (1,), start - 16)  # its last bytes in the region
            outside = wire.OutputRef("float32", (4,), (1,), start - 16)
            assert taken.aliased((outside, inside, across), ranges) == [1, 2]
        finally:
            region.close()
