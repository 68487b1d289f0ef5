"""``GitHistory``: the registry's git history through gitpython (the only importer of it): revisions,
changed files,
files at a revision, the commit that first added each file, commits and branches.

Every way git can fail here becomes one ``RegistryError`` (exit 4) whose text names the repository and
says what to do: a damaged or missing object is "the git store of ROOT is corrupt (...)" with the object
git names (``git_failure``), never a traceback, an empty result, or an unknown revision.

It is over 600 lines because it is the one place that speaks git: every read a reader needs (log, diff,
cat-file, merge-base, rev-list) and the failure mapping each shares; split, the mapping would be copied.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

from kictl.errors import NotFoundError, RegistryError, UsageError
from kictl.lookup import closest
from kictl.store.files import write_atomic

if TYPE_CHECKING:
    import git


@functools.cache
def _gitpython() -> ModuleType:
    """gitpython, imported on the first question that needs it: its import alone costs about 0.1 s, which the
    read commands (``current_commit``, ``merged_times`` and the rest below ``GitHistory`` ask git through
    ``subprocess``) and every command that opens a registry without reading its history do not pay."""
    import git  # the one import of gitpython; deferred for start-up (this function's docstring)

    return git


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
    mode: str = "100644"  # the git file mode at head ("000000" when deleted): 120000 a symlink, 160000 a gitlink


_LOG_FORMAT = "%x00%H%x1f%aI%x1f%at%x1f%an%x1f%ae%x1f%s"

#: What to do about a damaged git store (docs/trust.md, "A corrupt git store").
REPAIR_HINT = "`git fsck` says more; restore the damaged objects from another clone (or clone afresh)"

#: git's words for a store it cannot read (a damaged, truncated or missing object), as opposed to a bad request.
_DAMAGE = re.compile(
    r"corrupt|inflate|unable to (?:read|unpack|parse)|bad (?:object|tree|commit)|invalid object"
    r"|broken link|hash mismatch|missing (?:blob|tree|commit|object)|object .* is empty|loose object|packfile"
)


def git_failure(root: Path, action: str, stderr: str) -> RegistryError:
    """The one-line ``RegistryError`` for ``git ACTION`` that failed in ``root`` with ``stderr``.

    A store git cannot read says so and what to do (``REPAIR_HINT``), naming the object and its file as
    git does; any other failure gives git's last line, with the repository it ran in.
    """
    lines = [line.strip().strip("'") for line in stderr.strip().splitlines() if line.strip()]
    damage = next((line for line in reversed(lines) if _DAMAGE.search(line)), None)
    if damage is not None:
        what = damage.removeprefix("fatal: ").removeprefix("error: ")
        return RegistryError(f"the git store of {root} is corrupt (git {action}: {what}); {REPAIR_HINT}")
    last = lines[-1].removeprefix("fatal: ").removeprefix("error: ") if lines else "no message"
    return RegistryError(f"git {action} failed in {root}: {last}")


def _stderr_of(exc: BaseException) -> str:
    """What git said, from a gitpython error (its ``stderr`` holds ``stderr: '...'``), else the error's text."""
    stderr = getattr(exc, "stderr", None)
    if isinstance(stderr, bytes):
        stderr = stderr.decode(errors="replace")
    text = stderr if isinstance(stderr, str) and stderr.strip() else str(exc)
    return text.strip().removeprefix("stderr:").strip().strip("'")


