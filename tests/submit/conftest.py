"""Fixtures of the submit tests: a registry in a real git repository with a real trust root.

Keys are real Ed25519 key files made by ``trust.generate_keypair``; the trust
root lists a maintainer, a submitter and a verifier and is committed on
``main``; records are built from ``tests.factories`` and written to files the
way ``kictl bench --out`` or a user would.  ``snapshot`` captures everything a
submission must leave as it was: HEAD, every branch, the index file's bytes,
``git status`` and every file and folder of the checkout.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import git
import pytest

from kictl import canon, trust
from kictl.records import StoredRecord, record_from_value
from kictl.scaffold import create_registry
from kictl.store.registry import Registry
from tests import factories

#: Keys are valid from here on.
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
OWNERS = ("maintainer", "submitter", "verifier", "stranger")


@dataclass(frozen=True)
class Keys:
    folder: Path

    def private(self, owner: str) -> Path:
        return self.folder / f"{owner}.key"

    def public(self, owner: str) -> Path:
        return self.folder / f"{owner}.key.pub"

    def keyid(self, owner: str) -> str:
        return trust.keyid_of(trust.load_public_key(self.public(owner)))


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    """Key files shared by the session, read only: maintainer, submitter, verifier, and a stranger."""
    folder = tmp_path_factory.mktemp("submit-keys")
    for owner in OWNERS:
        trust.generate_keypair(folder / f"{owner}.key", owner=owner.capitalize())
    return Keys(folder)


def trusted_registry(root: Path, keys: Keys) -> Registry:
    """`kictl init`, `trust init` by the maintainer, `trust add-key` of the submitter and the verifier, committed."""
    create_registry(root)
    registry = Registry(root)
    signing = [trust.load_private_key(keys.private("maintainer"))]
    trust.init_root(
        registry,
        maintainers=[(trust.load_public_key(keys.public("maintainer")), "Maintainer")],
        keys=signing,
        not_before=EPOCH,
    )
    for owner in ("submitter", "verifier"):
        trust.add_key(
            registry,
            trust.load_public_key(keys.public(owner)),
            owner=owner.capitalize(),
            roles=[owner],
            keys=signing,
            not_before=EPOCH,
        )
    registry.git.commit(["registry"], "Trust root: a maintainer, a submitter, a verifier")
    return registry


@pytest.fixture(scope="session")
def registry_template(tmp_path_factory: pytest.TempPathFactory, keys: Keys) -> Path:
    """One trusted registry per session; each test gets a copy (git repository included)."""
    with pytest.MonkeyPatch.context() as patch:  # made before the per-test git identity is set
        for variable in ("GIT_AUTHOR", "GIT_COMMITTER"):
            patch.setenv(f"{variable}_NAME", "Test Author")
            patch.setenv(f"{variable}_EMAIL", "author@example.org")
        return trusted_registry(tmp_path_factory.mktemp("submit-template") / "registry", keys).root


@pytest.fixture
def registry(tmp_path: Path, registry_template: Path) -> Registry:
    """A registry in its own git repository whose committed trust root lists maintainer, submitter, verifier."""
    root = tmp_path / "registry"
    shutil.copytree(registry_template, root, symlinks=True)
    return Registry(root)


def records_of(values: dict[str, dict[str, Any]] | list[dict[str, Any]]) -> list[StoredRecord]:
    items = list(values.values()) if isinstance(values, dict) else values
    return [record_from_value(item, source="test") for item in items]


def chain_with_runs(latencies: tuple[int, ...] = (12_500,)) -> list[dict[str, Any]]:
    """factories.chain() with one run per latency (the first is the chain's own)."""
    parts = factories.chain()
    values = [parts[name] for name in ("definition", "workload", "implementation", "protocol", "environment")]
    digests = {name: canon.record_digest(parts[name]) for name in parts}
    for latency in latencies:
        values.append(
            factories.run(
                definition_digest=digests["definition"],
                workload_digest=digests["workload"],
                implementation_digest=digests["implementation"],
                protocol_digest=digests["protocol"],
                environment_digest=digests["environment"],
                median_ns=latency,
            )
        )
    return values


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(canon.pretty_bytes(value))
    return path


def bench_out(folder: Path, values: list[dict[str, Any]]) -> Path:
    """A folder as `kictl bench --out` leaves it: one manifest ``{<kind>/<hex>: record}``."""
    manifest = {f"{value['kind']}/{canon.record_digest(value)[7:]}": value for value in values}
    write_json(folder / "bench-gemm_tiny-20261130T000000Z.json", manifest)
    return folder


def commit_records(registry: Registry, values: list[dict[str, Any]], message: str = "published records") -> None:
    """Publish records on main, as a merged pull request would."""
    registry.add(records_of(values))
    registry.git.commit(["registry"], message)


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (None) below ``root``, outside .git and .kictl.

    ``.kictl/`` is derived data that git ignores: the local review builds the
    query index there (its leaderboards), as `kictl leaderboard` does.
    """
    found: dict[str, bytes | None] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [name for name in dirs if name not in (".git", ".kictl")]
        relative = os.path.relpath(folder, root)
        found[relative + "/"] = None
        for name in files:
            found[os.path.join(relative, name)] = Path(folder, name).read_bytes()
    return found


def snapshot(registry: Registry) -> dict[str, Any]:
    """What a submission must leave unchanged: HEAD, branches, index bytes, status, the checkout's files."""
    repo = git.Repo(registry.root)
    head = repo.head
    status = repo.git.status("--porcelain", "--untracked-files=all")  # may refresh the index's stat data
    return {
        "head": head.commit.hexsha,
        "head_ref": None if head.is_detached else head.ref.name,
        "branches": {branch.name: branch.commit.hexsha for branch in repo.branches},
        "index": (registry.root / ".git" / "index").read_bytes(),
        "status": status,
        "tree": _tree(registry.root),
    }


def loose_copy(keys: Keys, owner: str, folder: Path) -> Path:
    """A copy of a private key readable by everybody (mode 0644)."""
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / f"{owner}-loose.key"
    copy.write_bytes(keys.private(owner).read_bytes())
    copy.chmod(0o644)
    return copy
