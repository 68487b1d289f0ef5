"""Integrity helpers: aliasing, poison, patched functions, threads."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from kictl.bench.worker import integrity, timing


def test_aliasing_finds_views_and_ignores_copies() -> None:
    x = torch.randn(8, 4)
    weight = torch.randn(4)
    assert integrity.aliasing([("out", x[2:])], [("x", x), ("weight", weight)]) == [
        "output out shares memory with input x"
    ]
    assert integrity.aliasing([("out", x.clone())], [("x", x), ("scale", 0.5)]) == []


def test_poison_is_found_where_the_reference_is_no_nan() -> None:
    out = torch.randn(6, dtype=torch.bfloat16)
    integrity.poison_in_place(out)
    assert integrity.poisoned_elements(out, torch.zeros(6, dtype=torch.bfloat16)) == 6
    reference = torch.zeros(6, dtype=torch.bfloat16)
    reference[:2] = float("nan")
    assert integrity.poisoned_elements(out, reference) == 4
    assert integrity.poisoned_elements(torch.full((3,), -1, dtype=torch.int32), None) == 0
    assert integrity.poisoned_elements(torch.full((3,), float("nan")), None) == 0  # a computed NaN is no poison


def test_patched_functions_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    baseline = integrity.take_baseline()
    assert integrity.patched(baseline) == []
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 0.0)
    assert integrity.patched(baseline) == ["time.perf_counter_ns", "torch.cuda.Event.elapsed_time"]


def test_the_launch_paddings_source_and_the_flush_method_are_watched(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU timers' padding draws its count from the os.urandom bound before the import, and both the padding
    and the L2 flush run through Tensor.zero_: replacing either is named (timerNotPatched)."""
    timing.bind_originals()
    baseline = integrity.take_baseline()
    assert integrity.patched(baseline) == []
    monkeypatch.setitem(timing._ORIGINALS, "urandom", lambda n: bytes(n))  # every count 0: the phase fixed
    monkeypatch.setattr(torch.Tensor, "zero_", lambda self: self)  # no flush, no padding
    assert integrity.patched(baseline) == ["kictl.bench.worker.timing._ORIGINALS[urandom]", "torch.Tensor.zero_"]


def test_the_cupti_timers_functions_are_watched(monkeypatch: pytest.MonkeyPatch) -> None:
    """timerNotPatched holds for the CUPTI path: kictl's attribution and collector, and CUPTI's own bindings."""
    import sys
    import types

    from kictl.bench.worker import cupti_attribution, cupti_records, cupti_timer

    bindings = types.ModuleType("cupti.cupti")  # the real one needs libcupti and a GPU; the watch is by name
    bindings.activity_flush_all = lambda flag: None  # type: ignore[attr-defined]
    bindings.get_timestamp = lambda: 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupti.cupti", bindings)
    baseline = integrity.take_baseline()
    assert integrity.patched(baseline) == []
    monkeypatch.setattr(cupti_attribution, "attribute", lambda *args, **kwargs: None)
    monkeypatch.setattr(cupti_timer.CuptiCollector, "drain", lambda self: [])
    monkeypatch.setattr(bindings, "get_timestamp", lambda: 1)
    # kictl's own reader of CUPTI's buffers, and what it reads records with
    monkeypatch.setattr(cupti_records.RecordReader, "read", lambda self, address: None)
    import struct

    monkeypatch.setattr(struct, "unpack_from", lambda fmt, buffer, offset=0: ())
    assert integrity.patched(baseline) == [
        "cupti.cupti.get_timestamp",
        "kictl.bench.worker.cupti_attribution.attribute",
        "kictl.bench.worker.cupti_records.RecordReader.read",
        "kictl.bench.worker.cupti_timer.CuptiCollector.drain",
        "struct.unpack_from",
    ]


def test_new_threads_are_named_while_alive() -> None:
    before = integrity.thread_idents()
    release = threading.Event()
    thread = threading.Thread(target=release.wait, name="background-work")
    thread.start()
    try:
        assert integrity.new_threads(before) == ["background-work"]
    finally:
        release.set()
        thread.join()
    assert integrity.new_threads(before) == []


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16, torch.float8_e4m3fn])
def test_poison_is_counted_alike_for_every_element_size(dtype: torch.dtype) -> None:
    """An element is poison when every byte of it is 0xFF, whatever its size (read as one integer of its size)."""
    out = torch.zeros(8, dtype=dtype)
    raw = out.view(torch.uint8).reshape(8, out.element_size())
    raw[1] = 0xFF  # all bytes: poison
    raw[3] = 0xFF
    raw[5, 0] = 0xFF  # one byte only: a value, not poison
    bytewise = int((out.view(torch.uint8).reshape(8, -1) == 0xFF).all(dim=1).sum())
    assert integrity.poisoned_elements(out, None) == bytewise == (2 if out.element_size() > 1 else 3)


