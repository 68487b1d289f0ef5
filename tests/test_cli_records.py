"""The record commands through the CLI: digest, add, show, init, and the exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kictl import canon
from kictl.store.registry import Registry
from tests import factories
from tests.conftest import ASSETS, RunCli

KAT = ASSETS / "kat"


def _expected_kat() -> dict[str, str]:
    return dict(line.split() for line in (KAT / "digests.txt").read_text().splitlines())


def test_digest_of_a_manifest_matches_the_known_answers(cli: RunCli) -> None:
    result = cli("digest", KAT / "manifest.json", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    expected = _expected_kat()
    assert [(r["kind"], r["digest"]) for r in rows] == [
        ("BenchmarkRun", expected["run"]),
        ("BenchmarkProtocol", expected["protocol"]),
        ("ExecutionEnvironment", expected["environment"]),
    ]
    text = cli("digest", KAT / "manifest.json")
    assert text.stdout.splitlines()[0].split() == [expected["run"], "BenchmarkRun", "gemm-m256-triton-gpt-o3"]


def test_digest_of_a_list_and_of_stdin(cli: RunCli, tmp_path: Path) -> None:
    chain = factories.chain()
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps(list(chain.values())))
    result = cli("digest", listed, "--json")
    assert [r["digest"] for r in json.loads(result.stdout)] == [canon.record_digest(r) for r in chain.values()]
    piped = cli("digest", "-", input=json.dumps(chain["run"]))
    assert piped.exit_code == 0, piped.output
    assert piped.stdout.split()[0] == canon.record_digest(chain["run"])


def test_add_then_show(cli: RunCli, empty_registry: Registry, tmp_path: Path) -> None:
    chain = factories.chain()
    run_file = tmp_path / "run.json"
    run_file.write_text(json.dumps(chain["run"]))
    first = cli("add", "--registry", empty_registry.root, run_file)
    assert first.exit_code == 0, first.output
    assert first.stderr.count("warning:") == 5  # its references are not there yet
    rest = tmp_path / "rest.json"
    rest.write_text(json.dumps({k: v for k, v in chain.items() if k != "run"}))
    second = cli("add", "--registry", empty_registry.root, rest, run_file, "--json")
    assert second.exit_code == 0, second.output
    rows = json.loads(second.stdout)
    assert [row["created"] for row in rows] == [True] * 5 + [False]
    assert cli("validate", "--registry", empty_registry.root).exit_code == 0
    digest = canon.record_digest(chain["run"])
    shown = cli("show", digest[7:17], "--registry", empty_registry.root, "--json")
    assert shown.exit_code == 0, shown.output
    document = json.loads(shown.stdout)
    assert document["digest"] == digest
    assert document["record"] == json.loads(json.dumps(chain["run"]))
    text = cli("show", "gemm_tiny", "--registry", empty_registry.root)
    assert text.stdout.startswith("digest: sha256:")
    assert '"family": "gemm"' in text.stdout


def test_show_ambiguous_and_unknown(cli: RunCli, empty_registry: Registry, tmp_path: Path) -> None:
    chain = factories.chain()
    file = tmp_path / "chain.json"
    file.write_text(json.dumps(chain))
    cli("add", "--registry", empty_registry.root, file)
    digest = canon.record_digest(chain["run"])
    real = empty_registry.record_path("BenchmarkRun", digest)
    twin = real.with_name(digest[7:15] + "f" * 56 + ".json")  # shares the first 8 hex digits
    shutil.copy(real, twin)
    result = cli("show", digest[7:15], "--registry", empty_registry.root)
    assert result.exit_code == 3
    assert "is ambiguous" in result.stderr
    assert "candidates: sha256:" in result.stderr
    unknown = cli("show", "0123456789abcdef", "--registry", empty_registry.root)
    assert unknown.exit_code == 3
    assert unknown.stderr.startswith("error: no record named or digested")


def test_init_refuses_an_existing_registry(cli: RunCli, tmp_path: Path) -> None:
    target = tmp_path / "new"
    first = cli("init", target)
    assert first.exit_code == 0, first.output
    assert (target / "registry" / "trust" / "root.json").is_file()
    assert (target / "registry" / "policy.json").is_file()
    assert cli("validate", "--registry", target).exit_code == 0
    again = cli("init", target)
    assert again.exit_code == 4
    assert "already holds a registry" in again.stderr


def test_registry_not_found_is_exit_4(cli: RunCli, tmp_path: Path) -> None:
    result = cli("validate")
    assert result.exit_code == 4
    assert "no registry found" in result.stderr


def test_missing_input_file_is_usage(cli: RunCli, tmp_path: Path) -> None:
    result = cli("digest", tmp_path / "absent.json")
    assert result.exit_code == 2
    assert result.stderr == f"error: {tmp_path / 'absent.json'}: no such file\n"


def test_unknown_option_is_usage(cli: RunCli) -> None:
    result = cli("digest", "--frobnicate")
    assert result.exit_code == 2


def test_help_documents_exit_codes_and_version(cli: RunCli) -> None:
    result = cli("--help")
    assert result.exit_code == 0
    assert "Exit codes: 0 ok, 1 a check said no, 2 usage" in " ".join(result.stdout.split())
    assert cli("--version").stdout.startswith("kictl ")


def test_debug_reraises(cli: RunCli, tmp_path: Path) -> None:
    from kictl.errors import UsageError

    with pytest.raises(UsageError):
        cli("--debug", "digest", tmp_path / "absent.json")


def test_cli_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from kictl.cli import every_command; every_command();"
        "import kictl.validate, kictl.store, kictl.families;"
        "print('torch' in sys.modules)"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert output.stdout.strip() == "False"
