"""Fixtures shared by every test: registries in real git repositories, the CLI runner.

Areas with fixtures of their own keep them in their folder's conftest.py
(tests/bench/, tests/trust/, tests/rank/, tests/importers/, tests/review/).
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner, Result

from kictl.cli import make_app
from kictl.layout import KICTL_DIR
from kictl.scaffold import create_registry
from kictl.store.git import GitHistory
from kictl.store.registry import Registry

if TYPE_CHECKING:
    from xdist.remote import Producer
    from xdist.scheduler.protocol import Scheduling

REPO_ROOT = Path(__file__).resolve().parents[1]


def _find_shared_data() -> Path:
    """../shared/data beside the checkout, or beside a folder above it (worktrees sit deeper)."""
    for folder in REPO_ROOT.parents:
        if (folder / "shared" / "data").is_dir():
            return folder / "shared" / "data"
    return REPO_ROOT.parent / "shared" / "data"


SHARED_DATA = _find_shared_data()
ASSETS = Path(__file__).resolve().parent / "assets"

RunCli = Callable[..., Result]


def shared_data(name: str) -> Path:
    """A folder of ../shared/data, or skip the test when it is absent."""
    path = SHARED_DATA / name
    if not path.is_dir():
        pytest.skip(f"{path} is absent")
    return path


#: The CPUs this process may use before ``pytest_configure`` gives an xdist worker its own last CPU.
MACHINE_CPUS: frozenset[int] = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, give every worker process a different last CPU.

    ``kictl bench`` pins its workers to the last CPU its process may use (``kictl.bench.judge.options.pinned_cpus``),
    as a user's ``taskset`` would choose it. Every xdist worker's bench sessions would otherwise share that one
    core while the others idle (the whole suite used 0.7 of 2 cores). Worker ``gwN`` keeps all but its last
    ``N mod CPUs`` CPUs, as kictl's own executor gives each CPU worker a share of its own.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return
    # each process's share of the machine, for its in-process torch (comparisons, judges, references): on the
    # 2-core VM under `-n 2`, torch's default pool of two threads per process took 2-3.5 times the CPU of one
    # for the small tensors the tests use (a 128,256-token sort: 1.35 against 0.38 CPU-s; docs/testing.md)
    share = max(1, len(MACHINE_CPUS) // max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
    import torch

    torch.set_num_threads(min(share, torch.get_num_threads()))
    if len(MACHINE_CPUS) < 2:
        return
    allowed = sorted(MACHINE_CPUS)
    drop = int(worker.removeprefix("gw")) % len(allowed)
    if drop:
        os.sched_setaffinity(0, allowed[: len(allowed) - drop])


@pytest.fixture
def every_cpu() -> Iterator[None]:
    """The test runs on all of ``MACHINE_CPUS`` (a test that must tell pinned from not needs two)."""
    narrowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, MACHINE_CPUS)
    try:
        yield
    finally:
        os.sched_setaffinity(0, narrowed)


#: Tests measured at more than a second each (tests/durations.py writes the list).
HEAVY_FILE = Path(__file__).resolve().parent / "heavy_tests.txt"


def _heavy_ids() -> frozenset[str]:
    from tests.durations import recorded_costs  # the list's one reader, beside its writer

    return frozenset(recorded_costs(HEAVY_FILE))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> Scheduling | None:
    """``--dist loadscope``: loadscope's units, the costliest first (tests/scheduling.py); xdist's own otherwise."""
    if config.getvalue("dist") != "loadscope":
        return None
    from tests.scheduling import CostliestFirstScheduling, recorded_costs, session_fixture_folders

    whole = session_fixture_folders(REPO_ROOT, REPO_ROOT / "tests")
    return CostliestFirstScheduling(config, log, recorded_costs(HEAVY_FILE), whole)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``heavy`` the tests (or whole modules) of tests/heavy_tests.txt and every ``slow`` test:
    ``-m "not heavy"`` is the inner loop (docs/testing.md)."""
    heavy = _heavy_ids()
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        if item.nodeid in heavy or module in heavy or item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.heavy)


@pytest.fixture(autouse=True)
def _isolated_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """No test sees the developer's registry, key passphrase or git identity."""
    monkeypatch.delenv("KICTL_REGISTRY", raising=False)
    monkeypatch.delenv("KICTL_KEY_PASSPHRASE", raising=False)
    monkeypatch.delenv("KICTL_VERBOSE", raising=False)
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test Author")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "author@example.org")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test Author")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "author@example.org")
    monkeypatch.chdir(tmp_path)
    # the user's kictl config (trust pins, this machine's selftest results): beside the test's folder, not in it,
    # so that a test can check that a command wrote nothing in its own folder
    home = tmp_path_factory.mktemp("kictl-config")
    monkeypatch.setenv("KICTL_CONFIG_HOME", str(home))
    # this machine's secret and the seals of site folders (kictl.index.secret): the test's own, never the user's
    monkeypatch.setenv("KICTL_CACHE_HOME", str(tmp_path_factory.mktemp("kictl-cache")))
    plant_selftest_record(home)


