"""The boundaries issue 44 draws, read statically (ast) from every ``kictl/**/*.py``, nothing imported:

- No module outside ``kictl/standing/`` and ``kictl/trust/`` computes a run's standing: none imports or calls
  the low-level evidence helpers, and each question ``kictl.standing`` answers is defined once, there.
- No module imports a private (``_``-prefixed) name of another package: a package's private names, and its
  private modules, are its own.  Modules of one top-level package (``kictl.bench.judge`` and
  ``kictl.bench.wire``) may share them; a top-level module (``kictl/canon.py``) is a package of its own.

Each rule is also run on a planted tree, so that a rule that could never fail would be found out.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: What only ``kictl.standing`` (and ``kictl.trust``, which holds the rules) may call: judging a record's
#: envelopes, counting a verifier's rerun, reading the signing times, holding a level to ``reported``.
LOW_LEVEL = frozenset(
    {
        "judge_attestations",
        "evidence_level",
        "rerun_agrees",
        "envelope_files",
        "read_envelopes",
        "signing_times",
        "cap_evidence",
    }
)
#: The modules those helpers live in.
LOW_LEVEL_HOMES = ("kictl.trust", "kictl.derived")
#: Where a standing may be computed.
ALLOWED = ("kictl.standing", "kictl.trust")
#: The questions ``kictl.standing`` answers (and the names the six old places used): each defined once, in it.
QUESTIONS = frozenset(
    {
        "trust_summaries",
        "evidence_levels",
        "ranking_trust",
        "retracted_digests",
        "verifier_rerun_runs",
        "verifier_reruns",
        "verifier_rerun_run",
        "named_reruns",
        "held_out_verdicts",
        "generalizing",
        "with_held_out",
        "record_marks",
        "affected_runs",
        "cap_levels",
        "intact_subject",
        "claims_rerun",
        "claims_held_out",
        "board_runs",
        "standings",
    }
)


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    tree: ast.Module

    @property
    def package(self) -> str:
        """The package relative imports resolve against."""
        return self.name if self.path.name == "__init__.py" else self.name.rpartition(".")[0]

    @property
    def top(self) -> str:
        """``kictl.<first part>``: the room a module belongs to."""
        return ".".join(self.name.split(".")[:2])


@functools.cache
def modules(root: Path) -> tuple[Module, ...]:
    found = []
    for path in sorted((root / "kictl").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.append(Module(".".join(parts), path, ast.parse(path.read_text(encoding="utf-8"))))
    return tuple(found)


def imported(module: Module) -> list[tuple[int, str, str]]:
    """``(line, module imported from, name)`` of every ``from … import name`` and ``import a.b`` (name ``""``),
    at any depth (function-local imports count), with relative imports resolved."""
    found: list[tuple[int, str, str]] = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, "") for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.extend((node.lineno, base, alias.name) for alias in node.names)
    return found


def _inside(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == package or name.startswith(package + ".") for package in packages)


def standing_computed_outside(root: Path) -> list[str]:
    """Where a module outside ``ALLOWED`` imports, or calls as an attribute, a low-level evidence helper."""
    found = []
    for module in modules(root):
        if _inside(module.name, ALLOWED):
            continue
        where = module.path.relative_to(root)
        for line, source, name in imported(module):
            if name in LOW_LEVEL and _inside(source, LOW_LEVEL_HOMES):
                found.append(f"{where}:{line}: imports {source}.{name}")
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Attribute) and node.attr in LOW_LEVEL:
                found.append(f"{where}:{node.lineno}: calls .{node.attr}")
    return found


def questions_defined_outside(root: Path) -> list[str]:
    """Functions or classes named after a standing question but defined outside ``kictl/standing/``."""
    found = []
    for module in modules(root):
        if _inside(module.name, ("kictl.standing",)):
            continue
        for node in ast.walk(module.tree):
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and node.name.lstrip("_") in QUESTIONS
            ):
                found.append(f"{module.path.relative_to(root)}:{node.lineno}: defines {node.name}")
    return found


def private_imports_across_packages(root: Path) -> list[str]:
    """Imports of a ``_``-prefixed name (or of anything through a ``_``-prefixed module) of another package."""
    found = []
    for module in modules(root):
        for line, source, name in imported(module):
            if not _inside(source, ("kictl",)):
                continue
            parts = [*source.split("."), *([name] if name else [])]
            private = [i for i, part in enumerate(parts) if part.startswith("_") and not part.startswith("__")]
            if not private:
                continue
            owner = ".".join(parts[:2])  # the top-level package (or module) whose private name it is
            if module.top != owner:
                found.append(f"{module.path.relative_to(root)}:{line}: {module.name} imports {'.'.join(parts)}")
    return found


def test_no_module_outside_standing_and_trust_computes_a_standing() -> None:
    found = standing_computed_outside(ROOT)
    assert not found, "ask kictl.standing instead:\n" + "\n".join(found)


def test_each_standing_question_is_defined_once_in_standing() -> None:
    found = questions_defined_outside(ROOT)
    assert not found, "a second implementation of a standing question:\n" + "\n".join(found)
    defined = {
        node.name
        for module in modules(ROOT)
        if _inside(module.name, ("kictl.standing",))
        for node in ast.walk(module.tree)
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
    }
    assert QUESTIONS <= defined  # the list names what standing really answers


def test_no_private_name_is_imported_from_another_package() -> None:
    found = private_imports_across_packages(ROOT)
    assert not found, "private names imported across packages:\n" + "\n".join(found)


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    modules.cache_clear()
    for relative, text in {"kictl/__init__.py": "", **files}.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        for folder in path.relative_to(tmp_path).parents:
            init = tmp_path / folder / "__init__.py"
            if folder != Path(".") and not init.exists():
                init.write_text("")
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("from kictl.trust import judge_attestations\n", "imports kictl.trust.judge_attestations"),
        ("from kictl.trust.evidence import signing_times\n", "imports kictl.trust.evidence.signing_times"),
        ("def f():\n    from kictl.derived import cap_evidence\n", "imports kictl.derived.cap_evidence"),
        ("from kictl import trust\n\ndef f(r):\n    return trust.judge_attestations(r)\n", "calls .judge_attestations"),
    ],
)
def test_a_planted_standing_outside_is_found(tmp_path: Path, text: str, expected: str) -> None:
    root = _plant(tmp_path, {"kictl/site/page.py": text, "kictl/standing/ok.py": text, "kictl/trust/ok.py": text})
    try:
        found = standing_computed_outside(root)
    finally:
        modules.cache_clear()
    assert found
    assert all(item.startswith("kictl/site/page.py:") for item in found)
    assert any(expected in item for item in found)


def test_a_planted_second_rule_is_found(tmp_path: Path) -> None:
    text = "def verifier_rerun_runs(registry):\n    return set()\n"
    root = _plant(tmp_path, {"kictl/rank/mine.py": text, "kictl/standing/attestations.py": text})
    try:
        found = questions_defined_outside(root)
    finally:
        modules.cache_clear()
    assert found == ["kictl/rank/mine.py:1: defines verifier_rerun_runs"]


@pytest.mark.parametrize(
    ("importer", "text", "flagged"),
    [
        ("kictl/advisories/published.py", "from kictl.trust.root import _now\n", True),
        ("kictl/advisories/published.py", "from kictl.trust._common import short_keyid\n", True),
        ("kictl/exporters/x.py", "from kictl.rank import _common\n", True),
        ("kictl/site/x.py", "import kictl.index._common\n", True),
        ("kictl/site/x.py", "def f():\n    from ..trust.attestations import _signer_of\n", True),
        ("kictl/trust/x.py", "from kictl.trust.root import _now\n", False),
        ("kictl/trust/x.py", "from ._common import _short\n", False),
        ("kictl/bench/judge/x.py", "from kictl.bench.wire.values import _rolled\n", False),
        ("kictl/advisories/published.py", "from kictl.trust import short_keyid\n", False),
        ("kictl/x.py", "from kictl import __version__\n", False),
    ],
)
def test_a_planted_private_import_is_found(tmp_path: Path, importer: str, text: str, flagged: bool) -> None:
    root = _plant(tmp_path, {importer: text})
    try:
        found = private_imports_across_packages(root)
    finally:
        modules.cache_clear()
    assert bool(found) == flagged, found
