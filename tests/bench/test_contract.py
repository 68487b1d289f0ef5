"""A definition's precision contract (issue 27): the loosest tolerance any run of it is judged at.

On the CPU, through the real harness: a definition of float32 RMSNorm that states ``atol``/``rtol`` 1e-5, an
honest float32 implementation and a shortcut that does its maths in bfloat16 (about 4e-3 off, inside kictl's
default 1e-2 on most values).  Without a contract the submitter's ``--atol``/``--rtol`` let it through.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from kictl.bench.judge import correctness
from kictl.bench.judge.session import BenchOptions, tolerance_for
from kictl.errors import UsageError
from kictl.records import DefinitionSpec, record_from_value
from kictl.store.registry import Registry
from tests.bench.conftest import FAST
from tests.conftest import RunCli

REFERENCE = '''"""float32 RMSNorm of rows 256 wide."""

import torch


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-5) * weight
'''

HONEST = """import torch


@torch.no_grad()
def run(hidden_states, weight):
    return torch.nn.functional.rms_norm(hidden_states, (hidden_states.shape[-1],), weight, 1e-5)
"""

# the maths in bfloat16: half the memory traffic on a GPU, about 4e-3 off
SHORTCUT = """import torch


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.bfloat16()
    y = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-5) * weight.bfloat16()
    return y.float()