def plant_selftest_record(home: Path) -> None:
    """A passing ``kictl selftest`` of this harness on the CPU and CUDA, as ``kictl attest rerun`` requires.

    Tests that sign reruns are about the reruns, not the selftest (tests/test_selftest.py runs the real one
    and tests/advisories/ the refusals); a test that wants no record deletes ``home / "selftest.json"``.
    """
    from kictl.bench.judge.results import harness_identity

    record = {"harness": harness_identity(), "ok": True, "missed": [], "sandboxed": True, "devices": ["cpu", "cuda"]}
    home.mkdir(parents=True, exist_ok=True)
    (home / "selftest.json").write_text(json.dumps({"results": [record]}))


@pytest.fixture
def cli() -> RunCli:
    """Run kictl in-process: ``cli("validate", "--registry", path)``; returns click's Result."""
    runner = CliRunner()
    app = make_app()

    def run(*args: str | os.PathLike[str], input: str | bytes | None = None) -> Result:
        return runner.invoke(app, [str(arg) for arg in args], input=input, catch_exceptions=False)

    return run


@pytest.fixture
def empty_registry(tmp_path: Path) -> Registry:
    """A new registry made by `kictl init`, in a real git repository."""
    root = tmp_path / "empty-registry"
    create_registry(root)
    return Registry(root)


#: What the repository's registry holds beyond its definitions: measured results and their signatures.
RESULT_KINDS = ("BenchmarkRun", "Implementation", "BenchmarkProtocol", "ExecutionEnvironment")


@functools.cache
def catalogue_paths() -> frozenset[Path]:
    """The definition folders and record files of the catalogue's imported definitions (definitions/catalogue.json).

    About 2,900 files: copied into every bundled registry a test makes, they would cost seconds each time.
    """
    from kictl.definitions import catalogue_names

    names = catalogue_names(REPO_ROOT)
    paths: set[Path] = set()
    digests: set[str] = set()
    for path in (REPO_ROOT / "registry" / "records" / "Definition").glob("*/*.json"):
        if json.loads(path.read_bytes())["spec"]["name"] in names:
            digests.add(f"sha256:{path.stem}")
            paths.add(path)
    # their workloads, and the results measured on them (runs, implementations, the runs' attestations): a copy
    # without the catalogue holds no record that names a definition it lacks
    for kind in ("Workload", "Implementation", "BenchmarkRun"):
        for path in (REPO_ROOT / "registry" / "records" / kind).glob("*/*.json"):
            if json.loads(path.read_bytes())["spec"]["definitionDigest"] in digests:
                paths.add(path)
                if kind == "BenchmarkRun":
                    paths.add(REPO_ROOT / "registry" / "attestations" / path.parent.name / path.stem)
    paths.update(
        folder.parent
        for folder in (REPO_ROOT / "definitions").glob("*/*/definition.json")
        if folder.parent.name in names
    )
    if names:
        paths.add(REPO_ROOT / "definitions" / "catalogue.json")
    return frozenset(paths)


def _leave_out(*patterns: str, catalogue: bool) -> Callable[[str, list[str]], set[str]]:
    by_pattern = shutil.ignore_patterns(*patterns)
    left_out = frozenset() if catalogue else catalogue_paths()

    def ignore(folder: str, names: list[str]) -> set[str]:
        return set(by_pattern(folder, names)) | {name for name in names if Path(folder, name) in left_out}

    return ignore


def copy_bundled(target: Path, *, results: bool = False, catalogue: bool = False, advisories: bool = True) -> Registry:
    """The repository's definitions (and, with ``results``, its measured runs), in a new git repository.

    Without ``results`` the copy holds the definitions and workloads only, with
    the keyless trust root `kictl init` writes: the starting point most tests
    want, whatever results the repository carries.  Without ``catalogue`` it
    holds the hand-written definitions only, not the 151 the catalogue imported
    (``catalogue_paths``), which no test of another area needs.  The harness advisories come with the results
    (they are about them, signed by the bundled root's maintainer), unless ``advisories`` is false: a registry
    whose history never held them (deleting them later is what the advisory memory reports as a deletion).

    Each variant is built once per pytest process (``_bundled_template``) and copied, working tree and
    ``.git`` alike, into ``target``: the copy shares no file with the template or with another copy.
    """
    template = _bundled_template(results=results, catalogue=catalogue, advisories=advisories)
    shutil.copytree(template.root, target, symlinks=True)
    return Registry(target)


@dataclass(frozen=True)
class _Template:
    root: Path
    files: tuple[tuple[str, int, int, int], ...]  # (path, size, mtime_ns, mode) of every entry, as built


