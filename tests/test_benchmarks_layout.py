"""benchmarks/ holds what backs a claim: each script says its claim, machine and command, and README.md lists it.

Read as text (ast for the docstrings); nothing here runs a benchmark.
"""

from __future__ import annotations

import ast
import re

from tests.conftest import REPO_ROOT

BENCHMARKS = REPO_ROOT / "benchmarks"


def test_every_file_in_benchmarks_is_listed_in_its_readme() -> None:
    listing = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    # `script.py` or `script.py PART` (a script of two claims), or a linked (FILE.md)
    named = set(re.findall(r"`([\w.-]+\.(?:py|sh|md))[` ]|\(([\w.-]+\.md)\)", listing))
    mentioned = {name for pair in named for name in pair if name}
    files = {path.name for path in BENCHMARKS.iterdir() if path.is_file() and path.name != "README.md"}
    assert files - mentioned == set(), "benchmarks/README.md does not list these"


def test_every_script_says_its_claim_machine_and_command() -> None:
    results = (BENCHMARKS / "RESULTS.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^## (.+)$", results, flags=re.M))
    for path in sorted(BENCHMARKS.glob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        text = " ".join(docstring.split())
        assert re.search(r"Claim \(.*RESULTS\.md \"[^\"]+\"\): .+\. Machine and command: ", text), path.name
        cited = re.findall(r'RESULTS\.md "([^"]+)"', text)
        assert cited
        for name in cited:  # a script of two claims cites both sections
            assert any(section.startswith(name) for section in sections), (path.name, name)


def test_every_script_the_readme_table_names_exists() -> None:
    rows = [
        line for line in (BENCHMARKS / "README.md").read_text(encoding="utf-8").splitlines() if line.startswith("|")
    ]
    named = {name for row in rows for name in re.findall(r"`([\w.-]+\.(?:py|sh))[` ]", row)}
    assert named, "the claims table names no script"
    assert {name for name in named if not (BENCHMARKS / name).is_file()} == set()
