"""NVML readings to the clocksSteady entry; throttle masks decoded by nvml.h's bit values."""

from __future__ import annotations

from kictl.bench.worker.gpu_state import GpuReading, clocks_steady, decode_reasons


def reading(sm: int, *reasons: str) -> GpuReading:
    return GpuReading(sm_clock_mhz=sm, memory_clock_mhz=3201, temperature_c=40, power_mw=300_000, reasons=reasons)


def test_masks_decode_to_names_and_unknown_bits() -> None:
    assert decode_reasons(0) == ()
    assert decode_reasons(0x1 | 0x4) == ("gpu_idle", "sw_power_cap")
    assert decode_reasons(0x40 | 0x1000) == ("hw_thermal_slowdown", "bit_0x1000")


def test_steady_clocks_pass_and_idle_is_benign() -> None:
    assert clocks_steady([reading(1980, "gpu_idle"), reading(1980)]) == (True, "")
    assert clocks_steady([]) == (True, "")


def test_throttling_or_moving_clocks_are_flagged() -> None:
    steady, why = clocks_steady([reading(1980), reading(1755, "sw_power_cap")])
    assert not steady
    assert "sw_power_cap" in why
    steady, why = clocks_steady([reading(1980), reading(1950, "hw_thermal_slowdown")])
    assert not steady
    assert "hw_thermal_slowdown" in why


def test_a_power_cap_that_did_not_move_the_clock_is_steady() -> None:
    # Seen on the H200 under a 1.9 ms kernel: sw_power_cap set, SM clock 1980 -> 1965 MHz.
    assert clocks_steady([reading(1980), reading(1965, "sw_power_cap")]) == (True, "")
    steady, why = clocks_steady([reading(1980), reading(1500)])
    assert not steady
    assert "1500" in why
    assert "1980" in why
