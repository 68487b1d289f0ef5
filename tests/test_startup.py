"""Start-up stays cheap (issue 13): heavy modules are imported only on the path that needs them.

`kictl --help` imports no torch, gitpython, cryptography or pydantic; a warm
`kictl leaderboard` imports no torch and no gitpython (git is asked through
subprocess where a read command needs it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

_PROBE = """
import json, sys
extra = json.loads(sys.argv[2])
sys.argv = ["kictl", *json.loads(sys.argv[1])]
from kictl.cli import main
try:
    main()
except SystemExit:
    pass
heavy = ("torch", "git", "cryptography", "pydantic", "kictl.records", "kictl.store", *extra)
sys.stderr.write(json.dumps(sorted(name for name in heavy if name in sys.modules)) + "\\n")
"""


def _imported(args: list[str], cwd: Path, extra: tuple[str, ...] = ()) -> list[str]:
    env = {**os.environ, "KICTL_CONFIG_HOME": str(cwd / "config")}
    env.pop("KICTL_REGISTRY", None)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(args), json.dumps(extra)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    last = done.stderr.strip().splitlines()[-1]
    imported: list[str] = json.loads(last)
    return imported


def test_help_imports_nothing_heavy(tmp_path: Path) -> None:
    assert _imported(["--help"], tmp_path) == []
    assert _imported(["leaderboard", "--help"], tmp_path) == []
    # nor rich: typer's rich help imports markdown, syntax highlighting and tracebacks (kictl/cli/_help.py)
    assert _imported(["--help"], tmp_path, extra=("rich", "typer._adapters")) == []


@pytest.fixture
def bundled_copy(tmp_path: Path) -> Path:
    """The bundled registry (registry/ and definitions/) copied into a fresh git repository."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    target = tmp_path / "bundled"
    for folder in ("registry", "definitions"):
        shutil.copytree(REPO / folder, target / folder, ignore=shutil.ignore_patterns(".kictl"))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "the bundled registry"]):
        subprocess.run(["git", "-C", str(target), *args], check=True)
    return target


def test_a_warm_leaderboard_imports_no_torch_and_no_gitpython(bundled_copy: Path) -> None:
    args = ["leaderboard", "gqa_paged_decode_h32_kv8_d128_ps1"]
    _imported(args, bundled_copy)  # cold: builds .kictl/index
    imported = _imported(args, bundled_copy)
    assert "torch" not in imported
    assert "git" not in imported


def test_each_command_is_built_from_the_module_that_adds_it() -> None:
    """`main` builds only the named command's module: the map must be what the modules register."""
    import typer
    import typer.main

    from kictl import cli

    everything = typer.main.get_command(cli.make_app())
    assert set(cli.COMMANDS) == set(getattr(everything, "commands", {}))
    for command, module in cli.COMMANDS.items():
        alone = typer.main.get_command(cli.make_app(command))
        names = set(getattr(alone, "commands", {}))
        assert names == {name for name, owner in cli.COMMANDS.items() if owner == module}, (command, module)
    assert isinstance(typer.main.get_command(cli.make_app("no-such-command")), type(everything))
    assert set(getattr(typer.main.get_command(cli.make_app("no-such-command")), "commands", {})) == set(cli.COMMANDS)


def test_the_console_script_runs_the_one_command(bundled_copy: Path) -> None:
    env = {**os.environ, "KICTL_CONFIG_HOME": str(bundled_copy / "config")}
    done = subprocess.run(
        [sys.executable, "-m", "kictl", "--debug", "leaderboard", "gqa_paged_decode_h32_kv8_d128_ps1", "--json"],
        cwd=bundled_copy,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["definition"]["name"] == "gqa_paged_decode_h32_kv8_d128_ps1"
    unknown = subprocess.run(
        [sys.executable, "-m", "kictl", "frobnicate"], cwd=bundled_copy, env=env, capture_output=True, text=True
    )
    assert unknown.returncode == 2
    assert "No such command 'frobnicate'" in unknown.stderr


def test_a_bench_worker_imports_no_records_before_torch() -> None:
    """Every implementation and reference gets a fresh worker process (``python -m kictl.bench.worker``):
    its own modules import no pydantic records, which took 0.13 s of each worker's start."""
    probe = (
        "import sys, kictl.bench.worker.main; "
        "print(sorted(m for m in ('pydantic', 'kictl.records') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