def test_what_kictls_timer_instance_holds_is_watched() -> None:
    """A clock, an events function, a flush buffer or a CUPTI table replaced on the instance is named."""
    timing.bind_originals()
    timer = timing.make_timer("perf_counter_ns", "cpu", 0)
    watch = integrity.watch_instance("timer", timer)
    assert integrity.instance_changes(watch, timer) == []
    timer.spin_ns = 5  # the timer's own state changes as it works
    assert integrity.instance_changes(watch, timer) == []

    class Hook(list[int]):
        def append(self, value: int) -> None:  # code the harness would run in its own window
            super().append(value)

    timer.host_ns = [1, 2]  # state may be replaced by more state
    assert integrity.instance_changes(watch, timer) == []
    timer.host_ns = Hook()
    assert integrity.instance_changes(watch, timer) == ["timer.host_ns (a Hook)"]
    timer.host_ns = []
    real = timer.clock
    timer.clock = lambda: real() // 10
    assert integrity.instance_changes(watch, timer) == ["timer.clock"]
    timer.clock = real
    timer.measure = lambda call: None  # shadowing a method
    assert integrity.instance_changes(watch, timer) == ["timer.measure (added)"]
    del timer.measure
    assert integrity.instance_changes(watch, timing.make_timer("perf_counter_ns", "cpu", 0)) == [
        "timer (another object)"
    ]

    class Holder:
        def __init__(self) -> None:
            self.kinds = {"kernel": 1, "memcpy": 2}
            self.graph: object = object()

    holder = Holder()
    before = integrity.watch_instance("collector", holder)
    holder.graph = object()  # made later by the harness (a CUDA graph in prepare()): watched as it is then
    watch = integrity.watch_instance("collector", holder, before)
    assert integrity.instance_changes(watch, holder) == ["collector.graph"]  # the earlier object is kept
    holder = Holder()
    watch = integrity.watch_instance("collector", holder)
    holder.kinds.pop("kernel")  # a container emptied in place: the kernels would no longer be collected
    assert integrity.instance_changes(watch, holder) == ["collector.kinds"]


def test_kictls_reader_of_cuptis_buffers_is_watched_like_the_collector() -> None:
    """Where kictl reads CUPTI's buffers itself, what the reader hands records to and the layouts it reads
    them with are watched: a hand-over that drops the implementation's own records is named (timerNotPatched)."""
    from types import SimpleNamespace

    from kictl.bench.worker.cupti_records import RecordReader
    from kictl.bench.worker.main import Worker

    reader = RecordReader({10: SimpleNamespace(layout="kernel")})  # type: ignore[dict-item]

    def deliver(records: list[object]) -> None:
        return None

    direct = SimpleNamespace(reader=reader, deliver=deliver, buffers={}, error=None)
    collector = SimpleNamespace(direct=direct, started=True)
    worker = Worker(-1, -1, "cpu", integrity.take_baseline(), collector=collector)
    assert worker.instance_changes() == []
    direct.buffers[1] = bytearray(8)  # the reader's working state changes as it works
    direct.error = "a buffer could not be read"
    reader.checked[10] = 3
    assert worker.instance_changes() == []
    direct.deliver = lambda records: deliver([r for r in records if getattr(r, "name", "") != "mine"])  # drops its own
    assert worker.instance_changes() == ["cupti_reader.deliver"]
    direct.deliver = deliver
    kernel = reader.layouts[10]
    reader.layouts[10] = SimpleNamespace(layout="kernel", format="<Q")  # type: ignore[assignment]
    assert worker.instance_changes() == ["record_reader.layouts"]
    reader.layouts[10] = kernel
    assert worker.instance_changes() == []
    collector.direct = SimpleNamespace(reader=reader, deliver=deliver)
    assert "collector.direct" in worker.instance_changes()
    assert "cupti_reader (another object)" in worker.instance_changes()


def test_an_audit_hook_never_gets_in_and_its_attempt_condemns_nobody(tmp_path: Path) -> None:
    """kictl's guard refuses every later audit hook (it never runs, not even on kictl's own ``open``), and the
    refused attempt is no finding: honest libraries add hooks (an honest FlashInfer rerun on the H200 was judged
    ``reward_hack`` for one).  Run in a child process: the guard cannot be taken out of a process again."""
    probe = tmp_path / "probe.txt"
    script = f"""
import sys
from kictl.bench.worker import integrity
integrity.guard_audit_hooks()
calls = []
sys.addaudithook(lambda event, args: calls.append(event))
open({str(probe)!r}, "w").close()
assert calls == [], calls
assert integrity.AUDIT_GUARD.refused == 1, integrity.AUDIT_GUARD.refused
assert integrity.foreign_hooks() == [], integrity.foreign_hooks()
print("ok")
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}  # this checkout's kictl
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
