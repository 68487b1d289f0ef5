"""An honest RMSNorm that checks where it runs: unpinned before setup(), pinned to one CPU after.

kictl pins a worker's threads to the timed calls' CPU when it arms the worker (setup(), the warm-up and
the timed calls); the worker's start, the import and the correctness rounds may use any CPU.
"""

import os

import torch

ARMED = []


def _cpus():
    return {task: os.sched_getaffinity(int(task)) for task in os.listdir("/proc/self/task")}


def setup(hidden_states, weight):
    ARMED.append(True)


@torch.no_grad()
def run(hidden_states, weight):
    seen = _cpus()
    if ARMED:
        loose = {task: sorted(cpus) for task, cpus in seen.items() if len(cpus) != 1}
        if loose:
            raise RuntimeError(f"armed but threads not pinned to one CPU: {loose}")
    elif all(len(cpus) == 1 for cpus in seen.values()):
        raise RuntimeError("pinned already in a correctness call")
    x = hidden_states.float()
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()
    return normed.to(hidden_states.dtype)
