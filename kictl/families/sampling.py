"""Sampling from probabilities with top-k and/or top-p filtering (FlashInfer Trace ``sampling``).

``probs [batch_size, vocab_size]`` must hold one probability distribution per row (non-negative, summing to
one): the ``probability-rows`` generator draws them.  ``top_k`` is structure, drawn in ``[16, 256]`` (at
most the vocabulary): a ``k`` of one would make sampling an argmax and blind the distribution judge;
``top_p`` is drawn in ``[0.5, 0.95]`` by the ``top-p`` generator.  A sampler reads every probability:
bytes are the generic count; there is no FLOP formula (a few comparisons per element bound nothing).
The outputs are random: their judge is the distribution test of ``kictl.families.judges``.
"""

from __future__ import annotations

import random

from kictl.families import Family, register
from kictl.records import DefinitionSpec

TOP_K_RANGE = (16, 256)


class Sampling(Family):
    name = "sampling"
    structural_inputs = frozenset({"top_k"})

    def synthesize(self, spec: DefinitionSpec, axes: dict[str, int], seed: int) -> dict[str, list[int]]:
        rng = random.Random(seed)
        low, high = TOP_K_RANGE
        high = max(1, min(high, axes["vocab_size"]))
        low = min(low, high)
        return {"top_k": [rng.randint(low, high) for _ in range(axes["batch_size"])]}

    def generated(self, spec: DefinitionSpec) -> dict[str, str]:
        made = {"probs": "probability-rows"}
        if "top_p" in spec.inputs:
            made["top_p"] = "top-p"
        return {name: generator for name, generator in made.items() if name in spec.inputs}

    def relations(self, spec: DefinitionSpec) -> list[str]:
        return ["batch_size >= 1"]


def register_all() -> None:
    register(Sampling(), "top-k-sampling", "top-p-sampling")
