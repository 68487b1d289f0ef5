"""Fixtures of the advisory tests: a registry in git with a real trust root and runs of several harnesses.

Everything is real: Ed25519 keys from ``kictl.trust.generate_keypair``, the trust root written by
``init_root``/``add_key``, DSSE envelopes, git commits dated through git's own environment variables.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kictl import trust
from kictl.advisories.document import new_advisory
from kictl.advisories.published import publish_advisory
from kictl.records import BenchmarkProtocolSpec, BenchmarkRunSpec, StoredRecord, new_record
from kictl.store.registry import Registry
from tests.trust.conftest import (  # noqa: F401  (fixtures re-exported for this folder)
    KeyFiles,
    Setup,
    _private_config,
    _spec,
    at,
    commit_all,
    key_folder,
    setup,
)

ID = "KI-2026-0001"


def advisory_fields(**changes: Any) -> dict[str, Any]:
    """An advisory on kictl before 0.2.0, the perf_counter_ns timer, on the CPU."""
    fields: dict[str, Any] = {
        "id": ID,
        "version": 1,
        "status": "open",
        "summary": "the worker's own clock was believed on the CPU",
        "class": "forged-samples",
        "impact": "results",
        "affects": {
            "harness": "kictl",
            "versions": [{"introduced": "0.1", "fixed": "0.2.0"}],
            "timers": ["perf_counter_ns"],
            "devices": ["cpu"],
        },
        "fixed": {"version": "0.2.0"},
        "corpus": ["timer_forged_samples"],
    }
    fields.update(changes)
    return fields


def protocol(version: str, *, timer: str = "perf_counter_ns", device: str = "cpu") -> StoredRecord:
    return new_record(
        _spec(
            BenchmarkProtocolSpec,
            {
                "harness": {"name": "kictl", "version": version},
                "correctness": {"reference": "definition reference", "comparator": "allclose"},
                "measurement": {"timer": timer, "primaryStatistic": "median", "device": device},
                "comparability": {"family": "kictl_cpu"},
            },
        ),
        name=f"kictl-{version}-{timer}-{device}",
    )


@dataclass(frozen=True)
class Board:
    """The setup's registry with five more runs of the same workload, implementation and environment."""

    setup: Setup
    runs: dict[str, StoredRecord]  # label -> run
    protocols: dict[str, StoredRecord]

    @property
    def registry(self) -> Registry:
        return self.setup.registry


def _run(setup: Setup, label: str, proto: StoredRecord, latency_ns: int, implementation: StoredRecord) -> StoredRecord:  # noqa: F811
    records = setup.records
    return new_record(
        _spec(
            BenchmarkRunSpec,
            {
                "status": "passed",
                "timing": {"latencyNs": {"median": latency_ns}, "primaryStatistic": "median"},
                "observedAt": "2026-01-02T03:04:05.006Z",
                "definitionDigest": records.definition.digest,
                "workloadDigest": records.workload.digest,
                "implementationDigest": implementation.digest,
                "protocolDigest": proto.digest,
                "environmentDigest": records.environment.digest,
            },
        ),
        name=f"run-{label}",
    )


@pytest.fixture
def board(setup: Setup) -> Board:  # noqa: F811
    """Runs of one workload, each by its own implementation.

    ``first``: the setup's (kictl 0.1, no device recorded, unsigned); ``old``: kictl 0.1.0, perf_counter_ns, cpu
    (what the advisory names); ``fixed``: 0.2.0; ``other_timer``: 0.1.0, wall_clock; ``cuda``: 0.1.0 on cuda; all
    but ``first`` signed by the submitter.  ``rerun_fixed`` and ``rerun_old`` are reruns of ``old`` by 0.2.0 and
    0.1.0 (records not in the registry yet).
    """
    from tests.trust.conftest import build_records

    protocols = {
        "old": protocol("0.1.0"),
        "fixed": protocol("0.2.0"),
        "other_timer": protocol("0.1.0", timer="wall_clock"),
        "cuda": protocol("0.1.0", device="cuda"),
    }
    latencies = {"old": 100_000, "fixed": 400_000, "other_timer": 300_000, "cuda": 200_000}
    runs: dict[str, StoredRecord] = {"first": setup.run}  # kictl "0.1", no device recorded: matches
    added: list[StoredRecord] = list(protocols.values())
    for label, latency in latencies.items():
        implementation = build_records(tag=label).implementation
        added.append(implementation)
        runs[label] = _run(setup, label, protocols[label], latency, implementation)
    old_impl = runs["old"].raw["spec"]["implementationDigest"]
    implementation = next(r for r in added if r.digest == old_impl)
    setup.registry.add([*added, *runs.values()])
    # reruns of "old" by 0.2.0 and by 0.1.0: records a test adds when it needs them
    runs["rerun_fixed"] = _run(setup, "rerun-fixed", protocols["fixed"], 101_000, implementation)
    runs["rerun_old"] = _run(setup, "rerun-old", protocols["old"], 99_000, implementation)
    for label in latencies:
        trust.sign_record(setup.registry, runs[label].digest, setup.submitter.private)
    commit_all(setup.registry, at("2025-07-01"), "five runs")
    return Board(setup, runs, protocols)


def publish(board: Board, key: KeyFiles, **changes: Any) -> Path:
    """``kictl advisory add`` as a function: the advisory signed by ``key`` (uncommitted)."""
    return publish_advisory(board.registry, new_advisory(advisory_fields(**changes)), [key.load()])


def write_envelope(board: Board, path: str, envelope: dict[str, Any]) -> Path:
    target = board.registry.root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(envelope, indent=2) + "\n")
    return target
