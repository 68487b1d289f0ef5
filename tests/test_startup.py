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
from collections.abc import Callable
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
heavy = ("torch", "git", "cryptography", "pydantic", "kictl.records", "kictl.store.registry", *extra)
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
    from kictl.cli import COMMANDS

    assert _imported(["--help"], tmp_path) == []
    # nor any command's module: the command table lists them (issue 44)
    modules = tuple(sorted({f"kictl.cli.{entry.add.__name__.lstrip('_')}" for entry in COMMANDS.values()}))
    assert _imported(["--help"], tmp_path, extra=modules) == []
    assert _imported(["frobnicate"], tmp_path, extra=modules) == []
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


def test_the_command_table_is_what_the_modules_add() -> None:
    """Each entry's ``add`` adds exactly the commands of the table that share it, and the line ``--help`` shows
    for each (written in the table, so that no module is imported to list it) is its own help's first sentence."""
    import typer
    import typer.main

    from kictl import cli

    by_adder: dict[Callable[[typer.Typer], None], set[str]] = {}
    for name, entry in cli.COMMANDS.items():
        by_adder.setdefault(entry.add, set()).add(name)
    for add, names in by_adder.items():
        app = typer.Typer()
        add(app)
        added = typer.main.get_group(app).commands
        assert set(added) == names, add
        for name in names:
            assert added[name].get_short_help_str(10_000) == cli.COMMANDS[name].summary, name
    root = typer.main.get_command(cli.make_app())
    assert root.list_commands(None) == list(cli.COMMANDS)  # type: ignore[attr-defined]


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
