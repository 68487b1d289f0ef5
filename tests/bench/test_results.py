"""The protocol a session records says what was timed and how."""

from __future__ import annotations

import json

from kictl.bench.judge import correctness
from kictl.bench.judge.results import protocol_spec
from kictl.bench.judge.session import BenchOptions
from kictl.records import BenchmarkProtocolSpec


def test_protocol_says_what_was_timed() -> None:
    options = BenchOptions(rounds=3)
    events = protocol_spec("cuda:0", (10, 100, 3), options, correctness.Tolerance(), 100 * 2**20)
    BenchmarkProtocolSpec.model_validate_json(json.dumps(events))
    measurement = events["measurement"]
    assert measurement["timer"] == "cuda_events"
    assert measurement["l2FlushBytes"] == 100 * 2**20
    assert measurement["setupInTimedRegion"] is False
    assert "enqueued before the GPU reaches it" in measurement["timedRegion"]
    graph = protocol_spec("cuda:0", (10, 100, 3), BenchOptions(cuda_graph=True), correctness.Tolerance(), 1)
    assert graph["measurement"]["timer"] == "cuda_graph_replay"
    assert graph["comparability"] == events["comparability"] == {"family": "kictl-cuda-device-time"}
    setup = protocol_spec("cuda:0", (10, 100, 3), BenchOptions(time_setup=True), correctness.Tolerance(), 1)
    assert setup["measurement"]["setupInTimedRegion"] is True
    assert setup["comparability"] == {"family": "kictl-cuda-setup-and-run"}
    cpu = protocol_spec("cpu", (1, None, 1), options, correctness.Tolerance(), 0, "bubblewrap 0.8.0: ...", 4)
    BenchmarkProtocolSpec.model_validate_json(json.dumps(cpu))
    assert cpu["measurement"]["timer"] == "perf_counter_ns"
    assert cpu["measurement"]["isolation"].startswith("bubblewrap")
    assert cpu["measurement"]["threads"] == 1
    assert cpu["measurement"]["inputSets"] == 4
    assert "4 input set(s)" in cpu["measurement"]["inputPolicy"]
    # where random values are drawn is part of what a run saw: a GPU draws them itself, the CPU's policy is as
    # it always was (its protocols keep their digests)
    assert "drawn on the GPU by torch's CUDA generator" in events["measurement"]["inputPolicy"]
    assert "drawn on the GPU" not in cpu["measurement"]["inputPolicy"]
    assert cpu["measurement"]["inputPolicy"].endswith(
        "recorded in the run afterwards; timed calls are audited at random, decided after each returned"
    )
    assert cpu["measurement"]["targetRelativeError"] == 0.02
    assert "iterations" not in cpu["measurement"]
    assert "l2FlushBytes" not in cpu["measurement"]
    assert cpu["measurement"]["l2Flush"] is False


def test_the_l2_flush_is_twice_the_l2_and_none_on_the_cpu() -> None:
    """One rule for the bench session and the executors' job identity (``options.flush_bytes``)."""
    from kictl.bench.judge.options import FALLBACK_FLUSH_BYTES, flush_bytes

    h200 = {"memoryBytes": 150_754_820_096, "l2CacheBytes": 62_914_560}
    assert flush_bytes("cuda:0", h200) == 2 * 62_914_560
    assert flush_bytes("cuda:0", {}) == flush_bytes("cuda:0", {"l2CacheBytes": "lots"}) == FALLBACK_FLUSH_BYTES
    assert flush_bytes("cuda:0", {"l2CacheBytes": 0}) == FALLBACK_FLUSH_BYTES
    assert flush_bytes("cpu", h200) == 0
