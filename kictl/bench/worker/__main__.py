"""``python -m kictl.bench.worker``: the worker process (``main.main``)."""

import os
import sys

from kictl.bench.worker import main as _worker

_worker.main()
# nothing is left to say: end now rather than tear down torch's interpreter state (a few hundred ms
# per worker at the end of every session); the log is flushed first
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
