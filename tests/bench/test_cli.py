"""``kictl bench`` on the command line: records that validate, the summary, the documented exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kictl.records import BenchmarkRun, DefinitionSpec, WorkloadSpec, new_record
from kictl.store.registry import Registry
from tests.bench.conftest import FAST, IMPLEMENTATIONS, cuda_available
from tests.conftest import REPO_ROOT, RunCli, empty_trust_root

RMSNORM = "rmsnorm_h4096"
BOTH = ("--impl", IMPLEMENTATIONS / RMSNORM / "torch_rmsnorm", "--impl", IMPLEMENTATIONS / RMSNORM / "reference")


def test_bench_writes_a_manifest_that_kictl_add_accepts(
    cli: RunCli, bundled_registry: Registry, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = cli(
        "bench",
        RMSNORM,
        *BOTH,
        "--workload",
        "b1",
        "--workload",
        "b7",
        *FAST,
        "--rounds",
        "2",
        "--registry",
        bundled_registry.root,
        "--out",
        out,
        "--json",
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(row["implementation"].rsplit("_", 1)[0], row["workload"]) for row in rows] == [
        ("reference", "b1"),
        ("torch_rmsnorm", "b1"),
        ("reference", "b7"),
        ("torch_rmsnorm", "b7"),
    ]
    assert all(row["status"] == "passed" and row["latencyNs"] > 0 for row in rows)
    assert rows[0]["speedupVsReference"] == 1.0
    manifests = list(out.glob("*.json"))
    assert len(manifests) == 1
    kinds = [record["kind"] for record in json.loads(manifests[0].read_text()).values()]
    assert sorted(set(kinds)) == [
        "BenchmarkProtocol",
        "BenchmarkRun",
        "Definition",
        "ExecutionEnvironment",
        "Implementation",
        "Workload",
    ]
    assert kinds.count("BenchmarkRun") == 4
    added = cli("add", out, "--registry", bundled_registry.root)
    assert added.exit_code == 0, added.output
    validated = cli("validate", "--registry", bundled_registry.root, "--json")
    assert validated.exit_code == 0, validated.output
    assert json.loads(validated.stdout)["counts"]["BenchmarkRun"] == 4


def test_bench_adds_to_the_registry_and_prints_a_table(cli: RunCli, bundled_registry: Registry) -> None:
    result = cli("bench", RMSNORM, *BOTH, "--workload", "b1", *FAST, "--registry", bundled_registry.root)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert all(len(line) <= 100 for line in lines), lines
    assert lines[0].startswith("reference_")
    assert lines[1].split()[:3] == ["workload", "status", "median"]
    assert lines[3].split()[:2] == ["b1", "passed"]
    assert "records added to" in result.stderr
    assert "--device auto" not in result.stderr  # --device cpu, asked for, is not noted (test_device_auto.py)
    runs = list(bundled_registry.iter_records(["BenchmarkRun"]))
    assert len(runs) == 2
    for run in runs:
        assert isinstance(run.model, BenchmarkRun)
        spec = run.model.spec
        assert spec.status == "passed"
        assert spec.timing is not None
        assert spec.timing.samples is not None
        assert len(spec.timing.samples) == 1
        assert spec.integrity is not None
        assert spec.integrity["inputsUnchanged"].result == "passed"
        for member in ("protocol_digest", "environment_digest", "implementation_digest", "workload_digest"):
            assert bundled_registry.has_record(getattr(spec, member)), member
    validated = cli("validate", "--registry", bundled_registry.root)
    assert validated.exit_code == 0, validated.output


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("no_such_definition", "--impl", "x.py"), 3, "no Definition named or digested 'no_such_definition'"),
        ((RMSNORM, "--impl", IMPLEMENTATIONS / RMSNORM / "reference", "--workload", "b3"), 3, "named or digested 'b3'"),
        ((RMSNORM, "--impl", IMPLEMENTATIONS / RMSNORM / "reference", "--device", "tpu"), 2, "expected auto, cpu"),
        ((RMSNORM, "--impl", "missing/kernel.py", "--device", "cpu"), 2, "no such file or folder"),
        (
            (RMSNORM, "--impl", IMPLEMENTATIONS / RMSNORM / "reference", "--device", "cpu", "--cuda-graph"),
            2,
            "--cuda-graph needs a CUDA device",
        ),
        (
            (RMSNORM, "--impl", IMPLEMENTATIONS / RMSNORM / "reference", "--device", "cpu", "--rounds", "0"),
            2,
            "--rounds must be >= 1",
        ),
        (
            (RMSNORM, "--impl", IMPLEMENTATIONS / RMSNORM / "reference", "--device", "cpu", "--stop-after", "-1"),
            2,
            "--stop-after must be zero or more seconds",
        ),
        (
            (RMSNORM, "--impl", IMPLEMENTATIONS / RMSNORM / "reference", "--device", "cpu", "--stop-after", "nan"),
            2,
            "--stop-after must be zero or more seconds",
        ),
        (
            (RMSNORM, "--impl", IMPLEMENTATIONS / RMSNORM / "reference", "--stop-after", "9", "--shard", "1/2"),
            2,
            "--stop-after stops one local session",
        ),
    ],
)
def test_exit_codes(cli: RunCli, bundled_registry: Registry, args: tuple[object, ...], code: int, message: str) -> None:
    result = cli("bench", *args, "--registry", bundled_registry.root)
    assert result.exit_code == code, result.output
    assert result.stderr.startswith("error: "), result.stderr
    assert message in result.stderr, result.stderr


@pytest.mark.skipif(cuda_available(), reason="checks the machine without a GPU")
def test_no_gpu_is_exit_5(cli: RunCli, bundled_registry: Registry) -> None:
    result = cli(
        "bench",
        RMSNORM,
        "--impl",
        IMPLEMENTATIONS / RMSNORM / "reference",
        "--device",
        "cuda",
        "--registry",
        bundled_registry.root,
    )
    assert result.exit_code == 5, result.output
    assert "no CUDA GPU is available" in result.stderr
    # issue 45: refused before any worker started, so the one line is all there is
    assert result.stderr.splitlines() == [line for line in result.stderr.splitlines() if line.startswith("error: ")]


def test_no_sandbox_is_exit_5_unless_waived(
    cli: RunCli, bundled_registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KICTL_BWRAP", str(tmp_path / "no-bwrap-here"))
    args = ("bench", RMSNORM, "--impl", IMPLEMENTATIONS / RMSNORM / "reference", "--device", "cpu")
    result = cli(*args, "--registry", bundled_registry.root)
    assert result.exit_code == 5, result.output
    assert "bubblewrap (bwrap) is not on $KICTL_BWRAP" in result.stderr
    assert "--no-sandbox" in result.stderr
    waived = cli(
        *args, "--workload", "b1", *FAST, "--no-sandbox", "--out", tmp_path / "out", "--registry", bundled_registry.root
    )
    assert waived.exit_code == 0, waived.output
    (manifest,) = (tmp_path / "out").glob("*.json")
    (protocol,) = [r for r in json.loads(manifest.read_text()).values() if r["kind"] == "BenchmarkProtocol"]
    assert protocol["spec"]["measurement"]["isolation"].startswith("none: --no-sandbox")
    assert protocol["metadata"]["name"].endswith(".unsandboxed")


def test_a_failing_run_is_exit_1_with_records_written(cli: RunCli, bundled_registry: Registry, tmp_path: Path) -> None:
    wrong = REPO_ROOT / "tests" / "assets" / "cheats" / "rmsnorm_wrong_values.py"
    result = cli(
        "bench",
        RMSNORM,
        "--impl",
        wrong,
        "--workload",
        "b1",
        *FAST,
        "--registry",
        bundled_registry.root,
        "--out",
        tmp_path,
        "--json",
    )
    assert result.exit_code == 1, result.output
    assert [row["status"] for row in json.loads(result.stdout)] == ["incorrect_numerical"]
    assert result.stderr.rstrip().endswith("error: 1 of 1 runs did not pass")
    assert len(list(tmp_path.glob("*.json"))) == 1


def test_help_does_not_import_torch() -> None:
    probe = "import sys; from kictl.cli import every_command; every_command(); print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_workload_whose_reference_fails_is_skipped(cli: RunCli, empty_registry: Registry, tmp_path: Path) -> None:
    spec = {
        "name": "double",
        "family": "elementwise",
        "axes": {"n": {"type": "var"}},
        "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
        "reference": "def run(x):\n    if x.shape[0] > 4:\n        raise MemoryError('too big for the reference')\n"
        "    return x * 2\n",
    }
    definition = new_record(DefinitionSpec.model_validate_json(json.dumps(spec)), name="double")
    workloads = [
        new_record(
            WorkloadSpec.model_validate_json(
                json.dumps(
                    {"definitionDigest": definition.digest, "axes": {"n": n}, "inputs": {"x": {"type": "random"}}}
                )
            ),
            name=f"n{n}",
        )
        for n in (3, 9)
    ]
    empty_registry.add([definition, *workloads])
    kernel = tmp_path / "double.py"
    kernel.write_text("def run(x):\n    return x + x\n", encoding="utf-8")
    result = cli("bench", "double", "--impl", kernel, *FAST, "--registry", empty_registry.root, "--json")
    assert result.exit_code == 1, result.output
    assert [(row["workload"], row["status"]) for row in json.loads(result.stdout)] == [("n3", "passed")]
    assert (
        "warning: workload n9 skipped, no runs recorded: the definition's reference failed (runtime_error): "
        in result.stderr
    )
    assert "MemoryError: too big for the reference" in result.stderr
    assert result.stderr.rstrip().endswith("error: 1 workload(s) skipped, 0 of 1 runs did not pass")


@pytest.mark.parametrize(
    ("flag", "calls", "inside"),
    [
        (None, ["setup", "run", "setup", "run", "run", "run"], False),
        ("--time-setup", ["setup", "run", "setup", "run", "setup", "run", "setup", "run"], True),
    ],
)
def test_setup_runs_outside_the_timed_region_unless_asked(
    cli: RunCli,
    bundled_registry: Registry,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    flag: str | None,
    calls: list[str],
    inside: bool,
) -> None:
    log = tmp_path / "calls.log"
    monkeypatch.setenv("KICTL_TEST_CALL_LOG", str(log))
    impl = REPO_ROOT / "tests" / "assets" / "rmsnorm_with_setup.py"
    # unsandboxed, so that the implementation can write its call log where the test reads it
    extra = [flag, "--no-sandbox"] if flag else ["--no-sandbox"]
    result = cli(
        "bench",
        RMSNORM,
        "--impl",
        impl,
        "--workload",
        "b1",
        *FAST,
        "--iterations",
        "3",
        *extra,
        "--registry",
        bundled_registry.root,
        "--out",
        tmp_path / "out",
    )
    assert result.exit_code == 0, result.output
    # one correctness round (run sets itself up), setup for the timed tensors, three timed calls
    assert log.read_text(encoding="utf-8").split() == calls
    (manifest,) = (tmp_path / "out").glob("*.json")
    (protocol,) = [r for r in json.loads(manifest.read_text()).values() if r["kind"] == "BenchmarkProtocol"]
    assert protocol["spec"]["measurement"]["setupInTimedRegion"] is inside


def test_sign_attests_every_new_run(cli: RunCli, bundled_registry: Registry, tmp_path: Path) -> None:
    from kictl import trust

    keys = tmp_path / "keys"
    for name in ("maintainer", "submitter"):
        assert cli("keygen", "--out", keys / f"{name}.key", "--owner", name).exit_code == 0
    root = bundled_registry.root
    h200 = {record.digest for record in bundled_registry.iter_records(["ExecutionEnvironment"])}
    empty_trust_root(root)  # the test's own maintainer and submitter
    assert cli("trust", "init", "--key", keys / "maintainer.key", "--registry", root).exit_code == 0
    added = cli(
        "trust", "add-key", keys / "submitter.key.pub", "--role", "submitter",
        "--key", keys / "maintainer.key", "--registry", root,
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    result = cli(
        "bench", RMSNORM, *BOTH, "--workload", "b1", *FAST, "--sign", keys / "submitter.key", "--registry", root
    )
    assert result.exit_code == 0, result.output
    assert "signed 2 run(s) with a submission attestation" in result.stderr
    runs = [
        record.digest
        for record in bundled_registry.iter_records(["BenchmarkRun"])
        if record.model.spec.environment_digest not in h200  # type: ignore[union-attr]
    ]
    assert len(runs) == 2
    for digest in runs:
        report = trust.check_record(bundled_registry, digest)
        assert report.ok, report
        assert [a.predicate_type for a in report.attestations] == ["submission"]


def test_sign_needs_the_registry_and_a_usable_key(cli: RunCli, bundled_registry: Registry, tmp_path: Path) -> None:
    key = tmp_path / "k.key"
    assert cli("keygen", "--out", key).exit_code == 0
    with_out = cli(
        "bench", RMSNORM, *BOTH, *FAST, "--sign", key, "--out", tmp_path / "o", "--registry", bundled_registry.root
    )
    assert with_out.exit_code == 2
    assert "sign an --out folder with `kictl submit`" in with_out.stderr
    key.chmod(0o644)
    before = len(list(bundled_registry.iter_records(["BenchmarkRun"])))
    loose = cli("bench", RMSNORM, *BOTH, *FAST, "--sign", key, "--registry", bundled_registry.root)
    assert loose.exit_code == 5, loose.output
    assert len(list(bundled_registry.iter_records(["BenchmarkRun"]))) == before  # refused before benchmarking
