"""Fixtures of the importer tests: the hand-made datasets and registries holding the real ones.

The hand-made datasets live in tests/assets/importers/ (see its README); tests
copy them into ``tmp_path`` before changing anything.  The real FlashInfer
Trace datasets are read from ../shared/data and the tests that need them skip
when it is absent; each is imported once per module into a registry made by
`kictl init`, because importing today's dataset takes about a second.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kictl.importers.flashinfer_bench import ImportReport, import_flashinfer_bench
from kictl.scaffold import create_registry
from kictl.store.registry import Registry
from tests.conftest import ASSETS, shared_data

DATASETS = ASSETS / "importers"
CopyDataset = Callable[[str], Path]


def asset_dataset(name: str) -> Path:
    """A hand-made dataset, read in place (never write to it)."""
    path = DATASETS / name
    assert path.is_dir(), path
    return path


@pytest.fixture
def copy_dataset(tmp_path: Path) -> CopyDataset:
    """``copy_dataset(name)``: a writable copy of a hand-made dataset under ``tmp_path``."""

    def copy(name: str) -> Path:
        target = tmp_path / "datasets" / name
        shutil.copytree(asset_dataset(name), target)
        return target

    return copy


def new_registry(root: Path) -> Registry:
    """A registry made by `kictl init` at ``root``."""
    create_registry(root)
    return Registry(root)


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` except git's own, with its bytes."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".git" not in path.relative_to(root).parts
    }


@dataclass(frozen=True)
class Imported:
    """A registry after importing a real dataset once."""

    dataset: Path
    registry: Registry
    report: ImportReport


def _import_real(name: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Imported]:
    dataset = shared_data(name)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GIT_AUTHOR_NAME", "Test Author")
        patch.setenv("GIT_AUTHOR_EMAIL", "author@example.org")
        patch.setenv("GIT_COMMITTER_NAME", "Test Author")
        patch.setenv("GIT_COMMITTER_EMAIL", "author@example.org")
        registry = new_registry(tmp_path_factory.mktemp(name) / "registry")
    yield Imported(dataset, registry, import_flashinfer_bench(registry, dataset))


@pytest.fixture(scope="module")
def legacy_imported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Imported]:
    """../shared/data/flashinfer-trace-legacy imported into a new registry."""
    yield from _import_real("flashinfer-trace-legacy", tmp_path_factory)


@pytest.fixture(scope="module")
def current_imported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Imported]:
    """../shared/data/flashinfer-trace imported into a new registry."""
    yield from _import_real("flashinfer-trace", tmp_path_factory)
