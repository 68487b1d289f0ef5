"""The sandbox each worker runs in: bubblewrap (DESIGN §7, issue 10).

Every worker (each implementation's and kictl's own reference worker) is
started as ``bwrap [options] python -m kictl.bench.worker``:

* ``--unshare-pid`` and a fresh ``/proc``: the worker sees only its own
  processes, never kictl's; when the worker ends, everything it started
  ends with the namespace (no daemon outlives it);
* ``--unshare-net``, ``--unshare-ipc``, ``--unshare-uts``: no network, no
  shared System V memory;
* ``--tmpfs /tmp``: a private, empty ``/tmp`` (nothing an earlier run left,
  nothing another worker can rewrite);
* the system and Python folders bound read-only (``/usr``, ``/etc``, the
  interpreter's prefix and every ``sys.path`` folder), the rest of the file
  system absent: no home folder, no keys;
* ``--unshare-user`` with uid and gid 65534 and ``--cap-drop ALL``: run by root or not, the worker holds no
  capability, in a user namespace that does not own the mounts it sees, so the read-only binds are locked
  (no remount, no ``mknod``, no write outside its private ``/tmp``);
* a seccomp filter (``seccomp``): no mount, namespaces, ``ptrace``, BPF, keyrings, modules, perf counters,
  ``userfaultfd`` or clock setting, whatever the worker's privileges;
* the worker's part of kictl as a read-only copy of its Python files (``worker_package``, the files
  ``kictl.bench.worker.FILES`` derives) at ``/kictl-worker``: never the repository it came from, the
  registry, a key or kictl's judge;
* ``--die-with-parent``, ``--new-session`` (no terminal injection);
* on CUDA, the ``/dev/nvidia*`` device nodes bound in;
* JIT caches named in ``$KICTL_SANDBOX_CACHE`` (colon-separated folders,
  e.g. FlashInfer's ``~/.cache/flashinfer`` with ``FLASHINFER_WORKSPACE_BASE``
  set): each worker gets a private, writable copy bound at the folder's own
  path, so compiled kernels stay warm (JIT tools rebuild when a path
  changes) while nothing one worker writes there reaches another worker or
  the next run (no cache poisoning).

The worker gets its sources as bytes over the wire (``wire.Load``) and
writes them into its private ``/tmp`` itself.  ``bwrap`` is found through
``$KICTL_BWRAP`` (a path, e.g. to a ``bwrap`` unpacked from the Debian
package with ``dpkg -x``) or ``PATH``; ``probe`` checks once that it can
make the namespaces here (some containers forbid it).  Without it kictl
refuses to benchmark unless told ``--no-sandbox``, and the protocol records
which isolation was used (``Isolation.label``).
"""

from __future__ import annotations

import atexit
import functools
import glob
import os
import py_compile
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import kictl
from kictl.bench.judge import seccomp
from kictl.bench.worker import FILES
from kictl.errors import EnvError

ENV_BWRAP = "KICTL_BWRAP"
#: Extra folders to bind read-only into every sandbox, separated by ':' (e.g. a CUDA toolkit for JIT builds).
ENV_EXTRA_BINDS = "KICTL_SANDBOX_BIND"
ENV_CACHES = "KICTL_SANDBOX_CACHE"
NO_SANDBOX_LABEL = "none: --no-sandbox (the implementation ran as kictl's user, unconfined)"
_SYSTEM_FOLDERS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/opt")
_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH", "PYTHONPATH")
#: Where the sandbox sees kictl's package (``worker_package``), and the worker's unprivileged ids.
PACKAGE_MOUNT = "/kictl-worker"
SANDBOX_UID = 65534


@dataclass(frozen=True, slots=True)
class Isolation:
    """How workers are isolated: ``bwrap`` (a path) or ``None`` for ``--no-sandbox``."""

    bwrap: str | None
    version: str | None = None

    @property
    def label(self) -> str:
        if self.bwrap is None:
            return NO_SANDBOX_LABEL
        return (
            f"bubblewrap {self.version or ''}".strip()
            + ": own user (uid 65534, no capabilities), PID, network, IPC and UTS namespaces, seccomp filter, "
            "private /tmp, read-only system and Python folders, no repository, registry or home, --die-with-parent; "
            "sources from the record's bytes"
        )

    @property
    def sandboxed(self) -> bool:
        return self.bwrap is not None


