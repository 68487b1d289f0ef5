"""The job model: ids made of digests, deterministic shards, payloads that cannot be swapped (no bench runs)."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kictl import canon
from kictl.bench.judge.session import BenchOptions
from kictl.errors import NotFoundError, RecordError, UsageError
from kictl.executors import settings_from
from kictl.executors.jobs import (
    BenchSettings,
    Job,
    JobPayload,
    JobPlan,
    estimated_work,
    largest_first,
    parse_shard,
    plan_jobs,
    shard,
    shard_of,
)
from kictl.executors.seam import options_for
from kictl.store.registry import Registry
from tests.executors.conftest import BOTH, CPU_FAST, RMSNORM


def _plan(registry: Registry, tmp_path: Path, settings_: BenchSettings = CPU_FAST, **kwargs: object) -> JobPlan:
    return plan_jobs(registry, RMSNORM, BOTH, settings_, workdir=tmp_path / "work", **kwargs)  # type: ignore[arg-type]


def test_a_plan_is_every_implementation_on_every_workload_reference_first(
    shared_registry: Registry, tmp_path: Path
) -> None:
    plan = _plan(shared_registry, tmp_path)
    workloads = sorted(
        r.name
        for r in shared_registry.iter_records(["Workload"])
        if r.raw["spec"]["definitionDigest"] == plan.definition.digest
    )
    assert len(workloads) == 6
    labels = [plan.label(job) for job in plan.jobs]
    assert [label.split(": ")[0] for label in labels] == [name for name in workloads for _ in range(2)]
    assert [label.split(": ")[1].rsplit("_", 1)[0] for label in labels] == ["reference", "torch_rmsnorm"] * 6
    assert len({job.job_id for job in plan.jobs}) == 12
    assert len(plan.reference_digests) == 1


def test_a_job_id_is_the_digest_of_its_four_digests(shared_registry: Registry, tmp_path: Path) -> None:
    job = _plan(shared_registry, tmp_path).jobs[0]
    body = {
        "definitionDigest": job.definition_digest,
        "implementationDigest": job.implementation_digest,
        "settingsDigest": job.settings_digest,
        "workloadDigest": job.workload_digest,
    }
    assert job.job_id == canon.bytes_digest(canon.canonical_bytes(body))
    assert job.settings_digest == CPU_FAST.digest
    # the same work planned again, elsewhere, has the same ids; other settings make other jobs
    again = _plan(shared_registry, tmp_path / "again")
    assert [j.job_id for j in again.jobs] == [j.job_id for j in _plan(shared_registry, tmp_path).jobs]
    other = _plan(shared_registry, tmp_path / "other", CPU_FAST.changed(iterations=2))
    assert not {j.job_id for j in other.jobs} & {j.job_id for j in again.jobs}


def test_settings_digest_is_fixed_by_a_known_answer() -> None:
    settings_ = BenchSettings(device_kind="cpu", options={"iterations": 5, "atol": None, "timeout_s": 600.0})
    assert settings_.digest == canon.bytes_digest(
        b'{"device_kind":"cpu","options":{"atol":null,"iterations":5,"timeout_s":600}}'
    )
    assert (
        settings_.digest
        == "sha256:"
        + hashlib.sha256(b'{"device_kind":"cpu","options":{"atol":null,"iterations":5,"timeout_s":600}}').hexdigest()
    )


def test_settings_cover_every_bench_option() -> None:
    options = BenchOptions(device="cpu", iterations=3, workloads=("b1",))
    covered = settings_from(options, "cpu").options
    assert set(covered) == {item.name for item in dataclasses.fields(options)} - {"device", "workloads"}
    assert options_for(settings_from(options, "cpu"), "cpu", ("b1",)) == options
    with pytest.raises(RecordError, match="another kictl version"):
        options_for(BenchSettings(device_kind="cpu", options={"warp_speed": 9}), "cpu")


def test_planning_a_subset_of_workloads(shared_registry: Registry, tmp_path: Path) -> None:
    whole = _plan(shared_registry, tmp_path)
    part = _plan(shared_registry, tmp_path / "part", workloads=("b7",))
    assert [j.job_id for j in part.jobs] == [j.job_id for j in whole.jobs if whole.label(j).startswith("b7:")]
    with pytest.raises(NotFoundError, match="b9999"):
        _plan(shared_registry, tmp_path / "none", workloads=("b9999",))
    with pytest.raises(UsageError, match="at least one --impl"):
        plan_jobs(shared_registry, RMSNORM, [], CPU_FAST, workdir=tmp_path)


def test_two_shards_together_are_the_unsharded_job_set(shared_registry: Registry, tmp_path: Path) -> None:
    jobs = _plan(shared_registry, tmp_path).jobs
    first, second = shard(jobs, 0, 2), shard(jobs, 1, 2)
    assert not {j.job_id for j in first} & {j.job_id for j in second}
    assert sorted(j.job_id for j in first + second) == sorted(j.job_id for j in jobs)
    assert first  # 12 jobs over two slices: both hold some
    assert second
    # a slice keeps the planned order
    order = [j.job_id for j in jobs]
    assert [j.job_id for j in first] == [key for key in order if key in {j.job_id for j in first}]


def _jobs(seeds: list[int]) -> list[Job]:
    def digest(tag: str, seed: int) -> str:
        return canon.bytes_digest(f"{tag}{seed}".encode())

    return [
        Job(
            definition_digest=digest("d", 0),
            workload_digest=digest("w", seed),
            implementation_digest=digest("i", seed % 3),
            settings_digest=digest("s", 0),
        )
        for seed in seeds
    ]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 10_000), unique=True, max_size=60), st.integers(1, 9))
def test_shards_partition_any_job_list(seeds: list[int], count: int) -> None:
    jobs = _jobs(seeds)
    slices = [shard(jobs, index, count) for index in range(count)]
    ids = [job.job_id for part in slices for job in part]
    assert sorted(ids) == sorted(job.job_id for job in jobs)
    assert len(ids) == len(set(ids))
    # a job's slice depends on the job alone: planning fewer jobs moves nothing
    half = jobs[: len(jobs) // 2]
    for index in range(count):
        assert {j.job_id for j in shard(half, index, count)} <= {j.job_id for j in slices[index]}
    assert all(shard_of(job, count) == index for index, part in enumerate(slices) for job in part)


def test_shard_text_is_checked() -> None:
    assert parse_shard("0/2") == (0, 2)
    assert parse_shard(" 3 / 4 ") == (3, 4)
    for bad in ("2/2", "1/0", "-1/2", "a/b", "1", ""):
        with pytest.raises(UsageError, match="--shard"):
            parse_shard(bad)
    with pytest.raises(UsageError, match="need 0 <= i < N"):
        shard([], 3, 2)


def test_a_payload_round_trips_and_names_exactly_its_records(shared_registry: Registry, tmp_path: Path) -> None:
    plan = _plan(shared_registry, tmp_path)
    job = plan.jobs[1]
    payload = JobPayload.from_json(plan.payload(job).to_json())
    definition, workload, implementation = payload.checked_records()
    assert (definition.digest, workload.digest, implementation.digest) == (
        job.definition_digest,
        job.workload_digest,
        job.implementation_digest,
    )
    assert payload.checked_blobs() == {}


def test_a_payload_whose_records_are_not_the_jobs_is_refused(shared_registry: Registry, tmp_path: Path) -> None:
    plan = _plan(shared_registry, tmp_path)
    job, other = plan.jobs[0], plan.jobs[2]
    payload = plan.payload(job)
    swapped = payload.model_copy(update={"workload": plan.payload(other).workload})
    with pytest.raises(RecordError, match=r"job workload: digest .* is not the job's"):
        swapped.checked_records()
    edited = dict(payload.implementation, spec={**payload.implementation["spec"], "license": "MIT"})
    with pytest.raises(RecordError, match="job implementation: digest"):
        payload.model_copy(update={"implementation": edited}).checked_records()
    loose = payload.model_copy(update={"settings": CPU_FAST.changed(rounds=9)})
    with pytest.raises(RecordError, match="job settings"):
        loose.checked_records()
    wrong_blob = payload.model_copy(update={"blobs": {canon.bytes_digest(b"a"): base64.b64encode(b"b").decode()}})
    with pytest.raises(RecordError, match="bytes do not match"):
        wrong_blob.checked_blobs()
    with pytest.raises(RecordError, match="job payload"):
        JobPayload.from_json('{"job": 1}')


def test_the_most_work_is_handed_out_first(shared_registry: Registry, tmp_path: Path) -> None:
    plan = _plan(shared_registry, tmp_path)
    order = [plan.label(job) for job in largest_first(plan, plan.jobs)]
    assert [label.split(": ")[0] for label in order[::2]] == ["b8192", "b1024", "b256", "b64", "b7", "b1"]
    assert [label.split(": ")[1].rsplit("_", 1)[0] for label in order[:2]] == ["reference", "torch_rmsnorm"]
    assert estimated_work(plan, plan.jobs[0]) > 0


def test_a_gpu_run_may_name_the_cupti_or_the_events_protocol(shared_registry: Registry) -> None:
    """On CUDA the default timer is CUPTI's, with CUDA events where it does not attach: both protocols are a job's.

    On the H200 (2026-12-01) every `--devices all` result was refused as "not the protocol the job's settings
    give" while the expected digest was computed as if no timer had been resolved.
    """
    from kictl.bench.judge.options import check_options
    from kictl.bench.judge.results import protocol_record, protocol_spec
    from kictl.bench.judge.session import tolerance_for
    from kictl.executors.seam import expected_protocols

    workload = next(iter(shared_registry.iter_records(["Workload"])))
    environment = {"hardware": {"product": "H200", "l2CacheBytes": 50 * 2**20}, "software": {}}
    context = {"sandbox": "bubblewrap 0.8.0"}

    def digest(options: BenchOptions, timer: str) -> str:
        counts = check_options(options, "cuda:0")
        sets = min(options.input_sets, (counts[1] or options.input_sets) * counts[2])
        spec = protocol_spec(
            "cuda:0", counts, options, tolerance_for(workload, options), 100 * 2**20, "bubblewrap 0.8.0", sets, timer
        )
        return protocol_record(spec).digest

    def expected_protocol_digests(settings: BenchSettings) -> set[str]:
        return {record.digest for record in expected_protocols(settings, workload, environment, context)}

    default = BenchOptions(device="cuda")
    found = expected_protocol_digests(settings_from(default, "cuda"))
    assert found == {digest(default, "cupti_device_time"), digest(default, "cuda_events")}
    assert len(found) == 2
    events = dataclasses.replace(default, timer="events")
    assert expected_protocol_digests(settings_from(events, "cuda")) == {digest(events, "cuda_events")}
    cpu = BenchOptions(device="cpu")
    assert len(expected_protocol_digests(settings_from(cpu, "cpu"))) == 1
