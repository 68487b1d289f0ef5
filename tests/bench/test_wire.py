"""The wire between kictl and a worker: frames that break its rules are refused, nothing is executed."""

from __future__ import annotations

import json
import os
import pickle
import struct
import time
from collections.abc import Iterator

import pytest
import torch

from kictl.bench import wire
from kictl.bench.worker.main import pack, unpack


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read, write = os.pipe()
    yield read, write
    for fd in (read, write):
        try:
            os.close(fd)
        except OSError:
            pass


def _frame(header: object, *buffers: bytes, raw: bytes | None = None) -> bytes:
    if isinstance(header, dict) and "code" not in header:
        header = {"nonce": 0, **header}
    body = raw if raw is not None else json.dumps(header).encode()
    return b"".join([wire.MAGIC, struct.pack(">I", len(body)), body, *buffers])


def _read(pipe: tuple[int, int], data: bytes, allowed: frozenset[str] | None = None) -> wire.Message:
    read, write = pipe
    os.write(write, data)
    os.close(write)
    return wire.read_frame(read, allowed, deadline=time.monotonic() + 5)


def test_every_message_round_trips_with_its_buffers(pipe: tuple[int, int]) -> None:
    tensor = pack(torch.arange(12, dtype=torch.float32).reshape(3, 4))
    message = wire.Outputs(
        tensors=(tensor, pack(torch.tensor([True, False]))),
        error=None,
        notes=(wire.Note(check="inputsUnchanged", detail="x"),),
    )
    back = _read(pipe, wire.encode(message))
    assert back == message
    assert isinstance(back, wire.Outputs)
    assert torch.equal(unpack(back.tensors[0]), torch.arange(12, dtype=torch.float32).reshape(3, 4))


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (pickle.dumps(("result", {"passed": True})), "magic bytes"),
        (wire.MAGIC + struct.pack(">I", wire.MAX_HEADER_BYTES + 1), "over the limit"),
        (_frame(None, raw=b'{"type": "pong", "type": "ready", "body": {}, "buffers": []}'), "duplicate member"),
        (_frame(None, raw=b'{"type": "sample", "body": {"ns": NaN}, "buffers": []}'), "NaN is not allowed"),
        (_frame({"type": "sample", "body": {"ns": 2**60, "enqueued_ahead": None, "notes": []}, "buffers": []}), "2^53"),
        (_frame({"type": "exec", "body": {}, "buffers": []}), "unknown message type"),
        (_frame({"type": "pong", "body": {}, "buffers": [], "code": "x"}), "exactly type, body, buffers and nonce"),
        (
            _frame({"type": "sample", "body": {"ns": 1, "enqueued_ahead": None, "notes": [], "x": 1}, "buffers": []}),
            "unknown member",
        ),
        (_frame({"type": "sample", "body": {"ns": 1, "notes": []}, "buffers": []}), "enqueued_ahead is missing"),
        (
            _frame({"type": "sample", "body": {"ns": "1", "enqueued_ahead": None, "notes": []}, "buffers": []}),
            "integer",
        ),
        (
            _frame({"type": "sample", "body": {"ns": True, "enqueued_ahead": None, "notes": []}, "buffers": []}),
            "integer",
        ),
        (_frame({"type": "pong", "body": {}, "buffers": [wire.MAX_BUFFER_BYTES + 1]}), "over the limit"),
        (_frame({"type": "pong", "body": {}, "buffers": [], "nonce": -1}), "nonce is not a number"),
        (_frame({"type": "pong", "body": {}, "buffers": [3]}, b"abc"), "not referenced"),
        (
            _frame(
                {
                    "type": "outputs",
                    "body": {
                        "tensors": [
                            {"dtype": "float32", "shape": [1], "data": {"$buffer": 0}},
                            {"dtype": "float32", "shape": [1], "data": {"$buffer": 0}},
                        ],
                        "error": None,
                        "notes": [],
                    },
                    "buffers": [4],
                },
                b"\0\0\0\0",
            ),
            "used twice",
        ),
        (_frame(None, raw=b"[" * 25_000 + b"]" * 25_000), "not JSON"),
    ],
)
def test_frames_that_break_the_rules_are_refused(pipe: tuple[int, int], data: bytes, words: str) -> None:
    with pytest.raises(wire.WireError, match=words.replace("^", r"\^")):
        _read(pipe, data)


