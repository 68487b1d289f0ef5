"""The trust tests' registry (real keys, real DSSE envelopes, real git) and the advisories' board, for standing."""

from __future__ import annotations

from tests.advisories.conftest import board  # noqa: F401  (fixtures re-exported for this folder)
from tests.trust.conftest import (  # noqa: F401
    _private_config,
    key_folder,
    setup,
)
