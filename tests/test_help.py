"""Every command's ``--help`` reads like a command line: no Python type names (issue 13)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from kictl.cli import every_command
from tests.conftest import RunCli

#: What typer prints for an annotation: ``<bool>``, ``<list[Path]>``, ``<str>``, ``<int>``, ``<path>``...
PYTHON_TYPE = re.compile(r"<(bool|str|int|float|path|Path|list\[[^>]*\]|tuple[^>]*|[a-z]+\|[a-z|]+)>")


def _command_paths() -> Iterator[tuple[str, ...]]:
    root = every_command()

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


def test_usage_lines_name_arguments_without_braces(cli: RunCli) -> None:
    offenders = {}
    for path in _command_paths():
        usage = cli(*path, "--help").stdout.splitlines()[0]
        if "{" in usage or "}" in usage:
            offenders[" ".join(path)] = usage
    assert not offenders, offenders
    assert cli("leaderboard", "--help").stdout.startswith("Usage: kictl leaderboard [OPTIONS] DEFINITION\n")


def test_help_is_plain_text_and_points_at_the_docs(cli: RunCli) -> None:
    text = cli("--help").stdout
    assert "╭" not in text
    assert "│" not in text
    assert "docs/" in text
    assert "docs/leaderboards.md" in cli("leaderboard", "--help").stdout


# the fast conversion of a parameter's value agrees with typer's own (pydantic) conversion
_VALUES: dict[object, list[object]] = {
    str: ["", "abc", "-1", "é", "12"],
    int: ["0", "7", "-3", "0012", "+4", " 5", "1_0", "x", "1.5", ""],
    float: ["0", "1.5", "-2.25", "1e3", "inf", "nan", "x", ".5", ""],
    Path: ["a/b", "-", ".", "/nonexistent/x"],
    bool: [True, False],
}


def _outcome(runtime: object, value: object) -> object:
    import typer._click as click
    from typer.core import TyperCommand

    ctx = click.Context(TyperCommand("probe"))
    try:
        result = runtime._coerce_value(value, param=None, ctx=ctx)  # type: ignore[attr-defined]
    except click.exceptions.BadParameter as exc:
        return ("error", exc.message)
    return (type(result), repr(result))  # repr: nan equals nan


def test_the_fast_conversion_agrees_with_typers() -> None:
    from pathlib import Path as _Path

    from typer._coercion import build_runtime_param, resolve_type_descriptor
    from typer.models import OptionInfo

    from kictl.cli._help import fast_runtime_param

    checked = 0
    for element, values in _VALUES.items():
        for annotation in (element, list[element]) if element is not bool else (element,):  # type: ignore[valid-type]
            descriptor = resolve_type_descriptor(annotation, OptionInfo())
            fast = fast_runtime_param(descriptor)
            assert fast is not None, annotation
            typers = build_runtime_param(descriptor)
            for value in values:
                given = [value] if annotation is not element else value
                assert _outcome(fast, given) == _outcome(typers, given), (annotation, value)
                checked += 1
    assert checked > 40
    # bounds, parsers and other types are left to typer
    assert fast_runtime_param(resolve_type_descriptor(int, OptionInfo(min=1))) is None
    assert fast_runtime_param(resolve_type_descriptor(_Path, OptionInfo(path_type=str))) is None


def test_a_bad_number_reads_as_typer_words_it(cli: RunCli) -> None:
    result = cli("bench", "x", "--warmup", "many")
    assert result.exit_code == 2
    assert "Invalid value for '--warmup'" in result.output
    assert "valid integer" in result.output


def test_every_command_has_a_docs_page_that_exists(cli: RunCli) -> None:
    from kictl.cli import COMMANDS

    repo = Path(__file__).resolve().parents[1]
    assert all((repo / entry.page).is_file() for entry in COMMANDS.values())
    for name, entry in COMMANDS.items():
        assert f"Docs: {entry.page} in the kictl repository." in cli(name, "--help").output, name
