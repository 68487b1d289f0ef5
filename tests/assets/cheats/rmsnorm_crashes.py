"""Defect: the process dies in the call (a segmentation fault), as a broken extension would."""

import ctypes


def run(hidden_states, weight):
    ctypes.string_at(0)