def test_a_message_out_of_place_is_refused(pipe: tuple[int, int]) -> None:
    with pytest.raises(wire.WireError, match="a pong message was not expected here"):
        _read(pipe, wire.encode(wire.Pong()), frozenset({wire.Sample.TYPE}))


def test_a_cut_frame_is_the_peer_closing_and_silence_is_a_timeout(pipe: tuple[int, int]) -> None:
    with pytest.raises(wire.PeerClosed):
        _read(pipe, wire.encode(wire.Failed(status="runtime_error", detail="x" * 100))[:-10])
    read, write = os.pipe()
    try:
        with pytest.raises(wire.WireTimeout):
            wire.read_frame(read, deadline=time.monotonic() + 0.05)
    finally:
        os.close(read)
        os.close(write)


def test_strings_are_sanitised_and_capped(pipe: tuple[int, int]) -> None:
    detail = "bad \ud800 and \udfff, escape \x1b[2J, bell \x07, tab\tnewline\n" + "y" * (wire.MAX_STRING * 2)
    back = _read(pipe, wire.encode(wire.Failed(status="runtime_error", detail=detail)))
    assert isinstance(back, wire.Failed)
    assert back.detail.startswith("bad \ufffd and \ufffd, escape \ufffd[2J, bell \ufffd, tab\tnewline\n")
    assert len(back.detail) == wire.MAX_STRING
    back.detail.encode("utf-8")  # printable, no lone surrogate left


def test_tensor_data_must_fit_its_shape() -> None:
    with pytest.raises(wire.WireError, match="do not hold"):
        unpack(wire.TensorData(dtype="float32", shape=(2, 2), data=b"\0" * 15))
    with pytest.raises(wire.WireError, match="unknown dtype"):
        unpack(wire.TensorData(dtype="object", shape=(1,), data=b"\0" * 8))
    assert unpack(wire.TensorData(dtype="bfloat16", shape=(0, 3), data=b"")).shape == (0, 3)


def test_the_wire_knows_exactly_the_records_dtypes() -> None:
    import typing

    from kictl.records import DType

    assert set(typing.get_args(DType)) == wire.DTYPES


