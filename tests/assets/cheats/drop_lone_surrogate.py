"""Cheat (class 6): fails with an error message holding lone surrogates and control characters, which an
encoder that expects valid Unicode chokes on.

kictl sanitises what comes off the wire: the run is a runtime_error with U+FFFD in its detail, and kictl's
output (and --json) stays valid.
"""


def run(hidden_states, weight):
    raise ValueError("broken \ud800 text \udfff with \x1b[2J escapes")
