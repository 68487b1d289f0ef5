"""The docs' commands run as shown (issues 13 and 45): the docs cannot drift.

Every ``$ kictl ...`` line of a ``console`` block in README.md, CONTRIBUTING.md
and docs/*.md is extracted.  Those that can run on a CPU, offline, against the
bundled registry are run against a copy of it (in-process, from the repository
root, so that paths like ``tests/assets/...`` and ``implementations/...``
resolve) and must give the exit status and the whole output the doc shows, once
dates, commits, the machine's paths, root versions and (for a bench) the
measured figures are normalised (``compare_output``); a doc line ``…`` leaves
lines out.  The others are illustrations, each for a reason that ``SKIP_RULES``
names; a command no rule matches is run, so a new example is checked by
default.  Every command, run or illustration, must name a command the app has
and only options it takes.  A failure names the block's file:line.
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
        r"5d56b8c9d161|run-v1-1204000|torch_rmsnorm_60ddca37017af6a6\.b64|torch_matmul-m128-h200|2482b05a558a|gemm_n_4096_k_4096"
        r"|0123456789abcdef|d083697c|2962841a8c0a",
        "names a record of the walk-through's registry, not of the bundled one",
    ),
    (r": kictl review\b", "reviews the walk-through's PR branches (tests/review reviews real PR branches)"),
    (
        r": kictl history\b",
        "its output is the registry's git history (who added each record, when), not a one-commit copy's",
    ),
    (r"^rerun\.md: kictl leaderboard", "shows the walk-through's CPU reruns, which the bundled registry does not hold"),
    (r"^trust\.md: kictl trust verify", "shows the walk-through's trust root, after its keys were added"),
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
    """A copy of the bundled registry in git, as a checkout of this repository has it: with its history.

    A retired key's signatures are dated by the main-line commit that brought each envelope in
    (docs/trust.md), so a one-commit copy would date every bundled attestation at the copy, after the
    re-anchor retired the keys that signed them.  The copy is a clone (registry/ and definitions/
    only) with the working tree's changes to those folders committed on top.
    """
    import subprocess

    env = {"GIT_AUTHOR_NAME": "Docs", "GIT_AUTHOR_EMAIL": "docs@example.org"}
    env |= {"GIT_COMMITTER_NAME": "Docs", "GIT_COMMITTER_EMAIL": "docs@example.org", "PATH": "/usr/bin:/bin"}

    def git(*args: str, cwd: Path = REPO_ROOT) -> str:
        done = subprocess.run(["git", "-C", str(cwd), *args], check=True, env=env, capture_output=True, text=True)
        return done.stdout.strip()

    assert git("rev-parse", "--is-shallow-repository") == "false", (
        "the docs' examples need this repository's history (signing times): `git fetch --unshallow`"
    )
    target = tmp_path_factory.mktemp("docs") / "bundled"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(REPO_ROOT), str(target)], check=True, env=env)
    git("sparse-checkout", "set", "--no-cone", "/registry/", "/definitions/", cwd=target)
    git("checkout", "-q", cwd=target)
    for folder in ("registry", "definitions"):
        shutil.rmtree(target / folder)
        shutil.copytree(REPO_ROOT / folder, target / folder, ignore=shutil.ignore_patterns(".kictl"))
    git("add", "-A", cwd=target)
    if git("status", "--porcelain", cwd=target):
        git("commit", "-q", "-m", "the working tree's changes", cwd=target)
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
    # the whole output as the doc shows it, stdout then stderr (a terminal interleaves them; the doc lists
    # stdout's lines first), once dates, digests, times and the machine's paths are normalised
    measured = example.command.startswith(("kictl bench", "kictl rerun"))
    problem = compare_output(example.shown, result.stdout, result.stderr, measured=measured)
    assert problem is None, f"{example.doc}:{example.line}: `{example.command}` prints other text: {problem}"


#: What differs from one run, machine or merge to the next, replaced before a doc's text and the output meet.
_NORMALISE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(^|\s)/(tmp|home|work|root|srv)/\S*"), r"\1<path>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?"), "<date>"),
    (re.compile(r"\b\d+(\.\d+)? ?s\b(?! ago)"), "<seconds>"),
    (re.compile(r"\b(commit|at) [0-9a-f]{7,40}\b"), r"\1 <commit>"),
    (re.compile(r"\(([0-9a-f]{12})\)"), "(<commit>)"),
    (re.compile(r"\broot (version )?\d+\b|\bversion \d+ of the trust root|v\d+\.root\.json"), "<root version>"),
    (re.compile(r"\bkeyid [0-9a-f]{8,64}\b"), "keyid <keyid>"),
    (re.compile(r"\b\d+ version\(s\)"), "<n> version(s)"),
    (re.compile(r"sha256:[0-9a-f]{8,63}…"), "sha256:<cut digest>…"),
    (re.compile(r"accessed \S+"), "accessed <date>"),
)


#: A measurement that differs from run to run (a bench on the CPU): a latency as kictl writes it, three
#: significant digits (``5.67 ms``, ``25.4 ms``, ``812 ns``; ``153.1 µs`` is the old format and stays itself), a ratio.
_MEASURED: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?<![\w.])(\d\.\d\d|\d\d\.\d|[1-9]\d\d|\d) (ns|µs|ms|s)\b"), "<latency>"),
    (re.compile(r"(?<![\w.])\d+\.\d\dx"), "<ratio>x"),
    (re.compile(r"(?<![\w.<])\d[\d.,]*(e[-+]?\d+)?(?![\w.>])"), "<n>"),
)


def normalise(line: str, *, measured: bool = False) -> str:
    """``line`` with what varies replaced (``_NORMALISE``; ``_MEASURED`` too for a measurement), column
    padding and rules folded (a column's width follows its widest cell)."""
    text = line.rstrip()
    for pattern, replacement in (*_NORMALISE, *(_MEASURED if measured else ())):
        text = pattern.sub(replacement, text)
    return re.sub(r"-{2,}", "--", re.sub(r"(?<=\S) {2,}", "  ", text))


def _matches(shown: str, actual: str) -> bool:
    """A shown line equals the output's, or is its start where the doc cut it with a trailing ``…``."""
    if shown.endswith(("…", "...")) and len(shown.rstrip("….")) > 0:
        return actual.startswith(shown.rstrip("…").removesuffix("...").rstrip())
    return shown == actual


#: Lines a doc leaves out: the index's one-off build, progress lines (``t=12.3s ...``, a live line on a terminal).
_UNSHOWN = re.compile(r"indexed |t=\d+(\.\d+)?s ")


def compare_output(shown: tuple[str, ...], stdout: str, stderr: str, *, measured: bool = False) -> str | None:
    """``None`` when the doc's lines are the output's; else the first line that differs and what came instead.

    The doc's lines are stdout's and stderr's merged in any order (a terminal interleaves them), each
    stream's lines in order.  A line ``…`` (or ``...``) on its own stands for any number of lines the
    doc leaves out; every other line must be there.  ``_UNSHOWN`` lines are not compared.
    """

    def lines(text: str) -> list[str]:
        kept = [line for line in text.splitlines() if line.strip() and not _UNSHOWN.match(line)]
        return [normalise(line, measured=measured) for line in kept]

    want = [normalise(line, measured=measured) for line in shown if line.strip()]
    if not want:
        return None  # a step of a walk-through whose output the doc does not show: its exit status is checked
    streams = [lines(stdout), lines(stderr)]
    at = [0, 0]
    skipping = False
    for line in want:
        if line.strip() in ("…", "..."):
            skipping = True
            continue
        found = None
        for number, stream in enumerate(streams):
            position = at[number]
            while skipping and position < len(stream) and not _matches(line, stream[position]):
                position += 1
            if position < len(stream) and _matches(line, stream[position]):
                found = (number, position)
                break
        if found is None:
            nexts = [stream[at[n]] for n, stream in enumerate(streams) if at[n] < len(stream)]
            printed = f"the command printed {' / '.join(repr(text) for text in nexts)}" if nexts else "the output ended"
            return f"the doc shows {line!r}; {printed}"
        at[found[0]] = found[1] + 1
        skipping = False
    left = [stream[at[n]] for n, stream in enumerate(streams) if at[n] < len(stream)]
    if left and not skipping:
        return f"the command printed more: {left[0]!r} (end the block with a line `…` to leave the rest out)"
    return None


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
    from kictl.cli import every_command

    root = every_command()
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


def _command_problems(command: str, root: Any) -> list[str]:
    """What in ``kictl ...`` the app does not have: an unknown command or an option its command lacks."""
    try:
        words = shlex.split(command, comments=True)[1:]
    except ValueError as exc:
        return [f"cannot be split as a shell line: {exc}"]
    root_options = {opt for param in root.params for opt in getattr(param, "opts", [])}
    node: Any = root
    path: list[str] = []
    while words and words[0].startswith("-") and words[0] in root_options:
        words = words[1:]
    while words and hasattr(node, "commands"):
        child = node.commands.get(words[0])
        if child is None:
            return [f"`kictl {' '.join([*path, words[0]])}` is no command"]
        node, path, words = child, [*path, words[0]], words[1:]
    if hasattr(node, "commands"):
        return [f"`kictl {' '.join(path)}` needs a subcommand"]
    options = {
        opt for param in node.params for opt in (*getattr(param, "opts", []), *getattr(param, "secondary_opts", []))
    }
    options |= {"--help"}
    unknown = [
        word.split("=", 1)[0] for word in words if word.startswith("--") and word.split("=", 1)[0] not in options
    ]
    return [f"`kictl {' '.join(path)}` has no option {option}" for option in unknown]


def test_every_documented_command_exists_with_its_flags() -> None:
    """Every ``$ kictl ...`` line, run here or shown as an illustration (``SKIP_RULES`` says why), names a command
    the app has and only options that command takes: a renamed command or flag fails with the doc's file:line."""
    from kictl.cli import every_command

    root = every_command()
    problems, checked = [], 0
    for example in ALL:
        for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", example.command):
            if part.startswith("kictl "):
                checked += 1
                problems += [f"{example.doc}:{example.line}: {problem}" for problem in _command_problems(part, root)]
    assert not problems, "\n".join(problems)
    assert checked > 100
    assert _command_problems("kictl leaderboard x --workload y --metrics energy", root) == [
        "`kictl leaderboard` has no option --metrics"
    ]
    assert _command_problems("kictl trust frobnicate", root) == ["`kictl trust frobnicate` is no command"]
    assert _command_problems("kictl trust", root) == ["`kictl trust` needs a subcommand"]
    assert _command_problems("kictl --verbose frobnicate x", root) == ["`kictl frobnicate` is no command"]


def test_a_changed_output_fails_and_only_what_varies_is_normalised() -> None:
    shown = ("board", "evidence  unsigned or better", "…", "left out: 8 not their best")
    printed = "board\nevidence  disputed or better\nrow 1\nrow 2\nleft out: 8 not their best\n"
    assert compare_output(shown, printed, "") == (
        "the doc shows 'evidence  unsigned or better'; the command printed 'evidence  disputed or better'"
    )
    fixed = ("board", "evidence  disputed or better", "…", "left out: 8 not their best")
    assert compare_output(fixed, printed, "") is None
    assert compare_output(fixed[:2], printed, "") is not None  # more printed than shown, and no `…`
    # stderr's lines may sit anywhere among stdout's; dates, commits and the machine's paths do not count
    assert (
        compare_output(
            ("8 records added to /tmp/demo/reg", "b7  passed"), "b7  passed\n", "8 records added to /srv/x\n"
        )
        is None
    )
    assert (
        compare_output(("added 2026-11-30 in commit 8823dda45aad",), "added 2026-12-06 in commit d81c9dc25beb", "")
        is None
    )
    # a measurement: its value may change, its format may not (three significant digits)
    assert compare_output(("b7  passed  5.67 ms  1.00x",), "b7  passed  931 µs  0.16x", "", measured=True) is None
    assert compare_output(("b7  passed  153.1 µs  1.00x",), "b7  passed  931 µs  0.16x", "", measured=True) is not None