def test_a_large_output_arrives_whole_or_not_at_all() -> None:
    """A buffer over 1 MiB is read into one bytearray as it arrives (no chunks joined); the tensor is made over it,
    and a frame cut short, or a silent peer, is refused as for small frames."""
    import threading

    values = torch.randn(3 << 20).to(torch.bfloat16)  # 6 MiB
    message = wire.Outputs(tensors=(pack(values),), error=None, notes=())
    read, write = os.pipe()
    sender = threading.Thread(target=wire.write_frame, args=(write, message))
    sender.start()
    back = wire.read_frame(read, None, deadline=time.monotonic() + 30)
    sender.join()
    assert isinstance(back, wire.Outputs)
    assert torch.equal(unpack(back.tensors[0]), values)
    frame = wire.encode(message)

    def send_half() -> None:
        os.write(write, frame[: len(frame) // 2])
        os.close(write)

    cut = threading.Thread(target=send_half)
    cut.start()
    with pytest.raises(wire.PeerClosed):
        wire.read_frame(read, None, deadline=time.monotonic() + 30)
    cut.join()
    os.close(read)
    read, write = os.pipe()
    try:
        os.write(write, frame[: 64 << 10])  # the header and the start of the buffer, then silence
        with pytest.raises(wire.WireTimeout):
            wire.read_frame(read, None, deadline=time.monotonic() + 0.5)
    finally:
        os.close(read)
        os.close(write)


def test_a_buffer_given_as_a_view_is_written_from_where_it_is(pipe: tuple[int, int]) -> None:
    """``pack`` hands a GPU tensor's host copy to the frame as a memoryview (no copy into ``bytes``): it arrives
    as the same bytes, and a view of another format is sent as its bytes."""
    read, write = pipe
    values = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    view = memoryview(values.numpy())  # type: ignore[arg-type]  # format "f", 12 items, 48 bytes
    message = wire.Outputs(tensors=(wire.TensorData(dtype="float32", shape=(3, 4), data=view),), error=None, notes=())  # type: ignore[arg-type]
    wire.write_frame(write, message)
    got = wire.read_frame(read)
    assert isinstance(got, wire.Outputs)
    assert bytes(got.tensors[0].data) == values.numpy().tobytes()
    assert torch.equal(unpack(got.tensors[0]), values)


@pytest.fixture
def regions() -> Iterator[tuple[wire.SharedRegion, wire.SharedRegion]]:
    """The parent's region and a worker's view of it (the same memfd, as a spawned worker inherits it)."""
    parent = wire.SharedRegion.create("test", size=64 << 20)
    if parent is None:
        pytest.skip("no sealed memfds here")
    worker = wire.SharedRegion.attach(os.dup(parent.fd))
    yield parent, worker
    worker.close()
    parent.close()


def _outputs(*tensors: torch.Tensor) -> wire.Outputs:
    return wire.Outputs(tensors=tuple(pack(t) for t in tensors), error=None, notes=())


def test_large_buffers_go_through_the_shared_region_and_are_copied_out_at_once(
    pipe: tuple[int, int], regions: tuple[wire.SharedRegion, wire.SharedRegion]
) -> None:
    read, write = pipe
    parent, worker = regions
    large = torch.arange(wire.SHARED_MIN, dtype=torch.int16)  # 2 MiB: through the region
    small = torch.arange(100, dtype=torch.float32)  # through the pipe
    wire.write_frame(write, _outputs(large, small, large + 1), worker)
    got = wire.read_frame(read, deadline=time.monotonic() + 5, region=parent)
    assert isinstance(got, wire.Outputs)
    # what the worker writes into the region afterwards changes nothing the parent read
    worker.put(0, b"\xff" * (4 * wire.SHARED_MIN))
    first, second, third = (unpack(item) for item in got.tensors)
    assert torch.equal(first, large)
    assert torch.equal(second, small)
    assert torch.equal(third, large + 1)
    # the header placed the two large buffers in the region, one after the other, and the small one in the pipe
    parts = wire._frame_parts(_outputs(large, small, large + 1), worker)
    header = json.loads(parts[0][len(wire.MAGIC) + 4 :])
    assert header["buffers"] == [[0, 2 * wire.SHARED_MIN], 400, [2 * wire.SHARED_MIN, 2 * wire.SHARED_MIN]]
    assert len(parts) == 2  # the header and the one inline buffer


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ([0, 64 << 20], None),  # the whole region: fine
        ([1, 64 << 20], "beyond the shared region"),
        ([64 << 20, 1], "beyond the shared region"),
        ([-1, 4], "list of sizes"),
        ([0, 1.5], "list of sizes"),
        ([0], "list of sizes"),
        ([0, 1, 2], "list of sizes"),
        ({"offset": 0}, "list of sizes"),
    ],
)
def test_a_shared_buffer_outside_the_region_or_malformed_is_refused(
    pipe: tuple[int, int], regions: tuple[wire.SharedRegion, wire.SharedRegion], entry: object, words: str | None
) -> None:
    read, write = pipe
    parent, _ = regions
    size = entry[1] if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], int) else 0
    header = {"type": "outputs", "body": {"tensors": [{"dtype": "uint8", "shape": [size], "data": {"$buffer": 0}}],
              "error": None, "notes": []}, "buffers": [entry]}  # fmt: skip
    os.write(write, _frame(header))
    os.close(write)
    if words is None:
        got = wire.read_frame(read, deadline=time.monotonic() + 5, region=parent)
        assert isinstance(got, wire.Outputs)
        assert len(got.tensors[0].data) == 64 << 20
        return
    with pytest.raises(wire.WireError, match=words):
        wire.read_frame(read, deadline=time.monotonic() + 5, region=parent)


