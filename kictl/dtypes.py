"""The tensor dtypes kictl knows: one table of their names, their bytes per element and their kinds.

A dtype's name is torch's attribute name (``getattr(torch, name)`` is its torch dtype:
``kictl.bench.wire.tensors.torch_dtype``) and the one spelling every part of kictl uses: the records'
``dtype`` fields (``kictl.records.DType`` is ``DType`` here), a workload blob's tensors (``kictl.blobs`` maps
each to its safetensors code), the worker's wire (``kictl.bench.wire.DTYPES`` and ``DTYPE_BYTES``), and the
families' byte counts (``kictl.families.DTYPE_BYTES``).  Each of those imports this table; none writes
its own.  ``tests/test_dtypes.py`` holds every reader to it.

A leaf: it imports nothing of kictl and no third party, so the sandboxed worker holds it
(``kictl.bench.worker.FILES``) and the records import it without loading the wire.  The table is read-only
(a ``MappingProxyType``): code in the worker's process cannot change a dtype's size in place.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal, get_args

#: Every dtype name a record may state, in the order the docs list them.
DType = Literal[
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
]
NAMES: tuple[str, ...] = get_args(DType)

#: Bytes per element of each dtype.
BYTES: Mapping[str, int] = MappingProxyType(
    {
        "float64": 8,
        "float32": 4,
        "float16": 2,
        "bfloat16": 2,
        "float8_e4m3fn": 1,
        "float8_e5m2": 1,
        "int64": 8,
        "int32": 4,
        "int16": 2,
        "int8": 1,
        "uint8": 1,
        "bool": 1,
    }
)

#: The floating-point dtypes (random inputs of these are drawn from a normal distribution).
FLOATING = frozenset(name for name in NAMES if name.startswith(("float", "bfloat")))
#: The 8-bit floating-point dtypes.
FP8 = frozenset(name for name in NAMES if name.startswith("float8_"))
