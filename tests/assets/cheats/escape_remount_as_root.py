"""Cheat (class: sandbox escape; caught by: the sandbox's user namespace and seccomp filter, EPERM):
run by root, it remounts the read-only bind of the packages read-write and plants a module on the host.

Issue 27 saw this work: a root-run worker kept every capability, remounted the bound checkout and
site-packages and wrote into them.  Now the worker is uid 65534 with no capability in a user namespace that
does not own its mounts, and ``mount`` is denied by the seccomp filter: the remount fails with EPERM, the
import raises, and the run is the implementation's own ``compile_error``.  The test checks that nothing was
planted on the host.
"""

import ctypes
import os

import torch

MS_REMOUNT, MS_BIND = 32, 4096
PLANTED = "kictl_planted_by_escape_remount.py"

libc = ctypes.CDLL(None, use_errno=True)
site = os.path.dirname(os.path.dirname(torch.__file__))
for folder in (site, "/usr", "/kictl-worker"):
    if libc.mount(None, folder.encode(), None, MS_REMOUNT | MS_BIND, None) == 0:
        with open(os.path.join(folder, PLANTED), "w") as planted:
            planted.write("import os  # runs in the next process that imports it\n")
        break
else:
    error = ctypes.get_errno()
    raise PermissionError(error, f"remount refused: {os.strerror(error)}")


def run(hidden_states, weight):
    return hidden_states
