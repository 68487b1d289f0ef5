"""Constants shared by the modules of ``kictl.store``."""

from __future__ import annotations

ENV_VAR = "KICTL_REGISTRY"