class GitHistory:
    """The questions kictl asks of a registry's git history."""

    def __init__(self, root: Path) -> None:
        gitpython = _gitpython()
        try:
            self.repo: git.Repo = gitpython.Repo(root)
        except (gitpython.InvalidGitRepositoryError, gitpython.NoSuchPathError) as exc:
            raise RegistryError(f"{root} is not a git repository") from exc
        self.root = root

    def _run(self, *args: str, env: dict[str, str] | None = None) -> str:
        gitpython = _gitpython()

        try:
            output: str = self.repo.git.execute(["git", *args], stdout_as_string=True, env=env)
        except gitpython.GitCommandError as exc:
            raise git_failure(self.root, args[0], _stderr_of(exc)) from exc
        except OSError as exc:
            raise RegistryError(f"git {args[0]} could not run in {self.root}: {exc.strerror or exc}") from exc
        return output

    def _damaged(self, action: str, exc: Exception) -> RegistryError:
        """A gitpython error raised while reading objects, as one line (``git_failure``)."""
        return git_failure(self.root, action, _stderr_of(exc) or f"{type(exc).__name__}: corrupt object")

    # ----------------------------------------------------------------- revisions

    def rev_parse(self, rev: str) -> str:
        """The full commit sha of ``rev``; raises ``NotFoundError`` with close names."""
        gitpython = _gitpython()

        try:
            return str(self.repo.commit(rev).hexsha)
        except (gitpython.BadName, gitpython.BadObject, ValueError) as exc:
            damage = store_damage(self.root, rev)
            if damage is not None:
                raise RegistryError(damage) from exc
            names = [ref.name for ref in self.repo.refs]
            near = closest(rev, names)
            details = [f"closest known: {', '.join(near)}"] if near else []
            raise NotFoundError(f"unknown revision {rev!r}", details=details) from exc

    def head(self) -> str | None:
        """The sha of HEAD, or ``None`` in a repository without commits."""
        try:
            return str(self.repo.head.commit.hexsha)
        except ValueError as exc:
            damage = store_damage(self.root, "HEAD")
            if damage is not None:
                raise RegistryError(damage) from exc
            return None

    def merge_base(self, a: str, b: str) -> str:
        """The best common ancestor of ``a`` and ``b``; raises ``RegistryError`` for none or a store git cannot read."""
        gitpython = _gitpython()

        left, right = self.rev_parse(a), self.rev_parse(b)
        try:
            bases = self.repo.merge_base(left, right)
        except (gitpython.GitCommandError, ValueError) as exc:
            raise self._damaged("merge-base", exc) from exc
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
        output = self._run(
            "diff", "--raw", "--no-renames", "--no-abbrev", "-z", self.rev_parse(base), self.rev_parse(head)
        )
        fields = [field for field in output.split("\0") if field]
        changes = []
        for i in range(0, len(fields) - 1, 2):
            meta = fields[i].lstrip(":").split()  # old mode, new mode, old sha, new sha, status
            changes.append(Change(status=meta[4][0], path=fields[i + 1], mode=meta[1]))
        return changes

    def read_file(self, rev: str, path: str) -> bytes | None:
        """The bytes of ``path`` at ``rev``, or ``None`` when it does not exist there."""
        gitpython = _gitpython()

        commit = self.repo.commit(self.rev_parse(rev))
        try:
            blob = commit.tree / path
            if not isinstance(blob, gitpython.Blob):
                return None
            data: bytes = blob.data_stream.read()
        except KeyError:
            return None
        except (gitpython.GitCommandError, gitpython.exc.ODBError, ValueError, OSError) as exc:
            raise self._damaged(f"cat-file {rev}:{path}", exc) from exc
        return data

    def list_files(self, rev: str, prefix: str) -> list[str]:
        """Paths of files under ``prefix`` at ``rev``."""
        output = self._run("ls-tree", "-r", "--name-only", "-z", self.rev_parse(rev), "--", prefix)
        return sorted(path for path in output.split("\0") if path)

    def read_paths(self, rev: str, paths: Sequence[str]) -> dict[str, bytes | None]:
        """The bytes of each of ``paths`` at ``rev`` (``None`` where absent), in one ``git cat-file --batch``.

        Raises ``NotFoundError`` for an unknown revision and ``RegistryError`` when git fails.
        """
        sha = self.rev_parse(rev)
        if not paths:
            return {}
        request = b"".join(f"{sha}:{path}\n".encode("utf-8", "surrogateescape") for path in paths)
        try:
            done = subprocess.run(
                ["git", "-C", str(self.root), "cat-file", "--batch"], input=request, capture_output=True, check=False
            )
        except OSError as exc:
            raise RegistryError(f"git cat-file failed: {exc}") from exc
        if done.returncode != 0:
            raise git_failure(self.root, f"cat-file {rev}", done.stderr.decode(errors="replace"))
        output, position = done.stdout, 0
        found: dict[str, bytes | None] = {}
        damaged = done.stderr.decode(errors="replace")
        for path in paths:
            end = output.index(b"\n", position)
            header = output[position:end].split()
            position = end + 1
            if header[-1] == b"missing" and _DAMAGE.search(damaged):
                # cat-file --batch says "missing" for an object it cannot unpack, and why on stderr
                raise git_failure(self.root, f"cat-file {rev}:{path}", damaged)
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
        gitpython = _gitpython()

        commit = self.repo.commit(self.rev_parse(rev))
        place = prefix
        try:
            try:
                tree = commit.tree / prefix
            except KeyError:
                return
            if not isinstance(tree, gitpython.Tree):
                return
            for item in tree.traverse():
                if isinstance(item, gitpython.Blob):
                    place = str(item.path)
                    yield place, item.data_stream.read()
        except (gitpython.GitCommandError, gitpython.exc.ODBError, ValueError, OSError) as exc:
            raise self._damaged(f"cat-file {rev}:{place}", exc) from exc

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

    def merged_times(self, prefix: str, rev: str = "HEAD") -> dict[str, int]:
        """Per file under ``prefix``: committer time of the commit on ``rev``'s first-parent line that added it.

        docs/trust.md "Signing time": a file merged from a branch counts from
        the merge commit on the main line (its diff against the first parent),
        never from the branch's own commits, whose dates their author chose.
        One ``git log --first-parent``; files not committed yet are absent.
        """
        if self.head() is None:
            return {}
        added = _parse_added(self._run(*_merged_log_args(prefix, rev)))
        return {path: stamp for path, (_, stamp) in added.items()}

    def committer_time(self, rev: str) -> int:
        """Seconds since the epoch at which ``rev`` was committed (%ct, not the author's date)."""
        return int(self._run("log", "-1", "--format=%ct", self.rev_parse(rev)).strip())

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
        gitpython = _gitpython()

        try:
            self.repo.index.add(list(paths))
            commit = self.repo.index.commit(message)
        except (gitpython.GitCommandError, OSError) as exc:
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
        gitpython = _gitpython()

        if not name or name.startswith("-") or name.startswith("@") or name == "HEAD":
            raise UsageError(f"{name!r} is not a valid branch name")
        try:
            self.repo.git.execute(["git", "check-ref-format", "--branch", name])
        except gitpython.GitCommandError as exc:
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
    gitpython = _gitpython()

    try:
        repo = gitpython.Repo.init(root, initial_branch="main")
    except gitpython.GitCommandError as exc:
        raise RegistryError(f"git init failed in {root}: {exc}") from exc
    for relative, data in files.items():
        write_atomic(root / relative, data)
    history = GitHistory(root)
    del repo
    return history.commit(sorted(files), message)


