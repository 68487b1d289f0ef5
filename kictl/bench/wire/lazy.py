"""torch, imported on first use: the one place ``kictl.bench`` defers an import (issue 44).

Every module of the judge and the protocol is imported by commands that never touch a tensor (``kictl --help``,
``export``, the planning of ``rerun``, review: ``tests/test_cli_records.py`` and ``tests/rerun/test_job.py`` hold
that they import no torch), and the worker must set up its process (its thread pools' environment, its CPU
affinity, the seccomp filter) before torch starts (``kictl.bench.worker.main``).  So no module of ``kictl.bench``
imports torch at its top: a function that needs it asks ``torch_module()``, which costs a dictionary lookup once
torch is there.

The first import runs with Python's cyclic garbage collector paused: torch's import makes about a million
objects and almost no garbage, and the collections it would trigger on the way walk them all again (about a
tenth of the import's CPU time, 0.15 of 1.6 CPU-seconds on the 2-core VM; every bench worker imports torch
once).  The collector is on again, as it was, once torch is there.
"""

from __future__ import annotations

import gc
import sys
from types import ModuleType


def torch_module() -> ModuleType:
    """The ``torch`` module, imported by the first caller (its import takes about a second)."""
    pause = "torch" not in sys.modules and gc.isenabled()  # once there, an import statement is a lookup
    if pause:
        gc.disable()
    try:
        import torch  # late: GPU and tensor code only; commands without tensors and the worker's set-up come first
    finally:
        if pause:
            gc.enable()
    return torch
