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

import functools
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kictl.errors import EnvError

ENV_BWRAP = "KICTL_BWRAP"
#: Extra folders to bind read-only into every sandbox, separated by ':' (e.g. a CUDA toolkit for JIT builds).
ENV_EXTRA_BINDS = "KICTL_SANDBOX_BIND"
ENV_CACHES = "KICTL_SANDBOX_CACHE"
NO_SANDBOX_LABEL = "none: --no-sandbox (the implementation ran as kictl's user, unconfined)"
_SYSTEM_FOLDERS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/opt")
_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH", "PYTHONPATH")


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
            + ": own PID, network, IPC and UTS namespaces, private /tmp, read-only system and Python folders, "
            "no home, --die-with-parent; sources from the record's bytes"
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


@functools.cache
def probe(bwrap: str) -> str:
    """``bwrap``'s version once it has been seen to make a sandbox here; raises ``EnvError`` otherwise."""
    try:
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=20, check=False)
        trial = subprocess.run(
            [*_namespace_args(), *_bind_args(cuda=False), "--", sys.executable, "-c", "pass"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            executable=bwrap,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvError(f"bubblewrap ({bwrap}) cannot run: {exc}") from exc
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


def _python_folders() -> list[str]:
    folders = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(sys.executable).resolve().parent)}
    cwd = os.path.realpath(os.getcwd())
    folders.update(entry for entry in sys.path if entry and os.path.isdir(entry) and os.path.realpath(entry) != cwd)
    import kictl

    folders.add(str(Path(kictl.__file__).resolve().parent.parent))
    # never the whole file system, nor /tmp over the sandbox's private one
    return sorted({os.path.realpath(f) for f in folders} - {"/", "/tmp", os.path.realpath(tempfile.gettempdir())})


def _namespace_args() -> list[str]:
    return [
        "bwrap",
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
        "--tmpfs",
        "/tmp",
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


def worker_command(isolation: Isolation, *, cuda: bool, scratch: Path | None = None) -> tuple[list[str], str | None]:
    """The command line of one worker, and the executable to run it with (``bwrap``, or none).

    ``scratch`` is a folder of kictl's for this worker's private copies of the JIT caches (``cache_binds``).
    """
    python = [sys.executable, "-m", "kictl.bench.worker"]
    if isolation.bwrap is None:
        return python, None
    caches = cache_binds(scratch) if scratch is not None else []
    return [*_namespace_args(), *_bind_args(cuda=cuda), *caches, "--", *python], isolation.bwrap


def worker_environment(isolation: Isolation) -> dict[str, str]:
    """The environment a worker starts with: a few variables kept, caches pointed into its private /tmp."""
    env = {name: os.environ[name] for name in _ENV_KEEP if name in os.environ}
    for name, value in os.environ.items():
        if name.startswith(("OMP_", "MKL_", "TORCH_", "CUDA_", "NVIDIA_", "FLASHINFER_", "TRITON_", "KICTL_TEST_")) or (
            name == "KICTL_WORKER_PROFILE" and not isolation.sandboxed
        ):
            env[name] = value
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    if isolation.sandboxed:
        env["HOME"] = "/tmp"
        env.setdefault("TRITON_CACHE_DIR", "/tmp/.triton")
        env.setdefault("XDG_CACHE_HOME", "/tmp/.cache")
    return env
