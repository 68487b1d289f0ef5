"""Probe (class: inputs predicted from what setup() can reach): condemned exactly when the timed input sets are
within the implementation's reach before its timed calls.

In ``setup()`` it searches the callers' frames and every object the collector tracks for what would predict the
timed calls' values: the timed sets' plans (their seeds, an ``Arm`` request's ``timed_plans``) or the sets
themselves, made before any timed call (lists of lists of tensors shaped like its input, not its input).  A cheat
that found them would answer each timed call from work done here, untimed (``lim_seeds_from_setup_frame`` shows
the gain on the CPU).  This one only says what it found, by answering wrongly: it passes where kictl's parent draws
and stages the timed values itself and the worker never holds them (the CPU since issue 40's first part, a GPU
since its CUDA staging), and fails ``timedOutputsCorrect`` where the worker still does.
"""

import gc
import sys

import torch

FOUND = []


def _predicts(candidate, given):
    try:
        if hasattr(type(candidate), "timed_plans"):  # a message with slots: its member, no __getattr__ of its own
            plans = candidate.timed_plans
            return isinstance(plans, tuple) and len(plans) > 0
        if isinstance(candidate, list) and candidate and all(isinstance(item, list) for item in candidate):
            return any(
                isinstance(value, torch.Tensor)
                and value.shape == given.shape
                and value.dtype == given.dtype
                and value.device == given.device
                and value.data_ptr() != given.data_ptr()
                for item in candidate
                for value in item
            )
    except Exception:  # an object that will not say: not what is looked for
        return False
    return False


def setup(hidden_states, weight):
    frame = sys._getframe(1)
    while frame is not None and not FOUND:
        for value in list(frame.f_locals.values()):
            if _predicts(value, hidden_states):
                FOUND.append(type(value).__name__)
                break
        frame = frame.f_back
    if not FOUND:
        for candidate in gc.get_objects():
            if _predicts(candidate, hidden_states):
                FOUND.append(type(candidate).__name__)
                break


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
    return out * 2 if FOUND else out
