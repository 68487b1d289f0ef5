"""Cheat (class: sandbox escape; caught by: the seccomp filter, EPERM): makes a user and mount namespace of its
own, where an unprivileged process holds every capability again, to remount and write what it was given
read-only.

``unshare(CLONE_NEWUSER | CLONE_NEWNS)`` is denied by the worker's seccomp filter (as is ``clone`` with a
namespace flag), so the import raises and the run is the implementation's own ``compile_error``.
"""

import ctypes
import os

CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000

libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
    error = ctypes.get_errno()
    raise PermissionError(error, f"unshare refused: {os.strerror(error)}")
if libc.mount(None, b"/usr", None, 32 | 4096, None) != 0:
    error = ctypes.get_errno()
    raise PermissionError(error, f"remount refused inside its own namespace: {os.strerror(error)}")
with open("/usr/kictl_planted_by_own_namespace", "w") as planted:
    planted.write("planted")


def run(hidden_states, weight):
    return hidden_states
