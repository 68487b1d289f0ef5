"""The GPU's state around a measurement: clocks, temperature, power, throttling, the persisting L2.

A figure taken while the GPU throttled (power cap, thermal slowdown) is not
the kernel's figure.  NVML (``nvidia-ml-py``, the ``gpu`` extra) is read
before and after each trial; the readings go into the run, and
:func:`clocks_steady` turns them into the ``clocksSteady`` integrity entry.

Throttle ("clocks event") reasons are decoded from NVML's bit mask with the
values of ``nvml.h`` (stable since the R450 drivers).  Being idle or running
at the applications clocks is normal; the others mean the clocks were held
down while a sample may have been taken.

:func:`reset_persisting_l2` calls ``cudaCtxResetPersistingL2Cache`` so that
lines an implementation pinned with an access-policy window do not survive
into the next timed call (the flush alone cannot evict persisting lines).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kictl.bench.wire.lazy import torch_module
from kictl.errors import EnvError

#: nvml.h: nvmlClocksEventReason* bit values.
REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
#: Reasons that do not lower the clocks below what the card runs at under load.
BENIGN = frozenset({"gpu_idle", "applications_clocks_setting", "display_clock_setting"})
#: Reasons that count only when the SM clock actually fell (seen on the H200: the software power cap
#: engaged under a 1.9 ms attention kernel while the clock moved from 1980 to 1965 MHz).
SOFT = frozenset({"sw_power_cap", "sync_boost"})
#: SM clock spread (max/min − 1) across one measurement above which it is not steady.
CLOCK_SPREAD_LIMIT = 0.05


@dataclass(frozen=True)
class GpuReading:
    """One NVML reading of one GPU."""

    sm_clock_mhz: int
    memory_clock_mhz: int
    temperature_c: int
    power_mw: int
    reasons: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "smClockMhz": self.sm_clock_mhz,
            "memoryClockMhz": self.memory_clock_mhz,
            "temperatureC": self.temperature_c,
            "powerMilliwatts": self.power_mw,
            "throttleReasons": list(self.reasons),
        }


def decode_reasons(mask: int) -> tuple[str, ...]:
    """The names of the bits set in an NVML clocks-event mask; unknown bits as ``bit_0x…``."""
    names = [name for bit, name in sorted(REASONS.items()) if mask & bit]
    unknown = mask & ~sum(REASONS)
    bit = 1
    while unknown:
        if unknown & bit:
            names.append(f"bit_{bit:#x}")
            unknown &= ~bit
        bit <<= 1
    return tuple(names)


def clocks_steady(readings: Sequence[GpuReading]) -> tuple[bool, str]:
    """Whether the clocks held during a measurement, and why not (empty when steady or unknown)."""
    if not readings:
        return True, ""
    hard = sorted({r for reading in readings for r in reading.reasons if r not in BENIGN and r not in SOFT})
    if hard:
        return False, "throttled: " + ", ".join(hard)
    clocks = [reading.sm_clock_mhz for reading in readings if reading.sm_clock_mhz > 0]
    if clocks and max(clocks) > min(clocks) * (1 + CLOCK_SPREAD_LIMIT):
        soft = sorted({r for reading in readings for r in reading.reasons if r in SOFT})
        why = f" ({', '.join(soft)})" if soft else ""
        return False, f"SM clock moved from {min(clocks)} to {max(clocks)} MHz{why}"
    return True, ""


def open_nvml(index: int) -> tuple[Any, Any]:
    """``pynvml``, initialised, and its handle of device ``index`` (raises ``EnvError`` when NVML is missing or
    fails).  The worker's readings (``Nvml``) and the parent's energy counter (``judge.energy``) open it here."""
    try:
        import pynvml  # an optional dependency (nvidia-ml-py, the ``gpu`` extra): a CPU machine has none

        pynvml.nvmlInit()
        return pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception as exc:
        raise EnvError(f"NVML is not available: {type(exc).__name__}: {exc}") from exc


class Nvml:
    """NVML for one device index (raises ``EnvError`` when NVML is missing or fails)."""

    def __init__(self, index: int) -> None:
        self._nvml, self._handle = open_nvml(index)

    def read(self) -> GpuReading:
        nvml, handle = self._nvml, self._handle
        try:
            reasons = (
                getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
            )
            return GpuReading(
                sm_clock_mhz=int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
                memory_clock_mhz=int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
                temperature_c=int(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
                power_mw=int(nvml.nvmlDeviceGetPowerUsage(handle)),
                reasons=decode_reasons(int(reasons(handle))),
            )
        except Exception as exc:
            raise EnvError(f"NVML read failed: {type(exc).__name__}: {exc}") from exc


def _cudart() -> Any:
    """The CUDA runtime torch loaded (its own copy first, then the system's)."""
    torch = torch_module()

    candidates: list[str] = []
    lib_dir = Path(str(torch.__file__)).parent / "lib"
    candidates += sorted(str(p) for p in lib_dir.glob("libcudart.so*"))
    found = ctypes.util.find_library("cudart")
    if found:
        candidates.append(found)
    for name in candidates:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


_RESET: list[Any] = []


def _reset_function() -> Any:
    """``cudaCtxResetPersistingL2Cache`` from cuda-bindings, else from the CUDA runtime torch loaded; None."""
    try:
        from cuda.bindings import runtime  # an optional dependency (cuda-bindings), GPU-only

        return lambda: int(runtime.cudaCtxResetPersistingL2Cache()[0])
    except Exception:
        pass
    library = _cudart()
    function = getattr(library, "cudaCtxResetPersistingL2Cache", None) if library is not None else None
    return (lambda: int(function())) if function is not None else None


def reset_persisting_l2() -> bool:
    """``cudaCtxResetPersistingL2Cache`` for the current context; False when it could not be called."""
    if not _RESET:
        _RESET.append(_reset_function())
    function = _RESET[0]
    if function is None:
        return False
    try:
        return bool(function() == 0)
    except (AttributeError, OSError, RuntimeError):
        return False
