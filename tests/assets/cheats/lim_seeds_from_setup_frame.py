"""Cheat (class: inputs predicted from what setup() sees; made useless: nothing there to find).

In ``setup()`` it searches for the timed input sets' plans (their seeds) where an implementation can reach
kictl's worker: the callers' frames (``sys._getframe``) and every object the collector tracks
(``gc.get_objects``, ``gc.get_referrers`` of the tensors it was given).  Until issue 40 the ``Arm`` request in the
worker's frame held them: it then materialised every timed set (kictl's own ``materialize_plans`` is importable
in the sandbox) and answered each timed call from what it made in ``setup()``, untimed.  Here, where it finds
them, it skips a 30 ms stand-in for that work in every call; where it does not, it pays it: the figure says which.
On the CPU the parent stages the timed values and never sends their plans to the worker.
"""

import gc
import sys
import time

import torch

FOUND = []


def _plans(candidate):
    plans = getattr(candidate, "timed_plans", None)
    if isinstance(plans, tuple) and plans and all(hasattr(plan, "inputs") for plan in plans):
        return plans
    return None


def setup(hidden_states, weight):
    frame = sys._getframe(1)
    while frame is not None and not FOUND:
        for value in list(frame.f_locals.values()):
            if _plans(value):
                FOUND.append(_plans(value))
        frame = frame.f_back
    for candidate in [*gc.get_objects(), *gc.get_referrers(hidden_states)]:
        if not FOUND and _plans(candidate):
            FOUND.append(_plans(candidate))
    if FOUND:
        try:
            from kictl.bench.wire.tensors import materialize_plans
        except ImportError:
            from kictl.bench.inputs import materialize_plans

        FOUND.append(materialize_plans(list(FOUND[0]), "cpu"))  # every timed set, before any timed call


@torch.no_grad()
def run(hidden_states, weight):
    if not FOUND:
        time.sleep(0.03)  # the work a cheat that knows the timed inputs does untimed in setup()
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
