"""Physical bounds on a kernel's energy per call (DESIGN §14, issue 31).

**Floor.**  A call must move its bytes through device memory (every input read
once, every output written once: ``families.work``) and do its FLOPs.  Neither
is free, so its energy above idle is at least::

    bytes × ENERGY_PER_BYTE + FLOPs × ENERGY_PER_FLOP[compute dtype]

with each figure a *lower* bound on what any GPU of today spends:

- **Per byte of DRAM traffic: 8 pJ (1 pJ/bit).**  O'Connor et al., "Fine-Grained
  DRAM: Energy-Efficient DRAM for Extreme Bandwidth Systems", MICRO-50 (2017),
  doi:10.1145/3123939.3124545, put HBM2 at about 3.9 pJ/bit and their proposed
  FGDRAM at half of that (about 2 pJ/bit).  HBM3e is not better than that
  proposal by 2×, so 1 pJ/bit is below what the H200's memory spends.
- **Per FLOP: 0.05 pJ for 16-bit operands** (0.1 pJ for 32-bit, 0.025 pJ for
  8-bit).  Horowitz, "Computing's energy problem (and what we can do about
  it)", ISSCC 2014, 45 nm: a 16-bit floating-point multiply 1.1 pJ and add
  0.4 pJ, so 0.75 pJ per FLOP of a fused multiply-add; 32-bit 3.7 and 0.9 pJ.
  Dividing by 15 covers the scaling from 45 nm to today's 4 nm-class nodes
  with room to spare.  Cross-check from NVIDIA's H200 datasheet: 989.5 dense
  BF16 TFLOP/s within the 700 W board power is at most 0.71 pJ per FLOP for the
  whole board, 14× the floor's figure.

The floor is an estimate meant never to flag honest work: a figure below it
means the energy was not measured (a forged or broken record), like a latency
below the latency floor (DESIGN §6).

**Ceiling.**  The board cannot draw more than its power limit, so the board's
energy per call is at most ``power limit × time per call`` (the loop's time
per call: the time the energy was drawn over), and the figure above idle at
most that less the idle draw's share.  ``CEILING_SLACK`` covers the counter's
update granularity and a power limit enforced as an average.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kictl.families import Work

#: J per byte of device-memory traffic (see above: 1 pJ/bit).
ENERGY_PER_BYTE = 8e-12
#: J per FLOP, by the compute dtype's width (see above).
ENERGY_PER_FLOP: dict[str, float] = {
    "float64": 0.2e-12,
    "float32": 0.1e-12,
    "float16": 0.05e-12,
    "bfloat16": 0.05e-12,
    "float8_e4m3fn": 0.025e-12,
    "float8_e5m2": 0.025e-12,
}
#: Integer and unknown dtypes: the smallest figure (a floor must stay below the truth).
ENERGY_PER_FLOP_DEFAULT = min(ENERGY_PER_FLOP.values())
SOURCES = (
    "O'Connor et al., Fine-Grained DRAM, MICRO-50 (2017): HBM2 ~3.9 pJ/bit, FGDRAM ~2 pJ/bit; floor 1 pJ/bit",
    "Horowitz, Computing's energy problem, ISSCC 2014 (45 nm): 16-bit FP mul 1.1 pJ, add 0.4 pJ; floor /15",
)
#: The ceiling is exceeded only by more than this share (counter granularity, power limit as an average).
CEILING_SLACK = 0.05

FLOOR_CHECK = "energyAboveFloor"
CEILING_CHECK = "energyBelowCeiling"


@dataclass(frozen=True, slots=True)
class EnergyBounds:
    """The floor (J per call above idle) and, where the power limit is known, the ceiling (board J per call)."""

    floor_j: float
    ceiling_j: float | None
    floor_text: str

    def checks(self, joules_per_call: float, board_joules_per_call: float) -> dict[str, dict[str, str]]:
        """The two checks as a run's integrity entries (``result``, ``detail``)."""
        out: dict[str, dict[str, str]] = {}
        if joules_per_call < self.floor_j:
            out[FLOOR_CHECK] = {
                "result": "failed",
                "detail": f"{joules_per_call:.4g} J per call is below the floor of {self.floor_j:.4g} J "
                f"({self.floor_text})",
            }
        else:
            out[FLOOR_CHECK] = {"result": "passed", "detail": f"floor {self.floor_j:.4g} J ({self.floor_text})"}
        if self.ceiling_j is None:
            out[CEILING_CHECK] = {"result": "skipped", "detail": "the power limit is not known"}
        elif board_joules_per_call > self.ceiling_j * (1 + CEILING_SLACK):
            out[CEILING_CHECK] = {
                "result": "failed",
                "detail": f"{board_joules_per_call:.4g} J per call on the board is above the power limit × time per "
                f"call ({self.ceiling_j:.4g} J)",
            }
        else:
            out[CEILING_CHECK] = {"result": "passed", "detail": f"ceiling {self.ceiling_j:.4g} J"}
        return out


def energy_floor(work: Work) -> tuple[float, str]:
    """The least energy above idle a call of ``work`` can take (J), and how it was estimated."""
    per_flop = ENERGY_PER_FLOP.get(work.compute_dtype, ENERGY_PER_FLOP_DEFAULT)
    memory = work.bytes * ENERGY_PER_BYTE
    compute = (work.flops or 0) * per_flop
    text = f"{work.bytes} B × {ENERGY_PER_BYTE * 1e12:g} pJ"
    if work.flops:
        text += f" + {work.flops} FLOP × {per_flop * 1e12:g} pJ ({work.compute_dtype})"
    return memory + compute, text


def bounds(work: Work | None, power_limit_mw: int | None, ns_per_call: float) -> EnergyBounds:
    """The floor of ``work`` (0 when unknown) and the ceiling ``power limit × ns_per_call``."""
    if work is None:
        floor_j, text = 0.0, "no work model for this family: only a positive figure"
    else:
        floor_j, text = energy_floor(work)
    ceiling = power_limit_mw / 1000 * ns_per_call / 1e9 if power_limit_mw else None
    return EnergyBounds(floor_j, ceiling, text)


def check_record(energy: dict[str, Any], work: Work | None) -> dict[str, dict[str, str]]:
    """The two checks on a run record's ``energy`` member (camelCase JSON), as ``kictl review`` and the
    energy ranking apply them to any record, imported or forged."""
    found = bounds(work, energy.get("powerLimitMilliwatts"), float(energy["nsPerCall"]))
    return found.checks(float(energy["joulesPerCall"]), float(energy["boardJoulesPerCall"]))