#: ``(results, catalogue, advisories)`` -> the registry ``copy_bundled`` copies, built at the first call.
_TEMPLATES: dict[tuple[bool, bool, bool], _Template] = {}


def _bundled_template(*, results: bool, catalogue: bool, advisories: bool) -> _Template:
    """The registry ``copy_bundled`` copies, built in a private folder the first time a process asks for it.

    Building it costs 0.4 s plain, 3 s with ``results`` (the replayed history), 8-16 s with the catalogue:
    many tests want one. No test is given the template's path; each copy checks that its files are still as
    built (a test that reached it and wrote there fails the next copy instead of leaking into it).
    """
    key = (results, catalogue, advisories)
    made = _TEMPLATES.get(key)
    if made is None:
        folder = Path(tempfile.mkdtemp(prefix="kictl-bundled-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        root = folder / "registry"
        _build_bundled(root, results=results, catalogue=catalogue, advisories=advisories)
        made = _TEMPLATES[key] = _Template(root, _entries(root))
    else:
        assert _entries(made.root) == made.files, f"the bundled template {made.root} was changed after it was built"
    return made


def _entries(root: Path) -> tuple[tuple[str, int, int, int], ...]:
    found = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted([*dirs, *files]):
            path = os.path.join(folder, name)
            stat = os.lstat(path)
            found.append((os.path.relpath(path, root), stat.st_size, stat.st_mtime_ns, stat.st_mode))
    return tuple(found)


def _build_bundled(target: Path, *, results: bool, catalogue: bool, advisories: bool) -> None:
    """Make ``target`` the registry ``copy_bundled`` describes, from the repository's files."""
    target.mkdir(parents=True)
    shutil.copytree(REPO_ROOT / "definitions", target / "definitions", ignore=_leave_out(catalogue=catalogue))
    ignored = () if results else ("attestations", "advisories", *RESULT_KINDS)
    if not advisories:
        ignored = (*ignored, "advisories")
    shutil.copytree(REPO_ROOT / "registry", target / "registry", ignore=_leave_out(*ignored, catalogue=catalogue))
    if not results:
        empty_trust_root(target)
    import git

    repo = git.Repo.init(target, initial_branch="main")
    for when, paths in _bundled_history(target) if results else []:
        repo.index.add(paths)
        stamp = f"{when} +0000"
        repo.index.commit(f"Bundled registry as of {when}", author_date=stamp, commit_date=stamp)
    repo.index.add(["registry", "definitions"])
    if not results or repo.is_dirty(index=True, working_tree=False, untracked_files=False) or not repo.head.is_valid():
        repo.index.commit("Bundled registry")
    repo.git.gc("-q", "--prune=now")  # one pack, not thousands of loose objects: each copy copies a few files
    repo.close()
    assert GitHistory(target).head() is not None
    assert not (target / KICTL_DIR).exists(), "the template holds derived files a copy would carry"


def _bundled_history(target: Path) -> list[tuple[int, list[str]]]:
    """The copied registry's files grouped by when the repository's main line first committed each, oldest first.

    A signature's time is when its file entered the registry (docs/trust.md "Signing time"), so a copy
    committed all at once would date every signature today: the submissions of a key retired since
    (the bundled root's version 6 retires the H200 submitter and the first verifier) would read as
    signed after the retirement.  Replaying the commit times keeps the copy's signing times the
    repository's.  Files the repository has not committed come last, in the final commit, as now.
    """
    from kictl.store.git import merged_times

    try:
        times = {**merged_times(REPO_ROOT, "registry"), **merged_times(REPO_ROOT, "definitions")}
    except Exception:  # not a git checkout (an sdist): one commit, as before
        return []
    batches: dict[int, list[str]] = {}
    for path, stamp in times.items():
        if (target / path).is_file():
            batches.setdefault(stamp, []).append(path)
    return sorted(batches.items())


def empty_trust_root(root: Path) -> None:
    """Give a copied registry the keyless trust root `kictl init` writes, so a test can set up its own keys."""
    from kictl import canon, trust

    folder = root / "registry" / "trust"
    for version in folder.glob("*.root.json"):
        version.unlink()
    (folder / "root.json").write_bytes(canon.pretty_bytes(trust.initial_root_document()))


@pytest.fixture
def bundled_registry(tmp_path: Path) -> Registry:
    """The bundled definitions and workloads in their own git repository (no results, no keys)."""
    return copy_bundled(tmp_path / "bundled")


@pytest.fixture
def bundled_results(tmp_path: Path) -> Registry:
    """A copy of the whole bundled registry, with its signed H200 results, in its own git repository."""
    return copy_bundled(tmp_path / "bundled-results", results=True)


def load_module(name: str, path: Path) -> ModuleType:
    """The Python file at ``path`` executed as a module named ``name`` (a script of benchmarks/, an implementation's
    entry file), not put in ``sys.modules``."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
