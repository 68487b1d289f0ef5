"""Fixtures of the review tests: registries in real git repositories with a base and a PR branch.

``base_registry`` (built once per session, copied for each test) is the
bundled registry plus one measured result on ``main``: an implementation, a
protocol, an H200 environment, a passed run of ``gemm_n4096_k4096`` workload
``m128`` (torch_matmul, 40.0 µs), a blob, a submission envelope about the run
signed with a real Ed25519 key, and a real trust root (``kictl.trust``): a
maintainer, ``SUBMITTER_KEY`` as submitter and ``VERIFIER_KEY`` as verifier,
valid from 2026-01-01.  ``Pr`` checks out a branch ``pr`` from ``main`` and
writes, deletes and commits files on it; each test builds one PR and reviews it.

``assert_markdown_renders`` checks that a Markdown body has valid tables (the
same number of cells in every row, a header separator) and renders them with
markdown-it-py's GFM tables.
"""

from __future__ import annotations

import base64
import copy
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import git
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from markdown_it import MarkdownIt
from typer.testing import Result

from kictl import canon, definitions, trust
from kictl.bench.worker.timing import summarize
from kictl.records import StoredRecord, record_from_value
from kictl.scaffold import GITIGNORE
from kictl.store.registry import Registry
from tests import factories
from tests.conftest import REPO_ROOT, RunCli, catalogue_paths, empty_trust_root

GEMM = "definitions/gemm/gemm_n4096_k4096"
ACTOR = git.Actor("Test Author", "author@example.org")
PAYLOAD_TYPE = "application/vnd.in-toto+json"
#: One fixed key, so that the session's base registry and the tests agree.
SUBMITTER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
VERIFIER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32, 64)))
MAINTAINER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(64, 96)))


def record_path(raw: dict[str, Any]) -> str:
    digest = canon.record_digest(raw)
    hex_digest = canon.digest_hex(digest)
    return f"registry/records/{raw['kind']}/{hex_digest[:2]}/{hex_digest}.json"


