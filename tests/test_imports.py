"""No import circles inside kictl: a static read (ast) of every ``kictl/**/*.py``, nothing imported.

Two graphs, one edge per ``import``/``from … import`` naming a kictl module:

- module-level imports (the module's own body, including ``if TYPE_CHECKING:``
  and ``try:`` blocks, not function bodies): what loads when the module loads,
  and what a reader follows to understand it.  No cycle at all.
- every import, function-local ones too: a function-local import that closes a
  circle only hides it.  The one shape allowed is a package whose ``__init__``
  loads its own submodules on first use while they import the package (the
  registry of ``kictl.families``): every member of such a cycle is the package
  or a module directly in it.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Cycles another issue is breaking; none now (the trust root and its anchor were one until trust/reanchor.py).
KNOWN: set[frozenset[str]] = set()


@functools.cache
def parsed_modules(root: Path) -> dict[str, tuple[Path, ast.Module]]:
    """Dotted name -> (file, its syntax tree), for every module under ``root/kictl`` (parsed once per root)."""
    names = {}
    for path in sorted((root / "kictl").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = (path, ast.parse(path.read_text(encoding="utf-8")))
    return names


def _imports(body: list[ast.stmt], deferred: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if deferred:
                yield from _imports(node.body, deferred)
        else:
            for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                inner = getattr(node, name, None)
                if isinstance(inner, list):
                    yield from _imports([item for item in inner if isinstance(item, ast.stmt)], deferred)
                    for item in inner:
                        if isinstance(item, ast.ExceptHandler | ast.match_case):
                            yield from _imports(item.body, deferred)


def import_graph(root: Path, *, deferred: bool) -> dict[str, set[str]]:
    """Module -> the kictl modules it imports (``deferred``: function-local imports count too)."""
    modules = parsed_modules(root)

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, (path, tree) in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str | None] = set()
        for node in _imports(tree.body, deferred):
            if isinstance(node, ast.Import):
                found.update(known(alias.name) for alias in node.names if alias.name.split(".")[0] == "kictl")
                continue
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            if base.split(".")[0] != "kictl":
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in modules else known(base))
        graph[name] = {item for item in found if item is not None and item != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.get(step, ())))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def is_package_registry(component: frozenset[str], graph: dict[str, set[str]]) -> bool:
    """A package and modules directly in it, the package's edges to them deferred (absent at module level)."""
    packages = [name for name in component if all(other.rpartition(".")[0] == name for other in component - {name})]
    return len(packages) == 1 and not (graph[packages[0]] & component)


def test_no_module_level_import_cycle() -> None:
    found = set(cycles(import_graph(ROOT, deferred=False))) - KNOWN
    assert not found, f"import cycles at module level: {[sorted(c) for c in found]}"


def test_no_cycle_hidden_in_a_function() -> None:
    top = import_graph(ROOT, deferred=False)
    found = [
        sorted(c)
        for c in cycles(import_graph(ROOT, deferred=True))
        if c not in KNOWN and not is_package_registry(c, top)
    ]
    assert not found, f"import cycles through function-local imports: {found}"


@pytest.mark.parametrize("deferred", [False, True])
def test_a_planted_cycle_is_found(tmp_path: Path, deferred: bool) -> None:
    package = tmp_path / "kictl" / "pkg"
    package.mkdir(parents=True)
    (tmp_path / "kictl" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from kictl.pkg import b\n")
    body = "def late() -> None:\n    from . import a\n" if deferred else "if True:\n    from kictl.pkg.a import x\n"
    (package / "b.py").write_text(body)
    graph = import_graph(tmp_path, deferred=deferred)
    assert cycles(graph) == [frozenset({"kictl.pkg.a", "kictl.pkg.b"})]
    assert cycles(import_graph(tmp_path, deferred=False)) == ([] if deferred else cycles(graph))
    assert not is_package_registry(frozenset({"kictl.pkg.a", "kictl.pkg.b"}), graph)


#: A module past this many lines says why at the top of its docstring (issue 33: modules that fit in a head).
MODULE_LINES = 600


def test_no_module_is_past_600_lines_without_saying_why() -> None:
    unexplained = []
    for name, (path, tree) in parsed_modules(ROOT).items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines <= MODULE_LINES:
            continue
        doc = ast.get_docstring(tree) or ""
        if f"over {MODULE_LINES} lines" not in doc:
            unexplained.append(f"{name} ({lines} lines)")
    assert not unexplained, f"modules past {MODULE_LINES} lines with no reason in their docstring: {unexplained}"
