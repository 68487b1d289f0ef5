"""torch, imported on first use: the one place ``kictl.bench`` defers an import (issue 44).

Every module of the judge and the protocol is imported by commands that never touch a tensor (``kictl --help``,
``export``, the planning of ``rerun``, review: ``tests/test_cli_records.py`` and ``tests/rerun/test_job.py`` hold
that they import no torch), and the worker must set up its process (its thread pools' environment, its CPU
affinity, the seccomp filter) before torch starts (``kictl.bench.worker.main``).  So no module of ``kictl.bench``
imports torch at its top: a function that needs it asks ``torch_module()``, which costs a dictionary lookup once
torch is there.
"""

from __future__ import annotations

from types import ModuleType


def torch_module() -> ModuleType:
    """The ``torch`` module, imported by the first caller (its import takes about a second)."""
    import torch  # late: GPU and tensor code only; commands without tensors and the worker's set-up come first

    return torch
