"""The docs' commands run as shown (issue 13).

Every ``$ kictl ...`` line of a ``console`` block in README.md and docs/*.md
is extracted.  Those that can run on a CPU, offline, against the bundled
registry are run against a copy of it (in-process, from the repository root,
so that paths like ``tests/assets/...`` and ``implementations/...`` resolve)
and must give the exit status and the first line of output the doc shows.
The others are skipped for a reason that ``SKIP_RULES`` names; a command no
rule matches is run, so a new example is checked by default.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, RunCli

DOCS = [REPO_ROOT / "README.md", REPO_ROOT / "CONTRIBUTING.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Example:
    """One command of a doc and what the doc shows after it."""

    doc: str
    line: int
    command: str
    shown: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.doc}:{self.line}: {self.command}"


def examples() -> Iterator[Example]:
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        in_console = False
        number = 0
        while number < len(lines):
            text = lines[number]
            if text.startswith("```"):
                in_console = not in_console and text.strip() == "```console"
                number += 1
                continue
            if not (in_console and text.startswith("$ ")):
                number += 1
                continue
            start = number
            command = text[2:]
            while command.endswith("\\") and number + 1 < len(lines):
                number += 1
                command = command[:-1].rstrip() + " " + lines[number].strip()
            shown = []
            number += 1
            while number < len(lines) and not lines[number].startswith(("$ ", "```")):
                shown.append(lines[number])
                number += 1
            yield Example(path.name, start + 1, command, tuple(shown))


#: Why a command is not run here: (pattern searched in "DOC: COMMAND", reason). The first match wins.
SKIP_RULES: tuple[tuple[str, str], ...] = (
    (r": (?!kictl )", "a shell step of a walk-through (git, cat, pip, echo, ...), not a kictl command"),
    (r"&&|\||;", "a shell pipeline of several commands"),
    (r"shared/data", "needs the FlashInfer Trace datasets under ../shared/data, which CI does not have"),
    (r": kictl (bench|rerun)\b(?!.*--device cpu)", "needs a GPU (a CUDA device or the H200 the doc ran on)"),
    (r": kictl site serve", "serves until interrupted"),
    (
        r"--key|: kictl (keygen|sign|attest|submit)\b|: kictl trust (init|add-key|revoke|sign-policy|pin)\b",
        "signs with the walk-through's private keys and trust root, made step by step in that doc "
        "(tests/trust and tests/submit run the same flows with real keys)",
    ),
    (
        r": kictl (init|add)\b|--registry (?!\.$)|\.\./",
        "acts on the walk-through's own scratch registry or files, made by the doc's earlier steps",
    ),
    (r"HEAD~", "its output is the registry's latest commits, which every merge changes"),
    (r": kictl trust show", "shows the walk-through's trust root, after its keys were added"),
    (
        r"5d56b8c9d161|run-v1-1204000|torch_rmsnorm_1c6d2a\.b64|torch_matmul-m128-h200|2482b05a558a|gemm_n_4096_k_4096"
        r"|0123456789abcdef|d083697c|2962841a8c0a",
        "names a record of the walk-through's registry, not of the bundled one",
    ),
    (r": kictl review\b", "reviews the walk-through's PR branches (tests/review reviews real PR branches)"),
    (
        r"^submitting\.md: kictl (definitions compile|validate)",
        "shows the walk-through's scratch registry, which submitting.md builds from kictl init",
    ),
    (r": kictl site build", "writes the whole site (tests/site builds it)"),
    (r"^bench\.md: kictl bench", "minutes of CPU benchmarks with cheats; tests/bench runs the same cheats"),
    (r": kictl selftest\b", "runs the exploit corpus (minutes); tests/bench/test_cheats.py runs its CPU session"),
    (
        r"^advisories\.md: kictl (advisory|leaderboard)\b",
        "shows the walk-through's registry with a signed advisory (tests/advisories runs the flow with real keys)",
    ),
)


def skip_reason(example: Example) -> str | None:
    subject = f"{example.doc}: {example.command}"
    for pattern, reason in SKIP_RULES:
        if re.search(pattern, subject):
            return reason
    return None


ALL = list(examples())
RUN = [example for example in ALL if skip_reason(example) is None]
CPU_BENCH = [example for example in RUN if example.command.startswith("kictl bench")]
FAST = [example for example in RUN if example not in CPU_BENCH]


def test_examples_are_found_and_most_read_commands_run() -> None:
    assert len(ALL) > 60
    docs = {example.doc for example in FAST}
    assert {"README.md", "leaderboards.md"} <= docs
    assert len(FAST) >= 15, [example.label for example in FAST]


@pytest.fixture(scope="module")
def bundled_registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the bundled registry in git, as a checkout of this repository has it."""
    import subprocess

    target = tmp_path_factory.mktemp("docs") / "bundled"
    for folder in ("registry", "definitions"):
        shutil.copytree(REPO_ROOT / folder, target / folder, ignore=shutil.ignore_patterns(".kictl"))
    env = {"GIT_AUTHOR_NAME": "Docs", "GIT_AUTHOR_EMAIL": "docs@example.org"}
    env |= {"GIT_COMMITTER_NAME": "Docs", "GIT_COMMITTER_EMAIL": "docs@example.org", "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "the bundled registry"]):
        subprocess.run(["git", "-C", str(target), *args], check=True, env=env)
    return target


def _check(example: Example, cli: RunCli, registry: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KICTL_REGISTRY", str(registry))
    monkeypatch.chdir(REPO_ROOT)
    result = cli(*shlex.split(example.command, comments=True)[1:])
    shown = [line for line in example.shown if line.strip()]
    output = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    if shown and shown[0].startswith("error:"):
        assert result.exit_code not in (0, 1), (example.label, result.output)
        assert output[:1] == shown[:1], example.label
        return
    # a diff says "different" with exit 1, as the doc shows it
    allowed = (0, 1) if example.command.startswith(("kictl diff", "kictl verify")) else (0,)
    assert result.exit_code in allowed, (example.label, result.output)
    # the first line the doc shows that holds no path of the machine it ran on (stdout and stderr
    # interleave on a terminal, so it is looked for among the first lines of each)
    expected = next((line for line in shown if not _MACHINE_PATH.search(line)), None)
    if expected is not None and expected not in ("…", "..."):
        firsts = {_first(result.stdout), _first(result.stderr)}
        assert expected.rstrip() in firsts, (example.label, firsts)


_MACHINE_PATH = re.compile(r"(^|\s)/(tmp|home|work|root)/")


def _first(text: str) -> str:
    lines = [line.rstrip() for line in text.splitlines() if line.strip() and not line.startswith("indexed ")]
    lines = [line for line in lines if not _MACHINE_PATH.search(line)]
    return lines[0] if lines else ""


@pytest.mark.parametrize("example", FAST, ids=[example.label for example in FAST])
def test_a_read_command_runs_as_shown(
    example: Example, cli: RunCli, bundled_registry: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _check(example, cli, bundled_registry, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("example", CPU_BENCH, ids=[example.label for example in CPU_BENCH])
def test_a_cpu_bench_runs_as_shown(
    example: Example, cli: RunCli, tmp_path: Path, bundled_registry: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = tmp_path / "bundled"
    shutil.copytree(bundled_registry, registry, symlinks=True)
    _check(example, cli, registry, monkeypatch)


def test_every_skip_rule_is_used() -> None:
    """A rule that matches no command any more is dead text: remove it."""
    used = {pattern for pattern, _ in SKIP_RULES for e in ALL if re.search(pattern, f"{e.doc}: {e.command}")}
    assert used == {pattern for pattern, _ in SKIP_RULES}


def _usage_blocks() -> Iterator[tuple[str, tuple[str, ...], str]]:
    """(doc, command path, usage text) for each synopsis in a plain ``` block: ``kictl bench DEFINITION ...``."""
    for path in DOCS:
        in_block = in_plain = False
        current: list[str] = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("```"):
                in_block = not in_block
                in_plain = in_block and line.strip() == "```"
                continue
            if not in_plain:
                continue
            if line.startswith("kictl "):
                words = []
                for word in line.split()[1:]:
                    if not re.fullmatch(r"[a-z][a-z-]*", word):
                        break
                    words.append(word)
                current = [line]
                yield path.name, tuple(words), line
            elif line.startswith(" ") and current:
                yield path.name, (), line  # a continuation of the synopsis above


def test_every_usage_synopsis_lists_every_option_of_its_command() -> None:
    """docs' `kictl CMD [--opt ...]` synopses name every option the command has (issue 30: none went missing)."""
    import typer.main

    from kictl.cli import make_app

    root = typer.main.get_command(make_app())
    synopses: dict[tuple[str, tuple[str, ...]], str] = {}
    last: tuple[str, tuple[str, ...]] | None = None
    for doc, words, line in _usage_blocks():
        if words:
            command: object = root
            used: list[str] = []
            for word in words:
                child = getattr(command, "commands", {}).get(word)
                if child is None:
                    break
                command, used = child, [*used, word]
            last = (doc, tuple(used)) if used else None
            if last is not None:
                synopses[last] = synopses.get(last, "") + " " + line
        elif last is not None:
            synopses[last] += " " + line
    assert ("bench.md", ("bench",)) in synopses
    missing = {}
    for (doc, path), text in synopses.items():
        node: Any = root
        for word in path:
            node = node.commands[word]
        options = {opt for param in node.params for opt in getattr(param, "opts", []) if opt.startswith("--")}
        absent = sorted(opt for opt in options - {"--help"} if not re.search(re.escape(opt) + r"\b", text))
        if absent:
            missing[f"{doc}: kictl {' '.join(path)}"] = absent
    assert not missing, missing
