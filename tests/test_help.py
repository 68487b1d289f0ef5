"""Every command's ``--help`` reads like a command line: no Python type names (issue 13)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import typer.main

from kictl.cli import make_app
from tests.conftest import RunCli

#: What typer prints for an annotation: ``<bool>``, ``<list[Path]>``, ``<str>``, ``<int>``, ``<path>``...
PYTHON_TYPE = re.compile(r"<(bool|str|int|float|path|Path|list\[[^>]*\]|tuple[^>]*|[a-z]+\|[a-z|]+)>")


def _command_paths() -> Iterator[tuple[str, ...]]:
    root = typer.main.get_command(make_app())

    def walk(command: object, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        yield path
        for name, child in sorted(getattr(command, "commands", {}).items()):
            yield from walk(child, (*path, name))

    yield from walk(root, ())


def test_every_command_is_walked() -> None:
    paths = list(_command_paths())
    assert ("leaderboard",) in paths
    assert ("trust", "pin") in paths
    assert ("bench",) in paths
    assert len(paths) > 25


def test_no_help_shows_a_python_type(cli: RunCli) -> None:
    offenders: dict[str, list[str]] = {}
    for path in _command_paths():
        result = cli(*path, "--help")
        assert result.exit_code == 0, (path, result.output)
        found = PYTHON_TYPE.findall(result.stdout)
        if found:
            offenders[" ".join(path) or "kictl"] = sorted(set(found))
    assert not offenders, offenders


def test_options_keep_a_readable_metavar(cli: RunCli) -> None:
    text = cli("bench", "--help").stdout
    assert re.search(r"--warmup\s+INTEGER", text)
    assert re.search(r"--shard\s+i/N", text)  # a metavar the command sets itself is kept
    assert re.search(r"--registry\s+PATH", cli("leaderboard", "--help").stdout)
    assert re.search(r"--json\s+Print JSON", cli("leaderboard", "--help").stdout)  # a flag takes no value
