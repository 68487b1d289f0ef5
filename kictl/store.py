"""The registry on disk and in git (docs/records.md); the only importer of gitpython.

Its paths come from ``kictl.layout`` (the one place that names them); this
module joins them onto a checkout and reads and writes the files.

Writes are atomic (a temporary file in the same folder, then a rename) and
idempotent: writing bytes a path already holds is a no-op, and a published
path is never overwritten with different bytes.  A batch of writes that fails
part-way removes what it created, so the registry is left as it was.

``Registry.git`` reads history through gitpython: the revisions, the files a
change touched, a file's bytes at a revision and the commit that first added
each file (the signing time of attestations, the history of records).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kictl import canon, layout
from kictl.errors import NotFoundError, RecordError, RegistryError, UsageError
from kictl.layout import (
    ATTESTATIONS_DIR,
    BLOBS_DIR,
    DEFINITIONS_DIR,
    KICTL_DIR,
    POLICY_FILE,
    RECORDS_DIR,
    REGISTRY_DIR,
    TRUST_DIR,
)
from kictl.lookup import Match, closest, resolve
from kictl.policy import Policy, load_policy
from kictl.records import KINDS, StoredRecord, record_from_bytes

if TYPE_CHECKING:
    import git

ENV_VAR = "KICTL_REGISTRY"


# --------------------------------------------------------------------------- locating


def find_root(explicit: Path | None = None, *, cwd: Path | None = None) -> Path:
    """The registry root: ``explicit``, else ``$KICTL_REGISTRY``, else the nearest
    folder upwards from ``cwd`` that has a ``registry/`` folder.

    Raises ``RegistryError`` when none is found or the one named has no ``registry/``.
    """
    if explicit is not None:
        return _checked_root(explicit, "--registry")
    from_env = os.environ.get(ENV_VAR)
    if from_env:
        return _checked_root(Path(from_env), f"${ENV_VAR}")
    start = (cwd or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / REGISTRY_DIR).is_dir():
            return folder
    raise RegistryError(
        f"no registry found from {start} upwards (no registry/ folder); "
        f"pass --registry DIR, set ${ENV_VAR}, or create one with `kictl init DIR`"
    )


def _checked_root(path: Path, origin: str) -> Path:
    root = path.expanduser().resolve()
    if not (root / REGISTRY_DIR).is_dir():
        raise RegistryError(f"{origin} {path} is not a registry (it has no registry/ folder)")
    return root


# --------------------------------------------------------------------------- atomic files


def write_atomic(path: Path, data: bytes, *, mode: int = 0o644) -> bool:
    """Write ``data`` to ``path`` through a temporary file and a rename.

    Returns ``True`` when the file was created or replaced, ``False`` when it
    already held exactly these bytes.  Raises ``RegistryError`` on I/O errors.
    """
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp_name, mode)
            os.replace(tmp_name, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
            raise
    except OSError as exc:
        raise RegistryError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    return True


def write_immutable(path: Path, data: bytes) -> bool:
    """Publish ``data`` at ``path`` unless it is there already.

    Returns ``True`` when created, ``False`` when the same bytes were there.
    Raises ``RegistryError`` when ``path`` holds other bytes: published files
    are never modified.
    """
    if path.exists():
        try:
            existing = path.read_bytes()
        except OSError as exc:
            raise RegistryError(f"{path}: cannot read: {exc.strerror}") from exc
        if existing == data:
            return False
        raise RegistryError(
            f"{path} is already published with other bytes; published files are never modified "
            "(metadata changes need a new record)"
        )
    return write_atomic(path, data)


class Transaction:
    """A batch of immutable writes that is undone as a whole if any write fails."""

    def __init__(self) -> None:
        self.created: list[Path] = []

    def write(self, path: Path, data: bytes) -> bool:
        created = write_immutable(path, data)
        if created:
            self.created.append(path)
        return created

    def rollback(self) -> None:
        for path in reversed(self.created):
            with contextlib.suppress(OSError):
                path.unlink()
        self.created.clear()

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc is not None:
            self.rollback()


# --------------------------------------------------------------------------- the registry


@dataclass(frozen=True, slots=True)
class AddResult:
    """What ``Registry.add`` did with one record."""

    record: StoredRecord
    path: Path
    created: bool
    dangling: tuple[str, ...]


class Registry:
    """A registry checkout: paths, reads and atomic writes of records and blobs."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def locate(cls, explicit: Path | None = None) -> Registry:
        """The registry named by ``--registry``, ``$KICTL_REGISTRY`` or the folders above."""
        return cls(find_root(explicit))

    # ----------------------------------------------------------------- paths

    @property
    def records_dir(self) -> Path:
        return self.root / RECORDS_DIR

    @property
    def attestations_dir(self) -> Path:
        return self.root / ATTESTATIONS_DIR

    @property
    def blobs_dir(self) -> Path:
        return self.root / BLOBS_DIR

    @property
    def trust_dir(self) -> Path:
        return self.root / TRUST_DIR

    @property
    def definitions_dir(self) -> Path:
        return self.root / DEFINITIONS_DIR

    @property
    def policy_path(self) -> Path:
        return self.root / POLICY_FILE

    @property
    def kictl_dir(self) -> Path:
        """Derived data (query index, caches): never committed."""
        return self.root / KICTL_DIR

    def relative(self, path: Path) -> str:
        """``path`` relative to the root, with forward slashes."""
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def record_path(self, kind: str, digest: str) -> Path:
        return self.root / layout.record_path(kind, canon.digest_hex(digest))

    def blob_path(self, digest: str) -> Path:
        return self.root / layout.blob_path(canon.digest_hex(digest))

    def attestation_folder(self, digest: str) -> Path:
        return self.root / layout.attestation_folder(canon.digest_hex(digest))

    def policy(self) -> Policy:
        return load_policy(self.policy_path)

    # ----------------------------------------------------------------- reading

    def record_files(self, kinds: Iterable[str] = KINDS) -> Iterator[tuple[str, Path]]:
        """``(kind folder, path)`` of every ``*.json`` under ``registry/records/``, sorted."""
        for kind in kinds:
            kind_dir = self.records_dir / kind
            if not kind_dir.is_dir():
                continue
            for shard in sorted(os.scandir(kind_dir), key=lambda entry: entry.name):
                if not shard.is_dir():
                    continue
                for entry in sorted(os.scandir(shard.path), key=lambda entry: entry.name):
                    if entry.name.endswith(".json") and entry.is_file():
                        yield kind, Path(entry.path)

    def record_file_entries(self, kinds: Iterable[str] = KINDS) -> Iterator[tuple[str, str, str]]:
        """``(kind folder, path relative to the root, absolute path)`` of every record file, sorted.

        The same files as ``record_files``, as strings, for passes over many records.
        """
        for kind in kinds:
            kind_dir = os.path.join(self.records_dir, kind)
            if not os.path.isdir(kind_dir):
                continue
            for shard in sorted(os.listdir(kind_dir)):
                shard_dir = os.path.join(kind_dir, shard)
                if not os.path.isdir(shard_dir):
                    continue
                for name in sorted(os.listdir(shard_dir)):
                    if name.endswith(".json"):
                        yield kind, f"{RECORDS_DIR}/{kind}/{shard}/{name}", os.path.join(shard_dir, name)

    def stray_record_paths(self) -> list[Path]:
        """Files under ``registry/records/`` outside the ``<kind>/<xx>/<hex>.json`` layout."""
        base = str(self.records_dir)
        stray = []
        for dirpath, _, filenames in os.walk(base):
            parts = os.path.relpath(dirpath, base).split(os.sep)
            depth = 0 if parts == ["."] else len(parts)
            for name in filenames:
                if depth != 2 or parts[0] not in KINDS or not name.endswith(".json"):
                    stray.append(Path(dirpath) / name)
        return sorted(stray)

    def read_record(self, path: Path) -> StoredRecord:
        """Parse and validate one record file (not its name; see ``validate``)."""
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise RegistryError(f"{self.relative(path)}: cannot read: {exc.strerror}") from exc
        return record_from_bytes(data, source=self.relative(path))

    def iter_records(self, kinds: Iterable[str] = KINDS) -> Iterator[StoredRecord]:
        """Every record of the given kinds; raises ``RecordError`` on the first bad file."""
        for _, path in self.record_files(kinds):
            yield self.read_record(path)

    def has_record(self, digest: str) -> bool:
        return any(self.record_path(kind, digest).is_file() for kind in KINDS)

    def digest_kind(self, digest: str) -> str | None:
        """The kind of the record with this full digest, or ``None``."""
        for kind in KINDS:
            if self.record_path(kind, digest).is_file():
                return kind
        return None

    def load(self, digest: str) -> StoredRecord:
        """The record with this full digest; raises ``NotFoundError``."""
        kind = self.digest_kind(digest)
        if kind is None:
            raise NotFoundError(f"no record {digest} in {self.root}")
        return self.read_record(self.record_path(kind, digest))

    def resolve_prefix(self, text: str, kinds: Iterable[str] = KINDS) -> list[str]:
        """Full digests of records whose hex starts with ``text`` (with or without ``sha256:``)."""
        prefix = text.removeprefix(canon.DIGEST_PREFIX).lower()
        if len(prefix) < 2 or any(char not in "0123456789abcdef" for char in prefix):
            return []
        found = []
        for kind in kinds:
            shard = self.root / layout.record_shard(kind, prefix)
            if not shard.is_dir():
                continue
            for entry in os.scandir(shard):
                if entry.name.endswith(".json") and entry.name.startswith(prefix):
                    found.append(canon.DIGEST_PREFIX + entry.name[:-5])
        return sorted(found)

    def resolve(self, ref: str, kinds: Sequence[str] = KINDS) -> StoredRecord:
        """A record by full digest, by a unique prefix of 8+ hex digits, or by name (``kictl.lookup``).

        Names are looked up among records of ``kinds``.  Raises
        ``NotFoundError`` (exit 3) for unknown or ambiguous references, with the
        candidates or the closest known names.
        """
        what = "/".join(kinds) if len(kinds) < len(KINDS) else "record"
        catalogue = _FileCatalogue(self, kinds)
        match = resolve(ref, catalogue, what=what)
        return catalogue.read.get(match.digest) or self.load(match.digest)

    # ----------------------------------------------------------------- writing

    def add(self, records: Sequence[StoredRecord], *, transaction: Transaction | None = None) -> list[AddResult]:
        """Store records (already validated); all or nothing.

        A record whose references are not in the registry (nor in this batch)
        is stored all the same and its result names the dangling digests.
        Raises ``RegistryError`` when a path already holds other bytes.
        """
        batch = {record.digest for record in records}
        own = transaction or Transaction()
        results = []
        try:
            for record in records:
                path = self.record_path(record.kind, record.digest)
                created = own.write(path, canon.pretty_bytes(record.raw))
                dangling = tuple(
                    digest
                    for _, digest, _ in record.references()
                    if digest not in batch and not self.has_record(digest)
                )
                results.append(AddResult(record=record, path=path, created=created, dangling=dangling))
        except BaseException:
            if transaction is None:
                own.rollback()
            raise
        return results

    def add_blob(self, data: bytes, *, transaction: Transaction | None = None) -> str:
        """Store raw bytes under their digest and return it."""
        digest = canon.bytes_digest(data)
        path = self.blob_path(digest)
        if transaction is None:
            write_immutable(path, data)
        else:
            transaction.write(path, data)
        return digest

    def read_blob(self, digest: str) -> bytes:
        path = self.blob_path(digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError as exc:
            raise NotFoundError(f"no blob {digest} in {self.root}") from exc
        except OSError as exc:
            raise RegistryError(f"{self.relative(path)}: cannot read: {exc.strerror}") from exc
        if canon.bytes_digest(data) != digest:
            raise RecordError(f"{self.relative(path)}: bytes do not match the blob's name")
        return data

    # ----------------------------------------------------------------- git

    @cached_property
    def git(self) -> GitHistory:
        """The git history of the registry; raises ``RegistryError`` if it is no repository."""
        return GitHistory(self.root)

    def is_git_repository(self) -> bool:
        return (self.root / ".git").exists()


class _FileCatalogue:
    """The records under ``registry/records/``, for ``kictl.lookup.resolve``."""

    def __init__(self, registry: Registry, kinds: Sequence[str]) -> None:
        self.registry = registry
        self.kinds = kinds
        self._named: list[Match] | None = None
        self.read: dict[str, StoredRecord] = {}  # what the name search read, by the digest of its bytes

    def _all(self) -> list[Match]:
        if self._named is None:
            self.read = {r.digest: r for r in self.registry.iter_records(self.kinds)}
            self._named = [Match(r.digest, r.name, r.kind) for r in self.read.values()]
        return self._named

    def by_digest_prefix(self, hex_prefix: str) -> list[Match]:
        found = []
        for digest in self.registry.resolve_prefix(hex_prefix, self.kinds):
            kind = self.registry.digest_kind(digest) or ""
            found.append(Match(digest, "", kind))
        return found

    def by_name(self, name: str) -> list[Match]:
        return [m for m in self._all() if m.name == name]

    def by_name_prefix(self, prefix: str) -> list[Match]:
        return [m for m in self._all() if m.name.startswith(prefix)]

    def names(self) -> list[str]:
        return [m.name for m in self._all()]


# --------------------------------------------------------------------------- git


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """A commit as history reports it."""

    sha: str
    date: str  # RFC 3339 with the author's offset, as git prints it (%aI)
    timestamp: int  # seconds since the epoch (author time)
    author: str
    email: str
    subject: str


@dataclass(frozen=True, slots=True)
class Change:
    """A file a change touched: ``status`` is A (added), M (modified), D (deleted) or T."""

    status: str
    path: str


_LOG_FORMAT = "%x00%H%x1f%aI%x1f%at%x1f%an%x1f%ae%x1f%s"


class GitHistory:
    """The questions kictl asks of a registry's git history."""

    def __init__(self, root: Path) -> None:
        try:
            import git
        except ImportError as exc:  # pragma: no cover - gitpython is a dependency
            raise RegistryError("gitpython is not installed") from exc
        try:
            self.repo: git.Repo = git.Repo(root)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
            raise RegistryError(f"{root} is not a git repository") from exc
        self.root = root

    def _run(self, *args: str, env: dict[str, str] | None = None) -> str:
        import git

        try:
            output: str = self.repo.git.execute(["git", *args], stdout_as_string=True, env=env)
        except git.GitCommandError as exc:
            stderr = (exc.stderr or "").strip().splitlines()
            raise RegistryError(f"git {args[0]} failed: {stderr[-1] if stderr else exc}") from exc
        return output

    # ----------------------------------------------------------------- revisions

    def rev_parse(self, rev: str) -> str:
        """The full commit sha of ``rev``; raises ``NotFoundError`` with close names."""
        import git

        try:
            return str(self.repo.commit(rev).hexsha)
        except (git.BadName, git.BadObject, ValueError) as exc:
            names = [ref.name for ref in self.repo.refs]
            near = closest(rev, names)
            details = [f"closest known: {', '.join(near)}"] if near else []
            raise NotFoundError(f"unknown revision {rev!r}", details=details) from exc

    def head(self) -> str | None:
        """The sha of HEAD, or ``None`` in a repository without commits."""
        try:
            return str(self.repo.head.commit.hexsha)
        except ValueError:
            return None

    def merge_base(self, a: str, b: str) -> str:
        bases = self.repo.merge_base(self.rev_parse(a), self.rev_parse(b))
        if not bases:
            raise RegistryError(f"{a} and {b} have no common ancestor")
        return str(bases[0].hexsha)

    def current_branch(self) -> str | None:
        try:
            return str(self.repo.active_branch.name)
        except TypeError:
            return None  # detached HEAD

    def branch_exists(self, name: str) -> bool:
        return name in [head.name for head in self.repo.heads]

    def is_dirty(self) -> bool:
        """Uncommitted changes to tracked files, or untracked files that are not ignored."""
        return bool(self.repo.is_dirty(untracked_files=True))

    def status_lines(self) -> list[str]:
        return [line for line in self._run("status", "--porcelain").splitlines() if line]

    # ----------------------------------------------------------------- contents

    def changed_files(self, base: str, head: str) -> list[Change]:
        """Files that differ between two commits, renames shown as delete and add."""
        output = self._run("diff", "--name-status", "--no-renames", "-z", self.rev_parse(base), self.rev_parse(head))
        fields = [field for field in output.split("\0") if field]
        return [Change(status=fields[i][0], path=fields[i + 1]) for i in range(0, len(fields) - 1, 2)]

    def read_file(self, rev: str, path: str) -> bytes | None:
        """The bytes of ``path`` at ``rev``, or ``None`` when it does not exist there."""
        import git

        commit = self.repo.commit(self.rev_parse(rev))
        try:
            blob = commit.tree / path
        except KeyError:
            return None
        if not isinstance(blob, git.Blob):
            return None
        data: bytes = blob.data_stream.read()
        return data

    def list_files(self, rev: str, prefix: str) -> list[str]:
        """Paths of files under ``prefix`` at ``rev``."""
        output = self._run("ls-tree", "-r", "--name-only", "-z", self.rev_parse(rev), "--", prefix)
        return sorted(path for path in output.split("\0") if path)

    def read_paths(self, rev: str, paths: Sequence[str]) -> dict[str, bytes | None]:
        """The bytes of each of ``paths`` at ``rev`` (``None`` where absent), in one ``git cat-file --batch``.

        Raises ``NotFoundError`` for an unknown revision and ``RegistryError`` when git fails.
        """
        import subprocess

        sha = self.rev_parse(rev)
        if not paths:
            return {}
        request = b"".join(f"{sha}:{path}\n".encode() for path in paths)
        try:
            done = subprocess.run(
                ["git", "-C", str(self.root), "cat-file", "--batch"], input=request, capture_output=True, check=False
            )
        except OSError as exc:
            raise RegistryError(f"git cat-file failed: {exc}") from exc
        if done.returncode != 0:
            raise RegistryError(f"git cat-file failed: {done.stderr.decode(errors='replace').strip()}")
        output, position = done.stdout, 0
        found: dict[str, bytes | None] = {}
        for path in paths:
            end = output.index(b"\n", position)
            header = output[position:end].split()
            position = end + 1
            if header[-1] == b"missing" or header[1] != b"blob":
                found[path] = None
                if header[-1] != b"missing":
                    position += int(header[2]) + 1
                continue
            size = int(header[2])
            found[path] = output[position : position + size]
            position += size + 1
        return found

    def read_files(self, rev: str, prefix: str) -> Iterator[tuple[str, bytes]]:
        """``(path, bytes)`` of every file under ``prefix`` at ``rev``, in one pass over the tree."""
        import git

        commit = self.repo.commit(self.rev_parse(rev))
        try:
            tree = commit.tree / prefix
        except KeyError:
            return
        if not isinstance(tree, git.Tree):
            return
        for item in tree.traverse():
            if isinstance(item, git.Blob):
                yield str(item.path), item.data_stream.read()

    # ----------------------------------------------------------------- history

    def _parse_log(self, output: str) -> Iterator[tuple[CommitInfo, list[str]]]:
        for chunk in output.split("\0"):
            if not chunk.strip():
                continue
            header, _, rest = chunk.partition("\n")
            sha, date, stamp, author, email, subject = header.split("\x1f", 5)
            info = CommitInfo(sha=sha, date=date, timestamp=int(stamp), author=author, email=email, subject=subject)
            paths = [line for line in rest.splitlines() if line.strip()]
            yield info, paths

    def first_added(self, prefix: str, rev: str = "HEAD") -> dict[str, CommitInfo]:
        """For every file under ``prefix``, the oldest commit (reachable from ``rev``) that added it.

        One ``git log`` over the history; files not committed yet are absent.
        """
        if self.head() is None:
            return {}
        output = self._run(
            "log", "--reverse", "--diff-filter=A", "--name-only", "--no-renames",
            f"--format={_LOG_FORMAT}", rev, "--", prefix,
        )  # fmt: skip
        added: dict[str, CommitInfo] = {}
        for info, paths in self._parse_log(output):
            for path in paths:
                added.setdefault(path, info)
        return added

    def commits(self, rev: str = "HEAD", paths: Sequence[str] = ()) -> list[CommitInfo]:
        """Commits reachable from ``rev`` touching ``paths`` (all when empty), oldest first."""
        if self.head() is None:
            return []
        output = self._run("log", "--reverse", f"--format={_LOG_FORMAT}", rev, "--", *paths)
        return [info for info, _ in self._parse_log(output)]

    def commit_info(self, rev: str) -> CommitInfo:
        output = self._run("log", "-1", f"--format={_LOG_FORMAT}", self.rev_parse(rev))
        return next(info for info, _ in self._parse_log(output))

    # ----------------------------------------------------------------- writing

    def commit(self, paths: Sequence[str], message: str) -> str:
        """Stage ``paths`` (relative to the root) and commit; returns the new sha."""
        import git

        try:
            self.repo.index.add(list(paths))
            commit = self.repo.index.commit(message)
        except (git.GitCommandError, OSError) as exc:
            raise RegistryError(f"git commit failed: {exc}") from exc
        return str(commit.hexsha)

    def create_branch(self, name: str, start: str = "HEAD") -> None:
        self._run("branch", name, self.rev_parse(start))

    def delete_branch(self, name: str) -> None:
        self._run("branch", "-D", name)

    def checkout(self, name: str) -> None:
        self._run("checkout", "-q", name)

    def reset_hard(self, rev: str) -> None:
        self._run("reset", "-q", "--hard", rev)

    def push(self, remote: str, branch: str) -> None:
        self._run("push", remote, f"{branch}:{branch}")

    # ----------------------------------------------------------------- new branches

    def check_branch_name(self, name: str) -> None:
        """Raises ``UsageError`` unless ``name`` is a valid new branch name (``git check-ref-format --branch``)."""
        import git

        if not name or name.startswith("-") or name.startswith("@") or name == "HEAD":
            raise UsageError(f"{name!r} is not a valid branch name")
        try:
            self.repo.git.execute(["git", "check-ref-format", "--branch", name])
        except git.GitCommandError as exc:
            raise UsageError(f"{name!r} is not a valid branch name (git check-ref-format)") from exc

    def remote_names(self) -> list[str]:
        """The names of the configured remotes, sorted."""
        return sorted(str(remote.name) for remote in self.repo.remotes)

    def commit_on_new_branch(self, branch: str, paths: Sequence[str], message: str, *, start: str = "HEAD") -> str:
        """Commit the working-tree files ``paths`` on top of ``start`` as the new branch ``branch``.

        The commit is built in a temporary index (``GIT_INDEX_FILE``), so HEAD,
        the index and the working tree are left exactly as they are; the branch
        is created only if it does not exist yet (``git update-ref`` with an
        empty old value).  Returns the new commit's sha.  Raises
        ``RegistryError`` when git fails (no identity, the branch exists, ...).
        """
        base = self.rev_parse(start)
        with tempfile.TemporaryDirectory(prefix="kictl-commit-") as folder:
            env = {"GIT_INDEX_FILE": os.path.join(folder, "index")}
            self._run("read-tree", base, env=env)
            for first in range(0, len(paths), 256):
                self._run("update-index", "--add", "--", *paths[first : first + 256], env=env)
            tree = self._run("write-tree", env=env).strip()
            message_path = Path(folder) / "message"
            message_path.write_text(message if message.endswith("\n") else message + "\n", encoding="utf-8")
            sha = self._run("commit-tree", tree, "-p", base, "-F", str(message_path)).strip()
        self._run("update-ref", "-m", f"kictl: create {branch}", f"refs/heads/{branch}", sha, "")
        return sha


def init_repository(root: Path, files: dict[str, bytes], message: str) -> str:
    """Create a git repository at ``root`` holding ``files`` in a first commit."""
    import git

    try:
        repo = git.Repo.init(root, initial_branch="main")
    except git.GitCommandError as exc:
        raise RegistryError(f"git init failed in {root}: {exc}") from exc
    for relative, data in files.items():
        write_atomic(root / relative, data)
    history = GitHistory(root)
    del repo
    return history.commit(sorted(files), message)


def current_commit(root: Path) -> str | None:
    """The sha of HEAD in the git repository at ``root``, or ``None`` (no repository or no commit yet).

    Runs ``git rev-parse`` without gitpython, whose import alone costs a quarter of a
    second, so that read commands can check whether a cache is current cheaply.
    """
    import subprocess

    if not (root / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--verify", "-q", "HEAD^{commit}"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return None
    sha = done.stdout.strip()
    return sha if done.returncode == 0 and sha else None


def parse_json_file(path: Path, *, source: str | None = None) -> Any:
    """Read and strictly parse a JSON file; raises ``RegistryError`` or ``RecordError``."""
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise RegistryError(f"{source or path}: no such file") from exc
    except IsADirectoryError as exc:
        raise RegistryError(f"{source or path}: is a folder, not a file") from exc
    except OSError as exc:
        raise RegistryError(f"{source or path}: cannot read: {exc.strerror}") from exc
    return canon.parse_json(data, source=source or str(path))


def read_record_inputs(paths: Sequence[Path], *, stdin: bytes | None = None) -> list[StoredRecord]:
    """Records from files given on the command line.

    Each file holds one record, a JSON list of records or a manifest; a folder
    contributes every ``*.json`` below it; ``-`` is standard input (``stdin``).
    Every record is validated before any is returned: the error lists every
    problem (``RecordError``), or names the unreadable file (``RegistryError``).
    """
    from kictl.records import record_from_value, records_in_document

    documents: list[tuple[str, bytes]] = []
    for path in paths:
        if str(path) == "-":
            documents.append(("<stdin>", stdin if stdin is not None else b""))
        elif path.is_dir():
            for child in sorted(path.rglob("*.json")):
                documents.append((str(child), _read_input(child)))
        else:
            documents.append((str(path), _read_input(path)))
    problems: list[str] = []
    found: list[StoredRecord] = []
    for source, data in documents:
        try:
            value = canon.parse_json(data, source=source)
            for label, item in records_in_document(value, source=source):
                found.append(record_from_value(item, source=label))
        except RecordError as exc:
            problems.extend([exc.message, *exc.details])
    if problems:
        raise RecordError(problems[0], details=problems[1:])
    return found


def _read_input(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise UsageError(f"{path}: no such file") from exc
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read: {exc.strerror}") from exc
