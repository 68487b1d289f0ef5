"""Re-exports imported on first use (PEP 562): a package facade whose names cost nothing until one is read.

Transitional (issue 44): a reader cannot follow a name through it, so it goes once the modules that still
read ``kictl.store``, ``kictl.index``, ``kictl.rank`` and ``kictl.advisories`` names through the package
import them from their submodules.

``kictl.store``, ``kictl.index`` and ``kictl.rank`` re-export their submodules' names this way, so that a
command importing one light submodule (the warm ``kictl leaderboard``: ``kictl.cli.answers``,
``kictl.store.files``) does not import the record models through the package.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(namespace: dict[str, Any], where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the package whose globals are ``namespace``: each name of ``where`` is
    imported from its module (``where[name]``) on first use and kept in ``namespace``."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
