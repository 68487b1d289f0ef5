"""The worker: kictl's code that runs inside the sandbox, next to the implementation.

``kictl.bench`` is three packages, and the sandbox is the wall between them:

``kictl.bench.worker`` (this package)
    runs in the sandboxed worker process (``python -m kictl.bench.worker``): the requests it serves
    (``main``), the timers (``timing``, ``cupti_*``), the checks that can only be made in the implementation's
    process (``integrity``), the machine's description (``environment``) and the GPU's state (``gpu_state``).
    Nothing here decides a result: it reports evidence that kictl's parent judges.
``kictl.bench.wire``
    the protocol both sides speak: frames and messages, the checks' names, the timers' table, the shared
    regions' layout and how an input on the wire becomes a tensor.
``kictl.bench.judge``
    kictl's parent: the sandbox and the worker processes, the loop, the clock, the inputs, the correctness
    comparison and every verdict.

What a sandbox holds of kictl is derived here, not listed by hand: ``FILES`` is this package, the protocol,
and every module of kictl they import (followed through their ``import`` statements, those inside functions
too), and nothing else; ``judge.sandbox.worker_package`` copies exactly these files.  A worker module that
imported the judge would pull it into ``FILES`` (``tests/bench/test_layout.py`` holds the list to this package,
the protocol, ``kictl/__init__.py``, ``kictl/errors.py``, ``kictl/blobs.py`` and ``kictl/dtypes.py``).  ``MODULES``
are the worker's and the protocol's modules, whose functions ``timerNotPatched`` watches in the worker.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import TYPE_CHECKING

_KICTL = Path(__file__).resolve().parents[2]
#: The packages whose every module a sandbox holds (as paths under kictl's package folder).
PACKAGES = ("bench/worker", "bench/wire")


def _module_name(relative: Path) -> str:
    parts = ("kictl", *relative.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_file(root: Path, name: str) -> Path | None:
    """The file of kictl's module or package ``name`` (relative to kictl's folder ``root``), or ``None``."""
    parts = name.split(".")[1:]
    package = Path(*parts, "__init__.py")
    if (root / package).is_file():
        return package
    module = Path(*parts[:-1], parts[-1] + ".py") if parts else None
    return module if module is not None and (root / module).is_file() else None


def _imports(path: Path) -> set[str]:
    """kictl's modules that ``path`` imports, at its top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name == "kictl" or name.startswith("kictl.")}


def sandbox_files(root: Path = _KICTL) -> tuple[Path, ...]:
    """Every file of kictl a sandbox holds, relative to kictl's package folder ``root``, sorted."""
    todo = [path.relative_to(root) for package in PACKAGES for path in (root / package).rglob("*.py")]
    todo.append(Path("__init__.py"))
    seen: set[Path] = set()
    while todo:
        relative = todo.pop()
        if relative in seen or "__pycache__" in relative.parts:
            continue
        seen.add(relative)
        for name in _imports(root / relative):
            found = _module_file(root, name)
            if found is not None:
                todo.append(found)
            # a parent package's __init__ runs on import too
            for depth in range(1, name.count(".")):
                parent = _module_file(root, ".".join(name.split(".")[: depth + 1]))
                if parent is not None and parent.name == "__init__.py":
                    todo.append(parent)
    return tuple(sorted(seen))


def _in_packages(path: Path) -> bool:
    return any(path.parts[: len(Path(package).parts)] == Path(package).parts for package in PACKAGES)


if TYPE_CHECKING:  # made on first use by __getattr__ below
    FILES: tuple[Path, ...]
    MODULES: tuple[str, ...]


@functools.cache
def _files() -> tuple[Path, ...]:
    return sandbox_files()


@functools.cache
def _modules() -> tuple[str, ...]:
    # the packages' own modules only: their files, no import walk (a worker starts without parsing kictl)
    found = {
        path.relative_to(_KICTL)
        for package in PACKAGES
        for path in (_KICTL / package).rglob("*.py")
        if "__pycache__" not in path.parts and path.name != "__main__.py"
    }
    return tuple(sorted(_module_name(path) for path in found))


def __getattr__(name: str) -> tuple[Path, ...] | tuple[str, ...]:
    """``FILES``: every file of kictl a sandbox holds (``sandbox_files()``, an import walk the parent makes once);
    ``MODULES``: the worker's and the protocol's modules (not ``__main__``), by import name.  Both are made on first
    use, so that importing a worker module (the worker itself, ``kictl.derived`` reading ``timing.summarize``)
    parses no source: the walk took 0.6 s."""
    if name == "FILES":
        return _files()
    if name == "MODULES":
        return _modules()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