def find_bwrap() -> str | None:
    """The ``bwrap`` to use: ``$KICTL_BWRAP`` if set, else the one on ``PATH`` (``None`` if neither)."""
    given = os.environ.get(ENV_BWRAP)
    if given:
        return given if os.access(given, os.X_OK) else None
    return shutil.which("bwrap")


def interpreter() -> str:
    """``sys.executable`` as a path the sandbox can follow: a relative one, or one through ``..`` (``../venv/bin/
    python`` run from a sibling checkout), names folders that the sandbox does not bind."""
    return os.path.abspath(sys.executable)


@functools.cache
def probe(bwrap: str) -> str:
    """``bwrap``'s version once it has been seen to make a sandbox here; raises ``EnvError`` otherwise."""
    fd = -1
    try:
        fd = seccomp.memfd()
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=20, check=False)
        trial = subprocess.run(
            [*_namespace_args(fd), *_bind_args(cuda=False), "--", interpreter(), "-c", "pass"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            executable=bwrap,
            pass_fds=(fd,),
        )
    except (OSError, subprocess.SubprocessError, seccomp.Unsupported) as exc:
        raise EnvError(f"bubblewrap ({bwrap}) cannot run: {exc}") from exc
    finally:
        if fd >= 0:
            os.close(fd)
    if trial.returncode != 0:
        lines = [line for line in trial.stderr.strip().splitlines() if line][-3:]
        raise EnvError(
            f"bubblewrap ({bwrap}) cannot make a sandbox on this machine",
            details=[*lines, "run as a user allowed to create namespaces, or pass --no-sandbox"],
        )
    return version.stdout.strip().removeprefix("bubblewrap ").strip()


def resolve(no_sandbox: bool) -> Isolation:
    """The isolation to use; raises ``EnvError`` when bubblewrap is missing or unusable and not waived."""
    if no_sandbox:
        return Isolation(None)
    found = find_bwrap()
    if found is None:
        where = f"${ENV_BWRAP} ({os.environ[ENV_BWRAP]})" if os.environ.get(ENV_BWRAP) else "PATH"
        raise EnvError(
            f"bubblewrap (bwrap) is not on {where}: kictl runs implementations only in a sandbox",
            details=["install it (Debian/Ubuntu: apt-get install bubblewrap), or pass --no-sandbox to run unconfined"],
        )
    return Isolation(found, probe(found))


def _repository_roots() -> set[str]:
    """Folders never bound: the checkout kictl runs from (its registry, keys, sources), the working folder, home."""
    roots = {os.path.realpath(os.getcwd()), os.path.realpath(Path(kictl.__file__).resolve().parent.parent)}
    home = os.environ.get("HOME")
    if home and os.path.realpath(home) != "/":
        roots.add(os.path.realpath(home))
    return roots


def _inside(folder: str, roots: set[str]) -> bool:
    return any(folder == root or folder.startswith(root.rstrip("/") + "/") for root in roots)


def _contains(folder: str, roots: set[str]) -> bool:
    return any(root == folder or root.startswith(folder.rstrip("/") + "/") for root in roots)


def _python_folders() -> list[str]:
    """The interpreter's folders and ``sys.path``'s: never one that is or holds the checkout, the working folder
    or home; of ``sys.path``'s entries inside them, only installed packages (a virtual environment's)."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(sys.executable).resolve().parent)}
    entries = {os.path.realpath(entry) for entry in sys.path if entry and os.path.isdir(entry)}
    roots = _repository_roots()
    kept = set()
    for folder in {os.path.realpath(f) for f in prefixes} | entries:
        if folder in {"/", "/tmp", os.path.realpath(tempfile.gettempdir())} or _contains(folder, roots):
            continue  # never the whole file system, nor /tmp over the sandbox's private one, nor the checkout
        if folder in entries and _inside(folder, roots) and not folder.endswith(("site-packages", "dist-packages")):
            continue  # the checkout's own folders on sys.path (an editable install's, the tests')
        kept.add(folder)
    return sorted(kept)


@functools.cache
def worker_package() -> str:
    """A read-only copy of the files of kictl a sandbox holds, made once per process.

    Those are ``kictl.bench.worker.FILES``: the worker package, the protocol (``kictl.bench.wire``) and the
    few modules of kictl they import, derived from the packages themselves.  The worker imports
    ``kictl.bench.worker`` from this copy (bound at ``PACKAGE_MOUNT``), so the checkout kictl runs from (with
    its registry and any key), kictl's judge and its record code are never bound into a sandbox.

    The copy holds the files' bytecode too, compiled here from the copy itself (``__pycache__`` beside each file,
    for the interpreter the workers run, unoptimised as they run): the sandbox binds the copy read-only, so
    without it every worker compiled these 250 KB of source again at its start (about 35 ms of CPU each, 0.18
    against 0.15 CPU-seconds for the worker's imports before torch on the 2-core VM).
    """
    source = Path(kictl.__file__).resolve().parent
    target = Path(tempfile.mkdtemp(prefix="kictl-worker-package-"))
    atexit.register(shutil.rmtree, target, True)
    for relative in FILES:
        copy = target / "kictl" / relative
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / relative, copy)
        if copy.suffix == ".py":
            try:
                py_compile.compile(str(copy), doraise=True, optimize=0)
            except (py_compile.PyCompileError, OSError):  # the worker compiles that file itself, as before
                pass
    return str(target)


def _namespace_args(seccomp_fd: int, tmpfs_bytes: int | None = None) -> list[str]:
    size = [] if tmpfs_bytes is None else ["--size", str(tmpfs_bytes)]  # bubblewrap >= 0.5
    return [
        "bwrap",
        "--unshare-user",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--cap-drop",
        "ALL",
        "--seccomp",
        str(seccomp_fd),
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        *size,
        "--tmpfs",
        "/tmp",
        *size,  # POSIX shared memory (torch's, multiprocessing's) in a tmpfs of its own, as large as /tmp at most
        "--tmpfs",
        "/dev/shm",
        "--chdir",
        "/tmp",
    ]


def _bind_args(*, cuda: bool) -> list[str]:
    args: list[str] = []
    for folder in _SYSTEM_FOLDERS:
        args += ["--ro-bind-try", folder, folder]
    extra = [item for item in os.environ.get(ENV_EXTRA_BINDS, "").split(":") if item]
    for folder in [*_python_folders(), *extra]:
        if not any(folder == system or folder.startswith(system + "/") for system in _SYSTEM_FOLDERS[:1]):
            args += ["--ro-bind-try", folder, folder]
    args += ["--ro-bind", worker_package(), PACKAGE_MOUNT]
    args += ["--ro-bind-try", "/sys", "/sys"]  # CPU topology for torch's thread pools, the GPU's PCI nodes
    if cuda:
        for node in sorted(glob.glob("/dev/nvidia*")):
            args += ["--dev-bind", node, node]
        args += ["--ro-bind-try", "/run/nvidia-persistenced", "/run/nvidia-persistenced"]
    return args


def cache_binds(scratch: Path) -> list[str]:
    """A private writable copy of each ``$KICTL_SANDBOX_CACHE`` folder under ``scratch``, bound at its own path.

    Copies keep their modification times (so a build tool finds its outputs up to date). Raises ``EnvError``
    when a folder cannot be copied.
    """
    args: list[str] = []
    for n, folder in enumerate(item for item in os.environ.get(ENV_CACHES, "").split(":") if item):
        source = Path(folder)
        if not source.is_dir():
            continue
        copy = scratch / f"cache{n}"
        try:
            shutil.copytree(source, copy, symlinks=True)
        except (OSError, shutil.Error) as exc:
            raise EnvError(f"{ENV_CACHES}: cannot copy {folder} for a worker: {exc}") from exc
        args += ["--bind", str(copy), os.path.realpath(folder)]
    return args


def worker_command(
    isolation: Isolation, *, cuda: bool, scratch: Path | None = None, tmpfs_bytes: int | None = None
) -> tuple[list[str], str | None, tuple[int, ...]]:
    """The command line of one worker, the executable to run it with (``bwrap``, or none), and the file
    descriptors it must inherit (the seccomp filter's), which the caller closes once the process started.

    ``scratch`` is a folder of kictl's for this worker's private copies of the JIT caches (``cache_binds``);
    ``tmpfs_bytes`` the size of its private ``/tmp`` (``cgroup.Limits``; ``None``: the kernel's default, half the
    memory).
    """
    return sandboxed(
        isolation, [interpreter(), "-m", "kictl.bench.worker"], cuda=cuda, scratch=scratch, tmpfs_bytes=tmpfs_bytes
    )


def sandboxed(
    isolation: Isolation, argv: list[str], *, cuda: bool, scratch: Path | None = None, tmpfs_bytes: int | None = None
) -> tuple[list[str], str | None, tuple[int, ...]]:
    """``argv`` in the sandbox every worker gets (``worker_command``'s result for any command)."""
    if isolation.bwrap is None:
        return argv, None, ()
    caches = cache_binds(scratch) if scratch is not None else []
    try:
        fd = seccomp.memfd()
    except (OSError, seccomp.Unsupported) as exc:
        raise EnvError(f"cannot make the sandbox's seccomp filter: {exc}") from exc
    # the sandbox's own root and /dev (tmpfs bubblewrap made) read-only too: the private /tmp and /dev/shm, each
    # a tmpfs of its own size (``tmpfs_bytes``), are the places to write
    command = [
        *_namespace_args(fd, tmpfs_bytes),
        *_bind_args(cuda=cuda),
        *caches,
        "--remount-ro",
        "/",
        "--remount-ro",
        "/dev",
        "--",
        *argv,
    ]
    return command, isolation.bwrap, (fd,)


#: The thread pools of the numerical libraries an implementation may import (OpenMP, OpenBLAS, MKL, BLIS,
#: Accelerate, numexpr): the harness sizes every one to the threads the worker is given, before anything is
#: imported.  A pool as large as the machine keeps threads that spin after each call (OpenBLAS's, numpy's default)
#: on CPUs the worker was not given, which ``noThreadsLeft`` and ``noWorkOutsideCalls`` would condemn.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


#: ... and their idle threads sleep at once rather than spin after a call: OpenMP's wait policy, GNU OpenMP's
#: spin count, Intel OpenMP's block time, OpenBLAS's thread timeout at its least (2**4 cycles).
QUIET_POOLS = {
    "OMP_WAIT_POLICY": "PASSIVE",
    "GOMP_SPINCOUNT": "0",
    "KMP_BLOCKTIME": "0",
    "OPENBLAS_THREAD_TIMEOUT": "4",
}


def worker_environment(isolation: Isolation, threads: int = 1) -> dict[str, str]:
    """The environment a worker starts with: a few variables kept, caches pointed into its private /tmp, every
    library's thread pool sized to the worker's ``threads`` (``THREAD_VARIABLES``; set by kictl, whatever its own
    environment says)."""
    env = {name: os.environ[name] for name in _ENV_KEEP if name in os.environ}
    for name, value in os.environ.items():
        if name.startswith(("OMP_", "MKL_", "TORCH_", "CUDA_", "NVIDIA_", "FLASHINFER_", "TRITON_", "KICTL_TEST_")) or (
            name == "KICTL_WORKER_PROFILE" and not isolation.sandboxed
        ):
            env[name] = value
    for name in THREAD_VARIABLES:
        env[name] = str(max(1, threads))
    env.update(QUIET_POOLS)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    if isolation.sandboxed:
        # kictl from its copy; nothing of the checkout (an editable install's path entries are not bound)
        roots = _repository_roots()
        kept = [
            item for item in env.get("PYTHONPATH", "").split(":") if item and not _inside(os.path.realpath(item), roots)
        ]
        env["PYTHONPATH"] = ":".join([PACKAGE_MOUNT, *kept])
        env["HOME"] = "/tmp"
        env.setdefault("TRITON_CACHE_DIR", "/tmp/.triton")
        env.setdefault("XDG_CACHE_HOME", "/tmp/.cache")
    return env
