"""Every command maps errors to the documented exit codes (kictl.errors), with one ``error:`` line and no traceback.

The commands are read from the app itself, so a command added later is held
to the same rules: it is wrapped by ``guarded``, it refuses an unknown option
with exit 2, and (when it takes ``--registry``) a folder that is no registry
with exit 4.  Each other documented code is then provoked for real.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kictl.cli import every_command
from kictl.cli._common import guarded
from kictl.errors import EXIT_CHECK_FAILED, EXIT_ENVIRONMENT, EXIT_INVALID, EXIT_REGISTRY, EXIT_USAGE
from kictl.records import KINDS
from kictl.store.registry import Registry
from tests import factories
from tests.conftest import RunCli

#: Arguments that satisfy each command's required parameters (the registry is added by the tests).
REQUIRED: dict[str, list[str]] = {
    "init": ["DIR"],
    "digest": ["FILE"],
    "add": ["FILE"],
    "show": ["gemm_tiny"],
    "bench": ["gemm_tiny", "--impl", "IMPL"],
    "keygen": ["--out", "KEY"],
    "sign": ["gemm_tiny", "--key", "KEY"],
    "verify": ["gemm_tiny"],
    "leaderboard": ["gemm_tiny"],
    "floor": ["gemm_tiny", "--gpu", "H200"],
    "diff": ["gemm_tiny", "gemm_tiny"],
    "history": ["gemm_tiny"],
    "cite": ["gemm_tiny"],
    "submit": ["FILE", "--key", "KEY"],
    "review": ["--base", "main"],
    "trust init": ["--key", "KEY"],
    "trust add-key": ["KEY.pub", "--role", "submitter", "--key", "KEY"],
    "trust revoke": ["0" * 64, "--reason", "retired", "--key", "KEY"],
    "trust reanchor": ["--maintainer", "KEY.pub", "--key", "KEY"],
    "import flashinfer-bench": ["DIR"],
    "export flashinfer-trace": ["OUT", "--gpu", "H200"],
    "rerun": ["gemm_tiny", "--out", "OUT"],
    "attest rerun": ["DIR", "--key", "KEY"],
    "attest request": ["gemm_tiny", "--key", "KEY", "--out", "OUT"],
    "site build": ["OUT"],
    "validate": [],
    "definitions compile": [],
    "definitions list": [],
    "definitions catalogue": ["DIR", "--commit", "0" * 40],
    "trust show": [],
    "trust sign-policy": ["--key", "KEY"],
    "trust verify": [],
    "trust repair": [],
    "advisory add": ["FILE", "--key", "KEY"],
    "advisory withdraw": ["KI-2026-0001", "--reason", "why", "--key", "KEY"],
    "advisory list": [],
    "advisory show": ["KI-2026-0001"],
    "selftest": ["--entry", "honest_slow_loop"],
}


def _commands() -> Iterator[tuple[str, Any]]:
    def walk(command: Any, prefix: tuple[str, ...]) -> Iterator[tuple[str, Any]]:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                yield from walk(sub, (*prefix, name))
        else:
            yield " ".join(prefix), command

    yield from walk(every_command(), ())


COMMANDS = dict(_commands())


def _args(name: str, tmp_path: Path) -> list[str]:
    words = [
        str(tmp_path / word) if word.isupper() or word.startswith("KEY") else word for word in REQUIRED.get(name, [])
    ]
    return [*name.split(), *words]


def _one_error_line(output: str) -> None:
    assert output.startswith("error: "), output
    assert "Traceback" not in output, output


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_is_guarded(name: str) -> None:
    callback = COMMANDS[name].callback
    chain = [callback]
    while hasattr(chain[-1], "__wrapped__"):
        chain.append(chain[-1].__wrapped__)
    wrapper_code = guarded(print).__code__  # every guarded command runs this code object
    assert any(f.__code__ is wrapper_code for f in chain), f"{name} does not map KictlError to exit codes"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_an_unknown_option_is_usage(cli: RunCli, name: str, tmp_path: Path) -> None:
    result = cli(*_args(name, tmp_path), "--no-such-option")
    assert result.exit_code == EXIT_USAGE, result.output
    assert "No such option" in result.output


@pytest.mark.parametrize(
    "name", sorted(name for name, command in COMMANDS.items() if any(p.name == "registry" for p in command.params))
)
def test_a_folder_that_is_no_registry_is_exit_4(cli: RunCli, name: str, tmp_path: Path) -> None:
    assert name in REQUIRED, f"add {name}'s required arguments to REQUIRED"
    nowhere = tmp_path / "not-a-registry"
    nowhere.mkdir()
    result = cli(*_args(name, tmp_path), "--registry", nowhere)
    assert result.exit_code == EXIT_REGISTRY, result.output
    _one_error_line(result.stderr)
    assert "is not a registry" in result.stderr


@pytest.mark.parametrize(
    "name", ["show", "verify", "sign", "leaderboard", "floor", "history", "cite", "definitions compile"]
)
def test_an_unknown_record_or_name_is_exit_3(cli: RunCli, empty_registry: Registry, name: str, tmp_path: Path) -> None:
    args = [*name.split(), "no_such_record"] if name == "definitions compile" else _args(name, tmp_path)
    args = [arg.replace("gemm_tiny", "no_such_record") for arg in args]
    if name == "sign":
        assert cli("keygen", "--out", tmp_path / "KEY").exit_code == 0
    result = cli(*args, "--registry", empty_registry.root)
    assert result.exit_code == EXIT_INVALID, result.output
    _one_error_line(result.stderr)


def test_an_invalid_record_is_exit_3(cli: RunCli, empty_registry: Registry, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({**factories.definition(), "kind": "Nonsense"}))
    for args in (["digest", broken], ["add", broken, "--registry", empty_registry.root]):
        result = cli(*args)
        assert result.exit_code == EXIT_INVALID, result.output
        expected = f"{broken}: $.kind: unknown kind 'Nonsense'; expected one of {', '.join(KINDS)}"
        assert result.stderr == f"error: {expected}\n"


def test_a_check_that_says_no_is_exit_1(cli: RunCli, empty_registry: Registry, tmp_path: Path) -> None:
    chain = factories.chain()
    file = tmp_path / "chain.json"
    file.write_text(json.dumps(chain))
    assert cli("add", file, "--registry", empty_registry.root).exit_code == 0
    empty_registry.git.repo.git.add("registry")
    empty_registry.git.repo.index.commit("records")
    definition, run = chain["definition"]["metadata"]["name"], chain["run"]["metadata"]["name"]
    result = cli("diff", definition, run, "--registry", empty_registry.root)
    assert result.exit_code == EXIT_CHECK_FAILED, result.output


def test_a_missing_key_is_exit_5(cli: RunCli, empty_registry: Registry, tmp_path: Path) -> None:
    chain = factories.chain()
    file = tmp_path / "chain.json"
    file.write_text(json.dumps(chain))
    assert cli("add", file, "--registry", empty_registry.root).exit_code == 0
    result = cli("sign", "gemm_tiny", "--key", tmp_path / "absent.key", "--registry", empty_registry.root)
    assert result.exit_code == EXIT_ENVIRONMENT, result.output
    _one_error_line(result.stderr)
    assert "no private key" in result.stderr