_T = TypeVar("_T")

#: Answers of the read functions below, per repository held still by ``held_still`` (its root -> call -> answer).
_HELD: dict[str, dict[tuple[str, ...], object]] = {}


@contextlib.contextmanager
def held_still(root: Path) -> Iterator[None]:
    """Within the block, ``current_commit``, ``merged_times``, ``added_on_main_line``, ``public_location`` and
    ``kictl.store.derived.tracked_derived_files`` of ``root`` answer each question once: the caller reads the
    repository as of one moment and promises not to change it meanwhile.

    A site build asks these for every page (a run's signing times, the advisories' history): 4,000 ``git``
    processes and a third of its time before they were held (docs/site.md).  Nested blocks share the outer
    block's answers; outside any block every call asks git.
    """
    key = str(root.resolve())
    if key in _HELD:
        yield
        return
    _HELD[key] = {}
    try:
        yield
    finally:
        del _HELD[key]


def _held(root: Path, question: tuple[str, ...], ask: Callable[[], _T]) -> _T:
    """``ask()``, answered once per question while ``root`` is held still (``held_still``)."""
    answers = _HELD.get(str(root.resolve())) if _HELD else None
    if answers is None:
        return ask()
    if question not in answers:
        answers[question] = ask()
    answer: _T = answers[question]  # type: ignore[assignment]
    return answer


