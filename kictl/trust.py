"""Keys, DSSE envelopes, the trust root and evidence levels (DESIGN §5).

This module is being built (issue 2 of the plan); for now it provides the
document a new registry starts with: a trust root with no keys yet.
"""

from __future__ import annotations

from typing import Any

from kictl.records import API_VERSION


def initial_root_document() -> dict[str, Any]:
    """The trust root of a new registry: version 1, no keys, nothing trusted yet."""
    return {
        "signed": {
            "apiVersion": API_VERSION,
            "kind": "TrustRoot",
            "version": 1,
            "threshold": 1,
            "keys": {},
        },
        "signatures": [],
    }
