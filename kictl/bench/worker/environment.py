"""The machine a benchmark ran on, as an ExecutionEnvironment spec (DESIGN §3, §7).

Captured in the worker process (which has the device open): on a GPU the
product, architecture (``sm_90``), compute capability, SM count, memory and
L2 size, the driver, the CUDA toolkit torch was built with, and the versions
of torch, triton and flashinfer; on the CPU the CPU model.  Only stable facts
go in, so that runs on one machine share one environment record.  Package
versions are read from their metadata, never by importing them.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kictl.bench.wire.lazy import torch_module

LIBRARIES = ("triton", "flashinfer-python", "flashinfer-cubin", "apache-tvm-ffi", "numpy")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def driver_from_proc(text: str) -> str | None:
    """The version in the text of ``/proc/driver/nvidia/version`` (proprietary or open kernel module)."""
    found = re.search(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)", text)
    return found.group(1) if found else None


def driver_version() -> str | None:
    """The NVIDIA kernel driver's version: ``/proc/driver/nvidia/version``, else ``nvidia-smi``."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    found = driver_from_proc(text)
    if found:
        return found
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines and re.fullmatch(r"[\d.]+", lines[0].strip()) else None


def cpu_model() -> tuple[str | None, str]:
    """``(vendor, model name)`` of the CPU."""
    vendor = None
    model = platform.processor() or platform.machine()
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name" and value:
            model = value
        elif key == "vendor_id" and value:
            vendor = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}.get(value, value)
        if vendor and key == "model name":
            break
    return vendor, re.sub(r"\s+", " ", model).strip()


def _software() -> dict[str, Any]:
    torch = torch_module()

    libraries = {name: version for name in LIBRARIES if (version := _version(name)) is not None}
    software: dict[str, Any] = {
        "framework": {"name": "torch", "version": torch.__version__},
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
    }
    if libraries:
        software["libraries"] = libraries
    return software


def capture(device: str, product: Callable[[str], str] = str) -> dict[str, Any]:
    """The ExecutionEnvironment spec (JSON members) of ``device`` on this machine.

    ``product`` turns the driver's name of the GPU into the index's (kictl's parent passes
    ``kictl.families.gpus.normalize_product``; the worker, which holds no GPU table, leaves it to the parent:
    ``judge.runner`` normalises what a worker reports).
    """
    torch = torch_module()

    software = _software()
    vendor, cpu = cpu_model()
    if device == "cpu":
        hardware: dict[str, Any] = {"product": cpu, "architecture": platform.machine(), "cpu": cpu}
        if vendor:
            hardware["vendor"] = vendor
        try:
            hardware["memoryBytes"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            pass
        return {"hardware": hardware, "software": software}
    index = torch.device(device).index or 0
    props = torch.cuda.get_device_properties(index)
    hip = getattr(torch.version, "hip", None)
    hardware = {
        "vendor": "AMD" if hip else "NVIDIA",
        "product": product(props.name),
        "architecture": getattr(props, "gcnArchName", None) if hip else f"sm_{props.major}{props.minor}",
        "computeCapability": f"{props.major}.{props.minor}",
        "smCount": int(props.multi_processor_count),
        "memoryBytes": int(props.total_memory),
        "cpu": cpu,
    }
    l2 = getattr(props, "L2_cache_size", None)
    if l2:
        hardware["l2CacheBytes"] = int(l2)
    hardware = {key: value for key, value in hardware.items() if value is not None}
    if torch.version.cuda:
        software["cudaToolkit"] = torch.version.cuda
    driver = driver_version()
    if driver:
        software["driver"] = driver
    return {"hardware": hardware, "software": software}