def _merged_log_args(prefix: str, rev: str) -> tuple[str, ...]:
    return (
        "log", "--first-parent", "--diff-merges=first-parent", "--reverse", "--diff-filter=A",
        "--name-only", "--no-renames", "--format=%x00%H%x1f%ct", rev, "--", prefix,
    )  # fmt: skip


def merged_times(root: Path, prefix: str, rev: str = "HEAD") -> dict[str, int]:
    """``GitHistory.merged_times`` of the repository at ``root``, without gitpython (read commands' path).

    ``{}`` without a repository or a commit; raises ``RegistryError`` when git fails.  Asked once while
    ``root`` is held still (a copy each time: callers may change what they get).
    """
    return {path: stamp for path, (_, stamp) in added_on_main_line(root, prefix, rev).items()}


def added_on_main_line(root: Path, prefix: str, rev: str = "HEAD") -> dict[str, tuple[str, int]]:
    """Every file under ``prefix`` ever added on ``rev``'s first-parent line: path -> (that commit, its time).

    Like ``merged_times``, and it keeps files deleted since: the registry is append-only, so a path here that
    the tree no longer holds was deleted (``kictl.advisories.memory``).  ``{}`` without a repository or a
    commit; raises ``RegistryError`` when git fails.  Asked once while ``root`` is held still.
    """
    return dict(_held(root, ("added", prefix, rev), lambda: _added_on_main_line(root, prefix, rev)))


def _added_on_main_line(root: Path, prefix: str, rev: str) -> dict[str, tuple[str, int]]:
    if current_commit(root) is None:
        return {}
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *_merged_log_args(prefix, rev)], capture_output=True, text=True, check=False
        )
    except OSError as exc:
        raise RegistryError(f"git log failed: {exc}") from exc
    if done.returncode != 0:
        raise git_failure(root, "log", done.stderr)
    return _parse_added(done.stdout)


def _parse_added(output: str) -> dict[str, tuple[str, int]]:
    """The output of ``_merged_log_args``'s log: path -> (the main-line commit that added it, its time)."""
    added: dict[str, tuple[str, int]] = {}
    for chunk in output.split("\0"):
        if not chunk.strip():
            continue
        header, _, rest = chunk.partition("\n")
        sha, stamp = header.split("\x1f", 1)
        for path in rest.splitlines():
            if path.strip():
                added.setdefault(path, (sha, int(stamp)))
    return added


def ever_touched(root: Path, prefix: str) -> bool:
    """Whether any commit reachable from HEAD touched a file under ``prefix`` (one ``git rev-list``, stopping at the
    first, asked once per commit and process); ``False`` without a repository or a commit.  Raises
    ``RegistryError`` when git fails."""
    head = current_commit(root)
    return head is not None and _touched(str(root), head, prefix)


@functools.lru_cache(maxsize=32)
def _touched(root: str, head: str, prefix: str) -> bool:
    try:
        done = subprocess.run(
            ["git", "-C", root, "rev-list", "-1", head, "--", prefix], capture_output=True, text=True, check=False
        )
    except OSError as exc:
        raise RegistryError(f"git rev-list failed: {exc}") from exc
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise RegistryError(f"git rev-list failed: {lines[-1] if lines else done.returncode}")
    return bool(done.stdout.strip())


def read_blobs(root: Path, wanted: Sequence[tuple[str, str]]) -> dict[tuple[str, str], bytes | None]:
    """The bytes of each ``(commit, path)`` in ``wanted`` (``None`` where git has none), in one ``cat-file --batch``.

    Raises ``RegistryError`` when git cannot run.
    """
    if not wanted:
        return {}
    request = b"".join(f"{sha}:{path}\n".encode("utf-8", "surrogateescape") for sha, path in wanted)
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "cat-file", "--batch"], input=request, capture_output=True, check=False
        )
    except OSError as exc:
        raise RegistryError(f"git cat-file failed: {exc}") from exc
    if done.returncode != 0:
        raise RegistryError(f"git cat-file failed: {done.stderr.decode(errors='replace').strip()}")
    output, position = done.stdout, 0
    found: dict[tuple[str, str], bytes | None] = {}
    for item in wanted:
        end = output.index(b"\n", position)
        header = output[position:end].split()
        position = end + 1
        if header[-1] == b"missing" or len(header) < 3:
            found[item] = None
            continue
        size = int(header[2])
        found[item] = output[position : position + size] if header[1] == b"blob" else None
        position += size + 1
    return found