def test_the_same_shared_bytes_named_over_and_over_are_refused(
    pipe: tuple[int, int], regions: tuple[wire.SharedRegion, wire.SharedRegion]
) -> None:
    """Naming the whole region many times would make the parent copy (and hold) it that many times over."""
    parent, _ = regions
    tensor = {"dtype": "uint8", "shape": [64 << 20], "data": {"$buffer": 0}}
    header = {"type": "outputs", "body": {"tensors": [tensor, {**tensor, "data": {"$buffer": 1}}],
              "error": None, "notes": []}, "buffers": [[0, 64 << 20], [0, 64 << 20]]}  # fmt: skip
    read, write = pipe
    os.write(write, _frame(header))
    os.close(write)
    with pytest.raises(wire.WireError, match="placed in a shared region of"):
        wire.read_frame(read, deadline=time.monotonic() + 5, region=parent)


def test_a_shared_buffer_on_a_wire_without_a_region_is_refused(pipe: tuple[int, int]) -> None:
    header = {"type": "outputs", "body": {"tensors": [], "error": None, "notes": []}, "buffers": [[0, 8]]}
    with pytest.raises(wire.WireError, match="this wire has none"):
        _read(pipe, _frame(header))


def test_a_worker_cannot_shrink_or_grow_the_shared_region(
    regions: tuple[wire.SharedRegion, wire.SharedRegion],
) -> None:
    """Sealed: a worker that shrank the memfd would make the parent's next read of it fault (SIGBUS)."""
    _, worker = regions
    for size in (0, 4096, 128 << 20):
        with pytest.raises(PermissionError):
            os.ftruncate(worker.fd, size)
    assert os.fstat(worker.fd).st_size == 64 << 20


def test_an_answer_must_echo_its_requests_nonce(pipe: tuple[int, int]) -> None:
    """A pre-answered call (written before the request, so without its nonce) is refused; the echo passes."""
    read, write = pipe
    sample = wire.Sample(ns=5, enqueued_ahead=None, notes=())
    wire.write_frame(write, sample, nonce=0)
    with pytest.raises(wire.WireError, match="does not echo its request's nonce"):
        wire.read_frame(read, frozenset({"sample"}), deadline=time.monotonic() + 5, nonce=12345)
    wire.write_frame(write, sample, nonce=12345)
    assert wire.read_frame(read, frozenset({"sample"}), deadline=time.monotonic() + 5, nonce=12345) == sample
    wire.write_frame(write, wire.Call(), nonce=77)
    assert wire.read_frame_nonce(read, deadline=time.monotonic() + 5) == (wire.Call(), 77)


def test_a_frame_is_capped_by_its_type_before_anything_is_allocated(pipe: tuple[int, int]) -> None:
    read, write = pipe
    # a header far larger than a Pong's, where only a Pong is due: refused from its length alone
    os.write(write, wire.MAGIC + struct.pack(">I", wire.HEADER_CAPS["pong"] + 1))
    with pytest.raises(wire.WireError, match="over the limit of 4096"):
        wire.read_frame(read, frozenset({"pong"}), deadline=time.monotonic() + 5)
    # buffers where the reader allows none (a Sample, or an Outputs above what the outputs could need)
    outputs = wire.Outputs(tensors=(pack(torch.zeros(300, dtype=torch.float32)),), error=None, notes=())
    wire.write_frame(write, outputs)
    with pytest.raises(wire.WireError, match="buffers of 1200 bytes are over the limit of 1000"):
        wire.read_frame(read, frozenset({"outputs"}), deadline=time.monotonic() + 5, max_buffer_bytes=1000)
    spec = wire.OutputSpec(name="y", shape=(300,), dtype="float32")
    assert wire.outputs_limit([spec]) == 2 * 1200 + (1 << 20)
