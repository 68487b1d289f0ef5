"""Normalisations (RMSNorm, fused add + RMSNorm, LayerNorm): memory-bound by nature.

They have no FLOP formula: a handful of operations per element is never the
bound on a GPU, so their floor is bytes over bandwidth, each input read once
and each output written once (the generic count).
"""

from __future__ import annotations

from kictl.families import Family, register


class Norm(Family):
    name = "rmsnorm"


def register_all() -> None:
    family = Norm()
    register(family, "fused-add-rmsnorm", "layernorm")
