"""Cheat (class 5): rewrites the reference's source wherever it can find it under /tmp (kictl used to write it
to a shared folder), kills every other process it can see (so that a restarted reference worker would import
the tampered file), and answers with a wrong formula (x * 2).

The reference runs from kictl's own bytes in its own sandbox: the wrong formula is judged wrong
(incorrect_numerical) and the other runs are untouched.
"""

import glob
import os
import signal

import torch

TAMPERED = "def run(hidden_states, weight):\n    return hidden_states * 2\n"

for path in glob.glob("/tmp/**/reference*.py", recursive=True):
    try:
        with open(path, "w") as handle:
            handle.write(TAMPERED)
    except OSError:
        pass
for entry in os.listdir("/proc"):
    if entry.isdigit() and int(entry) not in (os.getpid(), os.getppid(), 1):
        try:
            os.kill(int(entry), signal.SIGKILL)
        except OSError:
            pass


@torch.no_grad()
def run(hidden_states, weight):
    return hidden_states * 2
