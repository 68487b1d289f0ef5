"""Reading tensors out of safetensors blobs without torch.

Workloads name structural tensors (``kv_indptr``, ``kv_indices``, …) in
safetensors files kept under ``registry/blobs/``.  Floors and rankings need
their values and must not import torch, so this module reads the format
directly: an 8-byte little-endian header length, a JSON header mapping each
tensor name to ``{dtype, shape, data_offsets}``, then the raw bytes
(https://github.com/huggingface/safetensors, "Format").
"""

from __future__ import annotations

import array
import json
import struct
import sys
from dataclasses import dataclass
from typing import Any

from kictl.errors import RecordError

#: safetensors dtype names -> (index dtype name, array typecode, item size)
_DTYPES: dict[str, tuple[str, str, int]] = {
    "I64": ("int64", "q", 8),
    "I32": ("int32", "i", 4),
    "I16": ("int16", "h", 2),
    "I8": ("int8", "b", 1),
    "U8": ("uint8", "B", 1),
    "BOOL": ("bool", "B", 1),
}
#: index dtype name -> safetensors dtype name, for every dtype the index knows
SAFETENSORS_DTYPES: dict[str, str] = {
    "float64": "F64",
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
    "int64": "I64",
    "int32": "I32",
    "int16": "I16",
    "int8": "I8",
    "uint8": "U8",
    "bool": "BOOL",
}
MAX_HEADER = 100 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class TensorEntry:
    """Where one tensor lies in a safetensors file."""

    name: str
    dtype: str  # safetensors name, e.g. "I32"
    shape: tuple[int, ...]
    start: int  # absolute byte offsets in the file
    end: int


def read_header(data: bytes, *, source: str = "blob") -> dict[str, TensorEntry]:
    """The tensors a safetensors file holds; raises ``RecordError`` if it is not one."""
    if len(data) < 8:
        raise RecordError(f"{source}: not a safetensors file (shorter than its header length)")
    (length,) = struct.unpack("<Q", data[:8])
    if length > MAX_HEADER or 8 + length > len(data):
        raise RecordError(f"{source}: not a safetensors file (header length {length} out of range)")
    try:
        header: dict[str, Any] = json.loads(data[8 : 8 + length])
    except ValueError as exc:
        raise RecordError(f"{source}: safetensors header is not JSON: {exc}") from exc
    base = 8 + length
    entries = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            start, end = (int(offset) for offset in info["data_offsets"])
            entry = TensorEntry(
                name=name,
                dtype=str(info["dtype"]),
                shape=tuple(int(dim) for dim in info["shape"]),
                start=base + start,
                end=base + end,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordError(f"{source}: safetensors entry {name!r} is malformed") from exc
        if not base <= entry.start <= entry.end <= len(data):
            raise RecordError(f"{source}: safetensors entry {name!r} points outside the file")
        entries[name] = entry
    return entries


def read_int_tensor(data: bytes, key: str, *, source: str = "blob") -> list[int]:
    """The values of an integer tensor ``key`` as a flat list."""
    entries = read_header(data, source=source)
    if key not in entries:
        raise RecordError(f"{source}: no tensor {key!r} (it has {', '.join(sorted(entries)) or 'none'})")
    entry = entries[key]
    if entry.dtype not in _DTYPES:
        raise RecordError(f"{source}: tensor {key!r} is {entry.dtype}, not an integer tensor")
    _, typecode, size = _DTYPES[entry.dtype]
    values = array.array(typecode)
    if (entry.end - entry.start) % size:
        raise RecordError(f"{source}: tensor {key!r} has a ragged byte length")
    values.frombytes(data[entry.start : entry.end])
    if sys.byteorder != "little":  # pragma: no cover - safetensors is little-endian
        values.byteswap()
    return values.tolist()


def write_safetensors(tensors: dict[str, tuple[str, tuple[int, ...], bytes]]) -> bytes:
    """Serialise ``{name: (index dtype, shape, raw little-endian bytes)}`` as safetensors."""
    header: dict[str, Any] = {}
    offset = 0
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {
            "dtype": SAFETENSORS_DTYPES[dtype],
            "shape": list(shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    body = b"".join(tensors[name][2] for name in sorted(tensors))
    return struct.pack("<Q", len(head)) + head + body


def int32_tensor(values: list[int]) -> tuple[str, tuple[int, ...], bytes]:
    """An int32 vector in the form ``write_safetensors`` takes."""
    packed = array.array("i", values)
    if sys.byteorder != "little":  # pragma: no cover
        packed.byteswap()
    return "int32", (len(values),), packed.tobytes()
