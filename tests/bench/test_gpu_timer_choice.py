"""The GPU timer as the protocol records it, and the options that choose it (issue 11)."""

from __future__ import annotations

import pytest

from kictl.bench.judge import correctness
from kictl.bench.judge.options import BenchOptions, check_options
from kictl.bench.judge.results import harness_identity, protocol_spec
from kictl.errors import UsageError
from kictl.records import BenchmarkProtocolSpec


def _protocol(options: BenchOptions, timer_name: str | None) -> BenchmarkProtocolSpec:
    spec = protocol_spec("cuda:0", (10, 100, 3), options, correctness.Tolerance(), 1, timer_name=timer_name)
    return BenchmarkProtocolSpec.model_validate(spec)


def test_cupti_is_recorded_as_the_timer_in_a_family_of_its_own() -> None:
    cupti = _protocol(BenchOptions(), "cupti_device_time")
    events = _protocol(BenchOptions(), "cuda_events")
    assert cupti.measurement.timer == "cupti_device_time"
    assert events.measurement.timer == "cuda_events"
    # events read a steady ~2.5 µs more than CUPTI on the H200: not comparable (RESULTS.md)
    assert cupti.comparability.family == "kictl-cupti-device-time"
    assert events.comparability.family == "kictl-cuda-device-time"
    assert "any stream" in (cupti.measurement.timed_region or "")
    assert "persisting L2" in (cupti.measurement.timed_region or "")


def test_setup_in_the_timed_region_never_takes_cupti() -> None:
    timed = _protocol(BenchOptions(time_setup=True), "cupti_device_time")
    assert timed.measurement.timer == "cuda_events"
    assert timed.comparability.family == "kictl-cuda-setup-and-run"


@pytest.mark.parametrize(
    ("options", "device", "message"),
    [
        (BenchOptions(timer="ncu"), "cuda:0", "expected one of"),
        (BenchOptions(timer="cupti"), "cpu", "needs a CUDA device"),
        (BenchOptions(timer="events", cuda_graph=True), "cuda:0", "--cuda-graph is --timer graph"),
        (BenchOptions(timer="cupti", time_setup=True), "cuda:0", "--time-setup"),
    ],
)
def test_timer_options_that_cannot_be_met_are_usage_errors(options: BenchOptions, device: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        check_options(options, device)


def test_the_harness_names_its_version_and_commit() -> None:
    identity = harness_identity()
    assert identity["name"] == "kictl"
    assert identity["version"]
    commit = identity.get("commit")
    if commit is not None:  # run from a git checkout (CI clones one)
        assert len(commit.removesuffix("+dirty")) == 40
