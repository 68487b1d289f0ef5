"""Defect: the call never returns."""

import time


def run(hidden_states, weight):
    while True:
        time.sleep(1)