def keyid(key: Ed25519PrivateKey) -> str:
    return canon.sha256_hex(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


def envelope(
    subject: dict[str, Any],
    predicate_type: str = "submission",
    key: Ed25519PrivateKey = SUBMITTER_KEY,
    predicate: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A DSSE envelope of an in-toto Statement v1 about ``subject`` (a raw record), signed over PAE.

    Built here by hand (DSSE protocol, PAE), not with kictl.trust, so that the
    review's verification is checked against an independent signer.
    """
    hex_digest = canon.digest_hex(canon.record_digest(subject))
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": f"{subject['kind']}/{subject['metadata']['name']}", "digest": {"sha256": hex_digest}}],
        "predicateType": f"https://kernelindex.dev/attestation/{predicate_type}/v1",
        "predicate": predicate or {},
    }
    payload = canon.canonical_bytes(statement)
    pae = b"DSSEv1 %d %s %d %s" % (len(PAYLOAD_TYPE), PAYLOAD_TYPE.encode(), len(payload), payload)
    return {
        "payload": base64.b64encode(payload).decode(),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [{"keyid": keyid(key), "sig": base64.b64encode(key.sign(pae)).decode()}],
    }


def envelope_path(subject: dict[str, Any], value: dict[str, Any]) -> str:
    hex_digest = canon.digest_hex(canon.record_digest(subject))
    name = canon.sha256_hex(canon.canonical_bytes(value))
    return f"registry/attestations/{hex_digest[:2]}/{hex_digest}/{name}.dsse.json"


@dataclass
class BaseRecords:
    """The raw records ``main`` holds beyond the bundled registry."""

    definition: dict[str, Any]
    workloads: dict[str, dict[str, Any]]  # by label
    implementation: dict[str, Any]
    protocol: dict[str, Any]
    environment: dict[str, Any]
    run: dict[str, Any]
    blob: bytes
    run_envelope: dict[str, Any]

    def run_like(self, *, workload: str = "m128", median_ns: int = 50_000, **changes: Any) -> dict[str, Any]:
        """A new passed run of this chain (a different latency makes a different record)."""
        raw = factories.run(
            definition_digest=canon.record_digest(self.definition),
            workload_digest=canon.record_digest(self.workloads[workload]),
            implementation_digest=canon.record_digest(self.implementation),
            protocol_digest=canon.record_digest(self.protocol),
            environment_digest=canon.record_digest(self.environment),
            median_ns=median_ns,
        )
        raw["spec"].update(changes)
        return raw


def _gemm_records() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    compiled = definitions.compile_folder(REPO_ROOT / GEMM, REPO_ROOT)
    return copy.deepcopy(compiled.definition.raw), {w.name: copy.deepcopy(w.raw) for w in compiled.workloads}


def _write(root: Path, path: str, data: bytes) -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


@pytest.fixture(scope="session")
def base_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BaseRecords]:
    """The base registry, built once: the bundled one plus a measured result, committed on ``main``."""
    root = tmp_path_factory.mktemp("review-base") / "registry-repo"
    return root, build_base(root)


def build_base(root: Path) -> BaseRecords:
    """Make ``root`` the base registry (``benchmarks/review_scale.py`` builds its PR on it too)."""
    root.mkdir()
    # the hand-written definitions and their runs, not the catalogue (``catalogue_paths``: its 151 definitions, their
    # workloads and the runs measured on them): every PR's copy of the base is copied file by file, and the
    # catalogue's 3,000 files took the review tests from 47 to 191 s of a loaded full run; no review test reads it
    left_out = catalogue_paths()
    for folder in ("registry", "definitions"):
        shutil.copytree(
            REPO_ROOT / folder,
            root / folder,
            ignore=lambda where, names: {name for name in names if Path(where, name) in left_out},
        )
    definition, workloads = _gemm_records()
    definition_digest = canon.record_digest(definition)
    implementation = factories.implementation(definition_digest)
    protocol = factories.protocol()
    environment = factories.environment("H200")
    records = BaseRecords(
        definition=definition,
        workloads=workloads,
        implementation=implementation,
        protocol=protocol,
        environment=environment,
        run={},
        blob=b"index tensor bytes of the base\n",
        run_envelope={},
    )
    # the base's record keeps its samples (a run without them is reported at best: kictl.derived); their
    # median is 40 µs and their 10-90 % band 39.95-40.2 µs, as the factory's statistics state
    samples = [39_950] * 2 + [40_000] * 6 + [40_200] * 2
    timing = {"latencyNs": summarize(samples), "samples": samples, "primaryStatistic": "median"}
    records.run = records.run_like(median_ns=40_000, timing=timing)
    records.run_envelope = envelope(records.run)
    for raw in (implementation, protocol, environment, records.run):
        _write(root, record_path(raw), canon.pretty_bytes(raw))
    blob_hex = canon.sha256_hex(records.blob)
    _write(root, f"registry/blobs/{blob_hex[:2]}/{blob_hex}", records.blob)
    _write(root, envelope_path(records.run, records.run_envelope), canon.pretty_bytes(records.run_envelope))
    # a real trust root: a maintainer, the submitter and a verifier, valid from before the base commit
    registry = Registry(root)
    empty_trust_root(root)  # the bundled registry's own keys are not the test's
    valid_from = datetime(2026, 1, 1, tzinfo=UTC)
    trust.init_root(
        registry,
        maintainers=[(MAINTAINER_KEY.public_key(), "Mia Maintainer")],
        keys=[MAINTAINER_KEY],
        not_before=valid_from,
    )
    for key, owner, role in ((SUBMITTER_KEY, "Sam Submitter", "submitter"), (VERIFIER_KEY, "Vic Verifier", "verifier")):
        trust.add_key(
            registry, key.public_key(), owner=owner, roles=[role], keys=[MAINTAINER_KEY], not_before=valid_from
        )
    (root / ".gitignore").write_bytes(GITIGNORE)  # as `kictl init` writes it: the query index stays out of git
    repo = git.Repo.init(root, initial_branch="main")
    repo.git.add("-A")
    repo.index.commit("Base registry", author=ACTOR, committer=ACTOR)
    # one pack instead of 3,600 loose objects: each test's copy of the base took 1.1 s, now 0.4 s
    repo.git.gc("-q", "--prune=now")
    repo.close()
    return records


class Pr:
    """A PR branch ``pr`` of a registry repository whose ``main`` is the base."""

    def __init__(self, root: Path, records: BaseRecords) -> None:
        self.root = root
        self.base = records
        self.repo = git.Repo(root)
        self.repo.git.checkout("-q", "-b", "pr", "main")

    @property
    def registry(self) -> Registry:
        return Registry(self.root)

    def write(self, path: str, data: bytes) -> str:
        _write(self.root, path, data)
        return path

    def add_record(self, raw: dict[str, Any]) -> str:
        """File a record at its digest in normal form; returns its path."""
        return self.write(record_path(raw), canon.pretty_bytes(raw))

    def add_envelope(self, subject: dict[str, Any], value: dict[str, Any]) -> str:
        return self.write(envelope_path(subject, value), canon.pretty_bytes(value))

    def add_blob(self, data: bytes) -> str:
        hex_digest = canon.sha256_hex(data)
        return self.write(f"registry/blobs/{hex_digest[:2]}/{hex_digest}", data)

    def remove(self, path: str) -> None:
        (self.root / path).unlink()

    def commit(self, message: str = "PR", *, when: datetime | None = None) -> str:
        """Commit everything written; ``when`` sets the author and committer time.

        git's own ``commit``: gitpython's writes the tree of the base's 7,000 files in Python (0.4 s a commit).
        """
        self.repo.git.add("-A")
        env = {"GIT_AUTHOR_NAME": ACTOR.name, "GIT_AUTHOR_EMAIL": ACTOR.email}
        env |= {"GIT_COMMITTER_NAME": ACTOR.name, "GIT_COMMITTER_EMAIL": ACTOR.email}
        if when is not None:
            env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"{int(when.timestamp())} +0000"
        self.repo.git.commit("-q", "--allow-empty", "--no-verify", "--cleanup=verbatim", "-m", message, env=env)
        return str(self.repo.head.commit.hexsha)

    def publish(self, message: str = "published on main", *, when: datetime | None = None) -> str:
        """Commit what was written so far and move ``main`` there: the base grows, the PR starts after it."""
        sha = self.commit(message, when=when)
        self.repo.git.branch("-f", "main", "HEAD")
        return sha

    def stored(self, raw: dict[str, Any]) -> StoredRecord:
        return record_from_value(raw)


@pytest.fixture
def pr(base_template: tuple[Path, BaseRecords], tmp_path: Path) -> Iterator[Pr]:
    """A copy of the base registry with the branch ``pr`` checked out."""
    source, records = base_template
    root = tmp_path / "registry-repo"
    shutil.copytree(source, root)
    made = Pr(root, records)
    yield made
    made.repo.close()


# --------------------------------------------------------------------------- running the review


@dataclass
class Reviewed:
    """The JSON and Markdown of one review, with the exit codes."""

    json_result: Result
    markdown_result: Result
    document: dict[str, Any]

    @property
    def exit_code(self) -> int:
        return self.json_result.exit_code

    @property
    def lint_codes(self) -> list[str]:
        return [lint["code"] for lint in self.document["lints"]]

    @property
    def hint_codes(self) -> list[str]:
        return [hint["code"] for hint in self.document["hints"]]

    @property
    def markdown(self) -> str:
        return self.markdown_result.stdout


def run_review(cli: RunCli, pr: Pr, *extra: str) -> Reviewed:
    """``kictl review --base main`` as JSON and as Markdown; both exit alike and the Markdown renders."""
    args = ("review", "--registry", str(pr.root), "--base", "main", *extra)
    json_result = cli(*args, "--format", "json")
    markdown_result = cli(*args, "--format", "markdown")
    assert json_result.exit_code in (0, 1), json_result.output
    assert markdown_result.exit_code == json_result.exit_code, markdown_result.output
    assert "Traceback" not in json_result.output + markdown_result.output
    import json

    document = json.loads(json_result.stdout)
    assert document["ok"] is (json_result.exit_code == 0), json_result.output
    assert_markdown_renders(markdown_result.stdout)
    return Reviewed(json_result, markdown_result, document)


_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_SEPARATOR = re.compile(r"^\|(\s*:?-{3,}:?\s*\|)+$")


def table_blocks(markdown: str) -> list[list[str]]:
    """Consecutive lines that start with ``|``."""
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in markdown.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return blocks


def cells(line: str) -> list[str]:
    assert line.startswith("|"), line
    assert line.endswith("|"), line
    return _CELL_SPLIT.split(line)[1:-1]


def assert_markdown_renders(markdown: str) -> int:
    """Every table has a header, a separator and rows of as many cells; GFM renders each; returns the count."""
    blocks = table_blocks(markdown)
    for block in blocks:
        assert len(block) >= 3, block
        width = len(cells(block[0]))
        assert _SEPARATOR.match(block[1]), block[1]
        for line in block:
            assert len(cells(line)) == width, (line, width)
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    assert html.count("<table>") == len(blocks), html
    for table in re.findall(r"<table>.*?</table>", html, flags=re.S):
        rows = re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)
        counts = {len(re.findall(r"<t[hd][ >]", row)) for row in rows}
        assert len(counts) == 1, table
    return len(blocks)
