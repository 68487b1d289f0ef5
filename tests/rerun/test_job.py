"""Rebuilding a run's job from the registry, selecting runs (digests, --base), refusals, and the bench seam."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kictl.errors import NotFoundError, RecordError, UsageError
from kictl.records import StoredRecord, record_from_value
from kictl.rerun import build_job, runs_added, select_runs
from kictl.rerun.execute import check_sources, fresh_correctness_seeds, measured_family
from kictl.rerun.job import ProtocolSettings, group_jobs, refusals
from kictl.store.registry import Registry
from tests.conftest import RunCli


def _passed_run(registry: Registry) -> StoredRecord:
    """A passed H200 run of the bundled registry (it holds H100 runs too, since 2026-12-06)."""
    return next(
        r
        for r in registry.iter_records(["BenchmarkRun"])
        if r.raw["spec"]["status"] == "passed"
        and registry.load(r.raw["spec"]["environmentDigest"]).raw["spec"]["hardware"]["product"] == "H200"
    )


def _variant(run: StoredRecord, observed: str) -> StoredRecord:
    raw = json.loads(json.dumps(run.raw))
    raw["spec"]["observedAt"] = observed
    return record_from_value(raw, source="variant")


def test_the_job_is_every_record_the_run_names_and_the_protocols_settings(bundled_results: Registry) -> None:
    run = _passed_run(bundled_results)
    job = build_job(bundled_results, run.digest)
    spec = run.raw["spec"]
    assert job.workload.digest == spec["workloadDigest"]
    assert job.implementation.digest == spec["implementationDigest"]
    assert job.definition.digest == spec["definitionDigest"]
    assert job.product == "H200"
    protocol = job.protocol.raw["spec"]
    assert job.settings.iterations == protocol["measurement"]["iterations"]
    assert job.settings.rounds == protocol["correctness"]["rounds"]
    assert job.settings.atol == protocol["correctness"]["atol"]
    assert job.settings.family == "kictl-cuda-device-time"
    assert job.original_ns == spec["timing"]["latencyNs"][spec["timing"]["primaryStatistic"]]


def test_only_passed_benchmark_runs_are_rerun(bundled_results: Registry) -> None:
    failed = next(
        (r for r in bundled_results.iter_records(["BenchmarkRun"]) if r.raw["spec"]["status"] != "passed"), None
    )
    if failed is not None:
        with pytest.raises(UsageError, match="only passed runs are rerun"):
            build_job(bundled_results, failed.digest)
    workload = next(bundled_results.iter_records(["Workload"]))
    with pytest.raises(UsageError, match="only BenchmarkRun records are rerun"):
        build_job(bundled_results, workload.digest)


def test_a_run_naming_a_missing_record_cannot_be_rebuilt(bundled_results: Registry) -> None:
    raw = json.loads(json.dumps(_passed_run(bundled_results).raw))
    raw["spec"]["implementationDigest"] = "sha256:" + "0" * 64
    orphan = record_from_value(raw, source="orphan")
    bundled_results.add([orphan])
    with pytest.raises(NotFoundError, match=r"\$\.spec\.implementationDigest names sha256:0000"):
        build_job(bundled_results, orphan.digest)


def test_base_selects_every_run_the_branch_adds(bundled_results: Registry) -> None:
    base = bundled_results.git.head()
    assert base is not None
    run = _passed_run(bundled_results)
    added = [_variant(run, "2026-11-30T10:00:00.000Z"), _variant(run, "2026-11-30T11:00:00.000Z")]
    bundled_results.add(added)
    bundled_results.git.commit(["registry"], "A pull request with two runs")
    assert runs_added(bundled_results, base) == sorted(record.digest for record in added)
    assert select_runs(bundled_results, [run.digest[:15]], base=base) == [
        run.digest,
        *sorted(record.digest for record in added),
    ]
    with pytest.raises(UsageError, match="adds no BenchmarkRun"):
        select_runs(bundled_results, [], base="HEAD")
    with pytest.raises(UsageError, match="name the runs to rerun"):
        select_runs(bundled_results, [])
    with pytest.raises(NotFoundError):
        select_runs(bundled_results, ["sha256:ffffffffffff"])


def test_refusals_name_the_product_and_the_family(bundled_results: Registry) -> None:
    job = build_job(bundled_results, _passed_run(bundled_results).digest)
    assert refusals(job, "H200", "kictl-cuda-device-time") == []
    reasons = refusals(job, "B200", "kictl-cpu-wall-time")
    assert reasons[0] == "it ran on H200, this machine's device is B200"
    assert "kictl-cpu-wall-time" in reasons[1]
    assert measured_family(job.settings, "cpu") == "kictl-cpu-wall-time"
    assert measured_family(job.settings, "cuda:0") == job.settings.family


def test_jobs_of_one_definition_and_protocol_share_a_session(bundled_results: Registry) -> None:
    jobs = [build_job(bundled_results, r.digest) for r in bundled_results.iter_records(["BenchmarkRun"])
            if r.raw["spec"]["status"] == "passed"]  # fmt: skip
    groups = group_jobs(jobs)
    assert sorted(job.run.digest for group in groups for job in group) == sorted(job.run.digest for job in jobs)
    for group in groups:
        assert len({(job.definition.digest, job.protocol.digest) for job in group}) == 1
        implementations = {job.implementation.digest for job in group}
        workloads = {job.workload.digest for job in group}
        assert len(implementations) * len(workloads) <= 2 * len(group) or len(implementations) == 1


def test_fresh_seeds_salt_the_correctness_rounds_only_and_are_put_back() -> None:
    from kictl.bench.judge import inputs

    public = inputs.derive_seed
    with fresh_correctness_seeds("0" * 32):
        assert inputs.derive_seed(7, 0) == 7  # the timed inputs keep the workload's seed
        salted = [inputs.derive_seed(7, k) for k in (1, 2, 3)]
    with fresh_correctness_seeds("1" * 32):
        other = [inputs.derive_seed(7, k) for k in (1, 2, 3)]
    published = [public(7, k) for k in (1, 2, 3)]
    assert inputs.derive_seed is public
    assert len({*salted, *other, *published}) == 9


def test_sources_that_do_not_match_their_hash_are_refused(bundled_results: Registry) -> None:
    record = next(bundled_results.iter_records(["Implementation"]))
    check_sources(record)
    spec = record.model.spec
    source = spec.sources[0]  # type: ignore[union-attr]
    forged_source = type(source).model_construct(path=source.path, sha256=source.sha256, content=source.content + "#")
    forged_spec = spec.model_copy(update={"sources": (forged_source,)})
    forged = StoredRecord(
        model=record.model.model_copy(update={"spec": forged_spec}), raw=record.raw, digest=record.digest
    )
    with pytest.raises(RecordError, match="hashes to"):
        check_sources(forged)


def test_settings_of_a_protocol_from_another_harness(bundled_results: Registry) -> None:
    raw = {
        "apiVersion": "kernelindex.dev/v1alpha1",
        "kind": "BenchmarkProtocol",
        "metadata": {"name": "fib"},
        "spec": {
            "harness": {"name": "flashinfer-bench"},
            "correctness": {"reference": "definition reference implementation", "comparator": "allclose"},
            "measurement": {"timer": "harness_reported", "primaryStatistic": "mean"},
            "comparability": {"family": "flashinfer_bench_trace"},
        },
    }
    settings = ProtocolSettings.from_protocol(record_from_value(raw))
    assert (settings.device, settings.statistic, settings.family) == ("cuda", "mean", "flashinfer_bench_trace")
    assert settings.iterations is None
    assert settings.rounds is None


def test_a_rerun_repeats_the_originals_time_budget_and_only_that() -> None:
    """A GPU run whose default count was capped by the time budget is rerun capped; an exact count stays exact."""
    from kictl.bench.judge import correctness
    from kictl.bench.judge.options import BenchOptions
    from kictl.bench.judge.results import protocol_record, protocol_spec
    from kictl.rerun.execute import _options

    def settings_of(options: BenchOptions) -> ProtocolSettings:
        spec = protocol_spec("cuda:0", (10, 100, 3), options, correctness.Tolerance(), 1, timer_name="cuda_events")
        return ProtocolSettings.from_protocol(protocol_record(spec))

    from kictl.bench.judge.options import GPU_COUNT_BUDGET_S

    capped = settings_of(BenchOptions())
    assert (capped.iterations, capped.time_budget_s) == (100, GPU_COUNT_BUDGET_S)
    rerun = _options(capped, "cuda:0", 60.0, ["w"])
    assert (rerun.iterations, rerun.time_budget_s) == (100, GPU_COUNT_BUDGET_S)
    assert settings_of(rerun).to_json() == capped.to_json()  # the rerun's protocol settles as the original's
    # a run made under another default (1 s until session 7 of 2026-12-01) is rerun under its own
    older = settings_of(BenchOptions(time_budget_s=1.0))
    assert older.time_budget_s == 1.0 != GPU_COUNT_BUDGET_S
    assert _options(older, "cuda:0", 60.0, ["w"]).time_budget_s == 1.0
    exact = settings_of(BenchOptions(iterations=100))
    assert exact.time_budget_s is None
    assert _options(exact, "cuda:0", 60.0, ["w"]).time_budget_s is None


def test_cli_exit_codes_without_running_anything(cli: RunCli, bundled_results: Registry, tmp_path: Path) -> None:
    root = bundled_results.root
    assert cli("rerun", "--registry", root).exit_code == 2
    assert cli("rerun", "sha256:0123456789ab", "--registry", root).exit_code == 3
    both = cli(
        "rerun", _passed_run(bundled_results).digest, "--out", tmp_path, "--sign", tmp_path / "k", "--registry", root
    )
    assert both.exit_code == 2, both.output
    missing_key = cli("rerun", _passed_run(bundled_results).digest, "--sign", tmp_path / "k", "--registry", root)
    assert missing_key.exit_code == 5, missing_key.output
    no_results = cli("attest", "rerun", tmp_path, "--key", tmp_path / "k", "--registry", root)
    assert no_results.exit_code == 5, no_results.output  # the key is checked first
    from kictl import trust

    trust.generate_keypair(tmp_path / "k", owner="someone")
    empty = tmp_path / "empty"
    empty.mkdir()
    no_results = cli("attest", "rerun", empty, "--key", tmp_path / "k", "--registry", root)
    assert no_results.exit_code == 2, no_results.output
    assert "reruns.json: no such file" in no_results.stderr


def test_help_lists_the_commands_and_imports_neither_torch_nor_the_rerun_package(cli: RunCli) -> None:
    import subprocess
    import sys

    probe = (
        "import sys; from kictl.cli import main; sys.argv = ['kictl', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('torch' in sys.modules, 'kictl.rerun' in sys.modules, 'kictl.bench.judge.session' in sys.modules)\n"
        "from kictl.cli import every_command; every_command(); print('torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split()[-4:] == ["False", "False", "False", "False"]
    top = cli("--help")
    assert "rerun" in top.stdout
    assert "attest" in top.stdout
    assert "rerun" in cli("attest", "--help").stdout
