"""Answers of read commands kept for the registry's state: a warm ``kictl leaderboard`` (issues 30, 44).

A leaderboard is a pure function of the registry's files, the trust anchors, kictl's code, the command
line and the clock. Computing it means importing the record models and judging every attestation
(``kictl.rank``, ``kictl.trust``), about three times what starting the CLI costs. So its output is kept
under ``.kictl/answers/<key>.json``, derived data like the query index, and printed again while
nothing it depends on has changed.

It is printed output, so it is kept here, where output is made: the command table (``kictl.cli``) asks
``answered`` before it imports a kept command's module, and the command says ``made`` once it printed its
whole answer.  A hit imports neither the command's module nor anything below it.

* **The key** is the sha256 of everything but the clock (``state_key``): the command line as typed (the
  command, its arguments and the root options) and ``KICTL_VERBOSE``; whether stdout and stderr are
  terminals and the terminal's width; kictl's version and the size and modification time of every file
  of the package (its code and the anchors pinned in it); HEAD; the
  modification time of every folder and the size and time of every file under ``registry/`` (a file
  rewritten in place is a new state, though its folder's time stays); the files of
  ``.kictl/`` but the index and these answers (the anchor state); the user's config folder, its path and
  its files (``kictl trust pin``).  A time within two seconds of now is not trusted (the same
  "racy" rule as the index and git): nothing is read or kept then.
* **The clock**: each answer says until when it holds (``valid_until``): the first moment after it was
  made at which a judgement could flip (any time a trust root, the policy, the anchor state or the
  answer itself names, a commit dated in the future, a run's observation plus the policy's
  ``staleAfterDays``) and never more than an hour on.
* **Never believed from a commit**: an answer is read only when git tracks nothing of it or of
  ``.kictl`` (``kictl.store.derived``), and is never written through a link.
* **Never believed unless this machine wrote it** (issue 41): each answer carries a seal, HMAC-SHA256
  under this machine's secret (``kictl.index.secret``, outside every registry) over its format, key,
  validity and text.  An answer planted or edited by whoever can write ``.kictl/answers`` does not
  verify and is computed again; without a secret nothing is kept.
* **Links count as what they point to**: the key stamps a link's text, where it leads and the tree or
  file there, so a linked ``registry/attestations`` whose target gains a retraction is a new state.

Nothing here imports the record models: a hit costs the CLI's start, two ``git`` calls and a walk of
the registry's folders.  Any failure to read or keep an answer only means computing it again.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import kictl
from kictl.errors import KictlError
from kictl.index import INDEX_FILE, RACY_SECONDS, secret
from kictl.layout import ATTESTATIONS_DIR, BLOBS_DIR, KICTL_DIR, RECORDS_DIR, REGISTRY_DIR
from kictl.render import terminal_width
from kictl.store.derived import derived_file_trusted
from kictl.store.files import config_dir, find_root, write_atomic
from kictl.store.git import current_commit, merged_times

ANSWERS_DIR = f"{KICTL_DIR}/answers"
#: Bump when what an answer holds changes shape.
FORMAT = "1"
#: The longest an answer is printed again, whatever the clock says of its inputs.
MAX_AGE = timedelta(hours=1)
#: Answers kept at most (the oldest go first).
MAX_ANSWERS = 256
#: Past this many files and folders under ``registry/`` nothing is kept: walking them would cost about what
#: computing the board does (rank_scale.py's 100,000-run registry computes a board in 0.2 s in process).
MAX_ENTRIES = 20_000
#: Folders whose files are named by their content: no time in them is one of the clock's (``trust_texts``).
_CONTENT_NAMED = (RECORDS_DIR, ATTESTATIONS_DIR, BLOBS_DIR)
_TIMESTAMP = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})")


class Racy(Exception):
    """A file changed too recently for its time to be trusted, or the tree is too large to walk."""


@dataclass
class _Stamp:
    """What the key hashes, gathered file by file."""

    now_ns: int
    parts: list[str] = field(default_factory=list)
    entries: int = 0
    open_links: set[Path] = field(default_factory=set)  # the link targets being walked (a loop ends there)

    def add(self, *values: object) -> None:
        self.parts.append("\0".join(str(value) for value in values))

    def stat(self, label: str, path: Path, *, with_size: bool) -> None:
        info = path.lstat()
        self.entries += 1
        if self.entries > MAX_ENTRIES:
            raise Racy(f"more than {MAX_ENTRIES} files")
        if self.now_ns - info.st_mtime_ns < RACY_SECONDS * 1_000_000_000:  # one setting with the index
            raise Racy(label)
        self.add(label, info.st_mtime_ns, info.st_size if with_size else "", info.st_mode)

    def tree(self, root: Path, label: str) -> None:
        """The time of every folder under ``root``, and the size and time of every file; a link counts as its
        text and what it points to (issue 41: a linked ``registry/attestations`` whose target changed kept
        the answer of the state before)."""
        try:
            mode = root.lstat().st_mode
        except FileNotFoundError:
            self.add(label, "absent")
            return
        if stat.S_ISLNK(mode):
            self.link(root, label)
        elif stat.S_ISDIR(mode):
            self.folder(root, label)
        else:
            self.stat(label, root, with_size=True)

    def folder(self, root: Path, label: str) -> None:
        self.stat(label, root, with_size=False)
        with os.scandir(root) as entries:
            listed = sorted(entries, key=lambda entry: entry.name)
        for entry in listed:  # the entry's type comes with the listing: one lstat per entry, as before links counted
            name = f"{label}/{entry.name}"
            if entry.is_symlink():
                self.link(Path(entry.path), name)
            elif entry.is_dir(follow_symlinks=False):
                self.folder(Path(entry.path), name)
            else:
                self.stat(name, Path(entry.path), with_size=True)

    def link(self, path: Path, label: str) -> None:
        """A link: its own text and time, where it leads, and what is there (a folder's tree, a file's stamp).
        A link back into a folder being walked (a loop) counts as its text and target only."""
        self.add(label, "link", os.readlink(path))
        self.stat(f"{label}@link", path, with_size=True)
        try:
            target = path.resolve(strict=True)
            info = target.stat()
        except (OSError, RuntimeError):
            self.add(label, "dangling")
            return
        self.add(label, "target", target, info.st_dev, info.st_ino)
        if not stat.S_ISDIR(info.st_mode):
            self.stat(label, target, with_size=True)
            return
        here = path.parent.resolve()
        if target in self.open_links or target == here or target in here.parents:
            self.add(label, "loop")
            return
        self.open_links.add(target)
        try:
            self.folder(target, label)
        finally:
            self.open_links.discard(target)

    def digest(self) -> str:
        return hashlib.sha256("\n".join(self.parts).encode("utf-8", "surrogateescape")).hexdigest()


def _package_stamp(stamp: _Stamp) -> None:
    stamp.add("kictl", kictl.__version__)
    package = Path(kictl.__file__).resolve().parent
    for folder, names, files in os.walk(package):
        names[:] = sorted(name for name in names if name != "__pycache__")
        for name in sorted(files):
            if not name.endswith((".pyc", ".pyo")):
                info = os.stat(os.path.join(folder, name))
                stamp.add(os.path.relpath(os.path.join(folder, name), package), info.st_mtime_ns, info.st_size)


def state_key(root: Path, head: str | None, command: Sequence[object]) -> str | None:
    """The key of ``command``'s answer on the registry at ``root`` (HEAD ``head``), or ``None`` when the
    state cannot be told apart from one a moment later (a racy time) or cannot be read."""
    stamp = _Stamp(now_ns=time.time_ns())
    try:
        stamp.add("format", FORMAT, "command", json.dumps([str(part) for part in command]))
        stamp.add("terminals", _isatty(sys.stdout), _isatty(sys.stderr), _width())
        stamp.add("config", config_dir(), "verbose", os.environ.get("KICTL_VERBOSE", ""))
        _package_stamp(stamp)
        stamp.add("root", root, "head", head)
        stamp.tree(root / REGISTRY_DIR, REGISTRY_DIR)
        kictl_dir = root / KICTL_DIR
        skip = (ANSWERS_DIR, f"{KICTL_DIR}/{INDEX_FILE}")
        if kictl_dir.is_dir() and not kictl_dir.is_symlink():
            with os.scandir(kictl_dir) as entries:
                for entry in sorted(entries, key=lambda item: item.name):
                    name = f"{KICTL_DIR}/{entry.name}"
                    if not name.startswith(skip) and not entry.is_dir(follow_symlinks=False):
                        stamp.tree(Path(entry.path), name)  # a file, or a link and what it points to
        elif kictl_dir.is_symlink():
            stamp.add(KICTL_DIR, "link", os.readlink(kictl_dir))
        stamp.tree(config_dir(), "config")
    except (Racy, OSError, ValueError):
        return None
    return stamp.digest()


def _isatty(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return False


def _width() -> int | None:
    return terminal_width()


def _path(root: Path, key: str) -> Path:
    return root / ANSWERS_DIR / f"{key}.json"


def _readable(root: Path, head: str | None, key: str) -> bool:
    folder = root / ANSWERS_DIR
    try:
        return not folder.is_symlink() and derived_file_trusted(root, f"{ANSWERS_DIR}/{key}.json", head)
    except KictlError:
        return False


@dataclass(frozen=True)
class Answer:
    """What a command printed, and until when it holds."""

    stdout: str
    stderr: str
    valid_until_ns: int


#: What a kept answer's seal is for (``kictl.index.secret.seal``'s purpose).
SEAL_PURPOSE = "kictl kept answer"


def document(key: str, answer: Answer) -> dict[str, object] | None:
    """The file that keeps ``answer`` under ``key``, sealed with this machine's secret; ``None`` without one."""
    mark = _seal(key, answer)
    if mark is None:
        return None
    return {
        "format": FORMAT,
        "key": key,
        "validUntilNs": answer.valid_until_ns,
        "stdout": answer.stdout,
        "stderr": answer.stderr,
        "seal": mark,
    }


