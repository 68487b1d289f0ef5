"""The root options every command reads (``kictl --debug``): set by the command table, read by ``guarded``.

Its own module, so that the command table (``kictl.cli``) imports neither ``kictl.cli._common`` nor the
registry it opens before a command is asked for.
"""

from __future__ import annotations


class _State:
    debug = False


STATE = _State()
