"""A hostile rmsnorm_h4096 for the energy loop (issue 40): honest whenever its inputs were just staged (every
correctness round and timed call, a loop's first call), but a call on the same values as the call before (what a
back-to-back loop is) waits as long as its last honest call took, draws no energy for it, and returns a buffer it
has not computed.  ``json.loads``, which kictl's wire calls to read every request, is replaced so that the buffer
is filled when the request read is an audit: where the worker packed the loop's last outputs at an ``Audit``
request, they were right by then.  kictl's parent now takes them at the loop's return, the worker stopped.
"""

import json
import time

import torch

HIDDEN_SIZE = 4096
EPS = 1e-5
_state: dict = {"key": None, "took": 0.0, "pending": None}


def _compute(hidden_states, weight):
    normed = torch.nn.functional.rms_norm(hidden_states.float(), (HIDDEN_SIZE,), weight.float(), EPS)
    return normed.to(hidden_states.dtype)


def _settle():
    pending, _state["pending"] = _state["pending"], None
    if pending is not None:
        out, args = pending
        with torch.no_grad():
            out.copy_(_compute(*args))


@torch.no_grad()
def run(hidden_states, weight):
    flat = hidden_states.float().flatten()
    key = float((flat * torch.arange(1, flat.numel() + 1, dtype=torch.float32)).sum())
    if _state["key"] != key:
        _state["key"] = key
        started = time.perf_counter()
        out = _compute(hidden_states, weight)
        _state["took"] = time.perf_counter() - started
        return out
    time.sleep(_state["took"])  # the loop's pace is kept; the work is not done
    out = hidden_states.clone()
    _state["pending"] = (out, (hidden_states, weight))
    return out


_loads = json.loads


def _lazy_loads(text, *args, **kwargs):
    if '"audit"' in str(text):  # only the audited outputs are ever computed
        _settle()
    else:
        _state["pending"] = None
    return _loads(text, *args, **kwargs)


json.loads = _lazy_loads