def _seal(key: str, answer: Answer) -> str | None:
    return secret.seal(SEAL_PURPOSE, FORMAT, key, str(answer.valid_until_ns), answer.stdout, answer.stderr)


def read(root: Path, head: str | None, key: str) -> Answer | None:
    """The answer kept under ``key`` that still holds and that this machine wrote (its seal verifies), or ``None``."""
    path = _path(root, key)
    if not path.is_file() or not _readable(root, head, key):
        return None
    try:
        answer = _unsealed(json.loads(path.read_bytes()), key)
    except (OSError, ValueError):
        return None
    if answer is None or time.time_ns() >= answer.valid_until_ns:
        return None
    return answer


def _unsealed(kept: object, key: str | None = None) -> Answer | None:
    """The answer a kept file holds when this machine sealed it (under ``key``, when given); else ``None``:
    planted or edited, it is not an answer this machine kept."""
    if not isinstance(kept, dict) or kept.get("format") != FORMAT or (key is not None and kept.get("key") != key):
        return None
    stdout, stderr, until, named = (kept.get(name) for name in ("stdout", "stderr", "validUntilNs", "key"))
    if not (isinstance(stdout, str) and isinstance(stderr, str) and type(until) is int and isinstance(named, str)):
        return None
    if not secret.sealed(kept.get("seal"), SEAL_PURPOSE, FORMAT, named, str(until), stdout, stderr):
        return None
    return Answer(stdout, stderr, until)