"""

CONTRACT = {"atol": 1e-5, "rtol": 1e-5, "requiredMatchedRatio": 1.0}
#: what a submitter may ask for where no contract says otherwise
LOOSE = ("--atol", "5e-2", "--rtol", "5e-2")


def _definition(name: str, contract: dict[str, float] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "family": "rmsnorm",
        "description": "RMSNorm of float32 rows, in float32.",
        "axes": {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": 256}},
        "inputs": {
            "hidden_states": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"},
            "weight": {"shape": ["hidden_size"], "dtype": "float32"},
        },
        "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"}},
    }
    if contract is not None:
        spec["tolerance"] = contract
    return {"metadata": {"name": name}, "spec": spec}


def _add_definition(registry: Registry, name: str, contract: dict[str, float] | None) -> None:
    folder = registry.root / "definitions" / "rmsnorm" / name
    folder.mkdir(parents=True)
    (folder / "definition.json").write_text(json.dumps(_definition(name, contract), indent=2))
    (folder / "reference.py").write_text(REFERENCE)
    workloads = [
        {
            "metadata": {"name": f"b{rows}"},
            "spec": {
                "axes": {"batch_size": rows},
                "inputs": {
                    "hidden_states": {"type": "random", "seed": rows},
                    "weight": {"type": "random", "seed": rows + 1},
                },
            },
        }
        for rows in (4, 32)
    ]
    (folder / "workloads.jsonl").write_text("".join(json.dumps(w) + "\n" for w in workloads))


def _implementations(tmp_path: Path) -> tuple[Path, Path]:
    honest, shortcut = tmp_path / "float32_rmsnorm.py", tmp_path / "bfloat16_shortcut.py"
    honest.write_text(HONEST)
    shortcut.write_text(SHORTCUT)
    return honest, shortcut


@pytest.fixture
def contracted(cli: RunCli, bundled_registry: Registry) -> Registry:
    _add_definition(bundled_registry, "rmsnorm_h256_f32", CONTRACT)
    _add_definition(bundled_registry, "rmsnorm_h256_f32_loose", None)
    compiled = cli("definitions", "compile", "--registry", bundled_registry.root)
    assert compiled.exit_code == 0, compiled.output
    return bundled_registry


def _bench(
    cli: RunCli, registry: Registry, definition: str, tmp_path: Path, *impls: Path, extra: tuple[str, ...] = ()
) -> Result:
    out = tmp_path / f"out-{definition}"
    args = [a for impl in impls for a in ("--impl", str(impl))]
    return cli("bench", definition, *args, *FAST, *extra, "--registry", registry.root, "--out", out, "--json")


def test_a_lower_precision_shortcut_is_judged_by_the_definitions_contract(
    cli: RunCli, contracted: Registry, tmp_path: Path
) -> None:
    honest, shortcut = _implementations(tmp_path)
    result = _bench(cli, contracted, "rmsnorm_h256_f32", tmp_path, honest, shortcut)
    rows = json.loads(result.stdout)
    status = {(row["implementation"].rsplit("_", 1)[0], row["workload"]): row["status"] for row in rows}
    assert status == {
        ("float32_rmsnorm", "b4"): "passed",
        ("float32_rmsnorm", "b32"): "passed",
        ("bfloat16_shortcut", "b4"): "incorrect_numerical",
        ("bfloat16_shortcut", "b32"): "incorrect_numerical",
    }, rows
    # the run's protocol records the tolerance it was judged at: the contract's, not kictl's default
    manifest = json.loads(next((tmp_path / "out-rmsnorm_h256_f32").glob("*.json")).read_text())
    protocols = [r for r in manifest.values() if r["kind"] == "BenchmarkProtocol"]
    assert protocols
    assert {(p["spec"]["correctness"]["atol"], p["spec"]["correctness"]["rtol"]) for p in protocols} == {(1e-5, 1e-5)}
    # without a contract, the submitter's command line decides: a looser tolerance lets the same shortcut through
    loose = _bench(cli, contracted, "rmsnorm_h256_f32_loose", tmp_path, shortcut, extra=LOOSE)
    assert {row["status"] for row in json.loads(loose.stdout)} == {"passed"}, loose.output


def test_asking_for_a_looser_tolerance_than_the_contract_is_refused_before_anything_runs(
    cli: RunCli, contracted: Registry, tmp_path: Path
) -> None:
    _, shortcut = _implementations(tmp_path)
    for flag, value in (("--atol", "5e-2"), ("--rtol", "1e-3"), ("--matched-ratio", "0.9")):
        result = _bench(cli, contracted, "rmsnorm_h256_f32", tmp_path, shortcut, extra=(flag, value))
        assert result.exit_code == 2, result.output
        assert f"{flag} " in result.output, result.output
        assert "precision contract" in result.output, result.output
        assert "Traceback" not in result.output
        assert not (tmp_path / "out-rmsnorm_h256_f32").exists() or not list(
            (tmp_path / "out-rmsnorm_h256_f32").glob("*.json")
        )
    # tighter is allowed
    tighter = _bench(cli, contracted, "rmsnorm_h256_f32", tmp_path, shortcut, extra=("--atol", "1e-6"))
    assert tighter.exit_code == 1, tighter.output  # the shortcut fails, judged at 1e-6


def _workload(tolerance: dict[str, float] | None) -> Any:
    spec: dict[str, Any] = {"definitionDigest": "sha256:" + "0" * 64, "axes": {"batch_size": 4}, "inputs": {}}
    if tolerance is not None:
        spec["tolerance"] = tolerance
    return record_from_value(
        {"apiVersion": "kernelindex.dev/v1alpha1", "kind": "Workload", "metadata": {"name": "b4"}, "spec": spec}
    )


def _spec(contract: dict[str, float] | None) -> DefinitionSpec:
    raw = _definition("rmsnorm_h256_f32", contract)
    raw["spec"]["reference"] = REFERENCE
    spec = record_from_value({"apiVersion": "kernelindex.dev/v1alpha1", "kind": "Definition", **raw}).model.spec
    assert isinstance(spec, DefinitionSpec)
    return spec


def test_the_contract_bounds_the_defaults_and_the_workloads_own_tolerance() -> None:
    options = BenchOptions(device="cpu")
    # no contract: the workload's own, then kictl's defaults
    assert tolerance_for(_workload({"atol": 0.5}), options, _spec(None)) == correctness.Tolerance(
        atol=0.5, rtol=correctness.DEFAULT_RTOL, required_matched_ratio=correctness.DEFAULT_MATCHED_RATIO
    )
    # a contract tightens a looser workload and the defaults, and keeps a tighter workload's
    contract = {"atol": 1e-4, "rtol": 1e-3, "requiredMatchedRatio": 1.0}
    assert tolerance_for(_workload({"atol": 0.5, "rtol": 1e-5}), options, _spec(contract)) == correctness.Tolerance(
        atol=1e-4, rtol=1e-5, required_matched_ratio=1.0
    )
    with pytest.raises(UsageError, match=r"--rtol 0.01 is looser than rmsnorm_h256_f32's precision contract \(0.001\)"):
        tolerance_for(_workload(None), BenchOptions(device="cpu", rtol=1e-2), _spec(contract))


# --------------------------------------------------------------------------- a looser run ranks apart (issue 40)


def _family(options: BenchOptions, workload: Any, device: str = "cpu") -> str:
    from kictl.bench.judge.results import protocol_spec
    from kictl.bench.judge.session import default_tolerance

    tolerance = tolerance_for(workload, options, None)
    spec = protocol_spec(
        device, (1, None, 1), options, tolerance, 0, default_tolerance=default_tolerance(workload, options)
    )
    family: str = spec["comparability"]["family"]
    return family


@pytest.mark.parametrize(
    ("given", "loose"),
    [
        ({}, False),
        ({"atol": correctness.DEFAULT_ATOL}, False),  # asking for the default is the default
        ({"atol": correctness.DEFAULT_ATOL / 10, "rtol": 1e-4}, False),  # tighter still ranks with the default
        ({"atol": 0.02}, True),
        ({"rtol": 0.5}, True),
        ({"matched_ratio": 0.999}, True),
    ],
)
def test_a_run_judged_looser_than_the_default_gets_a_family_of_its_own(given: dict[str, Any], loose: bool) -> None:
    family = _family(dataclasses.replace(BenchOptions(device="cpu"), **given), _workload(None))
    assert family == "kictl-cpu-wall-time" + ("-looser-tolerance" if loose else "")


def test_a_workloads_own_tolerance_is_its_default_and_looser_than_it_is_apart() -> None:
    workload = _workload({"atol": 0.5})
    assert _family(BenchOptions(device="cpu"), workload) == "kictl-cpu-wall-time"
    assert _family(BenchOptions(device="cpu", atol=0.5), workload) == "kictl-cpu-wall-time"
    assert _family(BenchOptions(device="cpu", atol=0.6), workload) == "kictl-cpu-wall-time-looser-tolerance"


def test_the_looser_family_is_another_comparison_group_and_energy_keeps_it() -> None:
    from kictl.bench.judge.energy_loop import FAMILY, EnergyPhase
    from kictl.rank.groups import GroupKey

    default = GroupKey("sha256:" + "a" * 64, "H100", "kictl-cpu-wall-time", "median")
    looser = GroupKey(
        "sha256:" + "a" * 64, "H100", _family(BenchOptions(device="cpu", atol=0.5), _workload(None)), "median"
    )
    assert looser.digest != default.digest
    spec = {"measurement": {}, "comparability": {"family": "kictl-cuda-device-time-looser-tolerance"}}
    phase = EnergyPhase.__new__(EnergyPhase)
    phase.method = lambda: {}  # type: ignore[method-assign]
    assert phase.protocol(spec)["comparability"]["family"] == FAMILY + "-looser-tolerance"
