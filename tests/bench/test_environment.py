"""The environment a run records: stable facts only, valid as an ExecutionEnvironment."""

from __future__ import annotations

import json

from kictl.bench.judge.results import environment_record
from kictl.bench.worker.environment import capture, driver_from_proc
from kictl.records import ExecutionEnvironmentSpec


def test_driver_version_from_proc() -> None:
    closed = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct 30 2025\nGCC version: gcc 12\n"
    opened = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build\n"
    assert driver_from_proc(closed) == "580.159.04"
    assert driver_from_proc(opened) == "575.57.08"
    assert driver_from_proc("") is None


def test_cpu_environment_is_a_valid_record_and_stable() -> None:
    found = capture("cpu")
    ExecutionEnvironmentSpec.model_validate_json(json.dumps(found))
    assert found["hardware"]["product"]
    assert found["software"]["framework"]["name"] == "torch"
    assert "smCount" not in found["hardware"]
    first, second = environment_record(found), environment_record(capture("cpu"))
    assert first.digest == second.digest
    assert " " not in first.name