def replay(answer: Answer) -> None:
    sys.stderr.write(answer.stderr)
    sys.stdout.write(answer.stdout)


def keep(root: Path, head: str | None, key: str, answer: Answer) -> None:
    """Keep ``answer`` under ``key`` (atomically); drop answers past their time and the oldest beyond
    ``MAX_ANSWERS``.  Never raises: an answer that cannot be kept is computed again next time."""
    folder = root / ANSWERS_DIR
    with contextlib.suppress(OSError, KictlError):
        if (root / KICTL_DIR).is_symlink() or folder.is_symlink() or not _readable(root, head, key):
            return
        sealed = document(key, answer)
        if sealed is None:
            return  # no secret on this machine: nothing kept can be told from something planted
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(_path(root, key), json.dumps(sealed, ensure_ascii=False).encode("utf-8"))
        _prune(folder)


def _prune(folder: Path) -> None:
    """Remove answers past their time, files that are no sealed answer, and the oldest beyond ``MAX_ANSWERS``.
    Only regular files are read or removed: a link or a FIFO planted there is neither followed nor read."""
    now = time.time_ns()
    kept: list[tuple[int, Path]] = []
    for path in folder.glob("*.json"):
        try:
            info = path.lstat()
            if not stat.S_ISREG(info.st_mode):
                continue
            answer = _unsealed(json.loads(path.read_bytes()))
        except (OSError, ValueError):
            answer = None
        if answer is None or answer.valid_until_ns <= now:
            path.unlink(missing_ok=True)
        else:
            kept.append((info.st_mtime_ns, path))
    for _, path in sorted(kept)[: max(0, len(kept) - MAX_ANSWERS)]:
        path.unlink(missing_ok=True)


def valid_until(
    made: datetime,
    *,
    stale_after: timedelta,
    answer_times: Iterable[str],
    trust_texts: Iterable[str],
    future_commits: Iterable[datetime] = (),
) -> int:
    """Until when an answer made at ``made`` holds (ns since the epoch): the first instant after ``made`` that
    a trust root, the policy or the anchor state names (``trust_texts``), that a commit is dated
    (``future_commits``), or at which a time the answer shows (``answer_times``) turns stale; at most
    ``MAX_AGE`` on."""  # fmt: skip
    moments = [made + MAX_AGE]
    for text in trust_texts:
        moments.extend(_times(text))
    moments.extend(future_commits)
    for text in answer_times:
        for moment in _times(text):
            moments.extend((moment, moment + stale_after))
    return int(min(moment for moment in moments if moment > made).timestamp() * 1_000_000_000)


