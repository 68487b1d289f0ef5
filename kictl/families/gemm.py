"""Matrix multiplication: ``C = A @ B.T`` with A ``[M, K]``, B ``[N, K]``.

FLOPs are ``2 * M * N * K`` (one multiply and one add per term); bytes are
every input read once and C written once (the generic count).
"""

from __future__ import annotations

from kictl.families import Family, Structure, register
from kictl.records import DefinitionSpec


class Gemm(Family):
    name = "gemm"

    def flops(self, spec: DefinitionSpec, structure: Structure) -> int | None:
        axes = structure.axes
        if not {"M", "N", "K"} <= axes.keys():
            return None
        return 2 * axes["M"] * axes["N"] * axes["K"]


def register_all() -> None:
    register(Gemm(), "matmul")