def store_damage(root: Path, rev: str) -> str | None:
    """One line saying the git store at ``root`` is corrupt, when ``rev`` names an object git cannot read;
    ``None`` when it is not (or ``rev`` names nothing).  Never raises.

    ``rev-parse --verify`` without peeling reads only the refs; peeling to the
    commit reads the object.  A name that resolves but does not peel is a store
    with missing or damaged objects, not an unknown revision or an empty
    repository.
    """

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)

    try:
        named = git("rev-parse", "--verify", "-q", rev)
        if named.returncode != 0 or not named.stdout.strip():
            target = git("symbolic-ref", "-q", rev).stdout.strip() if rev == "HEAD" else rev
            return _broken_ref(root, target or rev, git("for-each-ref", "--format=%(refname)").stderr)
        peeled = git("cat-file", "-e", f"{named.stdout.strip()}^{{commit}}")
    except OSError:
        return None
    if peeled.returncode == 0:
        return None
    lines = [line for line in peeled.stderr.strip().splitlines() if line.strip()]
    fatal = next((line for line in reversed(lines) if "corrupt" in line or "missing" in line), None)
    reason = (fatal or (lines[-1] if lines else "its commit cannot be read")).removeprefix("fatal: ")
    return f"the git store of {root} is corrupt ({rev} = {named.stdout.strip()[:12]}: {reason}); {REPAIR_HINT}"


def _broken_ref(root: Path, rev: str, warnings: str) -> str | None:
    """The damage line when ``rev`` (or the name it starts from, as in ``pr~1``) is a ref git ignores as broken."""
    name = re.split(r"[~^@:]", rev, maxsplit=1)[0]
    broken = re.findall(r"ignoring broken ref (\S+)", warnings)
    for ref in broken:
        if name and ref in (name, f"refs/heads/{name}", f"refs/tags/{name}", f"refs/remotes/{name}"):
            return (
                f"the git store of {root} is corrupt (the ref {ref} is broken: .git/{ref} names no object git "
                f"can read); {REPAIR_HINT}"
            )
    return None


def public_location(root: Path) -> str:
    """Where others find the repository at ``root``: its ``origin`` remote's URL without credentials, else its path.

    Never raises (a registry without git, or a remote git cannot read, is its path).  Asked once while ``root``
    is held still (a site build cites every run).
    """
    return _held(root, ("public-location",), lambda: _public_location(root))


def _public_location(root: Path) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "remote", "get-url", "origin"], capture_output=True, text=True, check=False
        )
    except OSError:
        done = None
    url = done.stdout.strip() if done is not None and done.returncode == 0 else ""
    if not url:
        return str(root.resolve())
    return re.sub(r"^(\w+://)[^/@]*@", r"\1", url)  # https://user:token@host/... -> https://host/...


def current_commit(root: Path) -> str | None:
    """The sha of HEAD in the git repository at ``root``, or ``None`` (no repository or no commit yet).

    Raises ``RegistryError`` (exit 4) for a ``.git`` that git cannot open.

    Runs ``git rev-parse`` without gitpython, whose import alone costs a quarter of a
    second, so that read commands can check whether a cache is current cheaply; once while ``root`` is
    held still (``held_still``).
    """
    return _held(root, ("head",), lambda: _current_commit(root))


def _current_commit(root: Path) -> str | None:
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
    if done.returncode == 0 and sha:
        return sha
    damage = store_damage(root, "HEAD")
    if damage is not None:  # HEAD names a commit git cannot read: never read that as "no commit yet"
        raise RegistryError(damage)
    probe = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--git-dir"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:  # a .git that git cannot open: say so, never read it as "no commit yet"
        lines = probe.stderr.strip().splitlines()
        raise RegistryError(f"{root}/.git is damaged: {lines[-1] if lines else 'git cannot open it'}")
    return None