def _times(text: str) -> Iterator[datetime]:
    for match in _TIMESTAMP.finditer(text):
        with contextlib.suppress(ValueError):
            moment = datetime.fromisoformat(match.group(0).replace("Z", "+00:00"))
            yield moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def trust_texts(root: Path) -> list[str]:
    """The texts whose times can flip a judgement: the files of ``registry/`` outside the content-named
    folders (the trust roots, the policy, the advisories), the anchor state (``.kictl``) and the user's pins."""
    texts = []
    skip = {root / name for name in (*_CONTENT_NAMED, ANSWERS_DIR, f"{KICTL_DIR}/{INDEX_FILE}")}
    for top in (root / REGISTRY_DIR, root / KICTL_DIR, config_dir()):
        walked: set[str] = set()  # linked folders are read too (a linked registry/trust), each once
        for folder, names, files in os.walk(top, followlinks=True):
            real = os.path.realpath(folder)
            if real in walked:
                names[:] = []
                continue
            walked.add(real)
            names[:] = sorted(name for name in names if Path(folder, name) not in skip)
            for name in sorted(files):
                if Path(folder, name) in skip:
                    continue
                with contextlib.suppress(OSError):
                    texts.append(Path(folder, name).read_text(encoding="utf-8", errors="replace"))
    return texts


@contextlib.contextmanager
def recording() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """Record what is written to stdout and stderr while passing it on."""
    captured = (io.StringIO(), io.StringIO())
    streams = (sys.stdout, sys.stderr)
    sys.stdout, sys.stderr = _Tee(streams[0], captured[0]), _Tee(streams[1], captured[1])
    try:
        yield captured
    finally:
        sys.stdout, sys.stderr = streams


class _Tee(io.TextIOBase):
    def __init__(self, stream: object, copy: io.StringIO) -> None:
        self._stream = stream
        self._copy = copy

    def write(self, text: str) -> int:
        self._copy.write(text)
        return self._stream.write(text)  # type: ignore[attr-defined,no-any-return]

    def flush(self) -> None:
        self._stream.flush()  # type: ignore[attr-defined]

    def isatty(self) -> bool:
        return _isatty(self._stream)

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self._stream, "encoding", "utf-8"))


# --------------------------------------------------------------------------- the command table's side


@dataclass(frozen=True)
class _Made:
    """What a kept command said of the answer it printed (``made``)."""

    registry: Path | None
    document: object
    stale_after: timedelta


#: What the kept command running now said (``made``); emptied by ``answered`` before and after the run.
_said: list[_Made] = []


def made(registry: Path | None, document: object, *, stale_after: timedelta) -> None:
    """A kept command's word, once it printed its whole answer: about the registry its ``--registry`` option
    (``registry``) names, with ``document`` its JSON form (the times it shows bound how long it holds) and
    ``stale_after`` the policy's ``staleAfterDays``.  A command that never says it keeps nothing."""
    _said.append(_Made(registry, document, stale_after))


def answered(registry: Path | None, command: Sequence[object], run: Callable[[], object]) -> None:
    """Print the kept answer of ``command`` (the command line as typed) on the registry ``registry`` names,
    while it holds; else ``run`` the command and keep what it printed, when it completed and said ``made``
    about that same registry.  An error (any exception out of ``run``) is never kept."""
    try:
        root = find_root(registry)
        head = current_commit(root)
    except KictlError:
        run()  # the command reports the same error in its own words
        return
    key = state_key(root, head, command)
    if key is not None:
        kept = read(root, head, key)
        if kept is not None:
            replay(kept)
            return
    started = datetime.now(UTC)
    _said.clear()
    try:
        with recording() as (stdout, stderr):
            run()
        said = _said[-1] if len(_said) == 1 else None
    finally:
        _said.clear()
    if key is None or said is None or not _same_root(said.registry, root):
        return  # not a registry state this key stamps, or the command kept quiet about its answer
    if state_key(root, head, command) != key:
        return  # the registry moved while the answer was computed: it may hold for neither state
    with contextlib.suppress(KictlError):
        commits = [datetime.fromtimestamp(stamp, UTC) for stamp in merged_times(root, ATTESTATIONS_DIR).values()]
        until = valid_until(
            started,
            stale_after=said.stale_after,
            answer_times=[json.dumps(said.document)],
            trust_texts=trust_texts(root),
            future_commits=commits,
        )
        keep(root, head, key, Answer(stdout.getvalue(), stderr.getvalue(), until))


def _same_root(registry: Path | None, root: Path) -> bool:
    try:
        return find_root(registry) == root
    except KictlError:
        return False


def option_value(args: Sequence[str], option: str) -> str | None:
    """The value of ``option`` in a command line (``--registry X`` or ``--registry=X``; the last one counts, as
    click reads it), without the command's parser.  A guess where another option's value looks like
    ``option``: ``answered`` keeps nothing unless the command names the same registry (``made``)."""
    found = None
    for position, arg in enumerate(args):
        if arg == "--":
            break
        if arg == option and position + 1 < len(args):
            found = args[position + 1]
        elif arg.startswith(option + "="):
            found = arg.partition("=")[2]
    return found
