"""One dtype table (``kictl.dtypes``, issue 44): every reader takes it, none writes its own, and torch agrees.

The table was written three times (the records' ``DType``, the wire's ``DTYPES``/``DTYPE_BYTES`` and the
families' ``DTYPE_BYTES``); a dtype added to one and not the others made a record valid that the worker
refused, or a workload whose bytes a family could not count.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest
import torch

from kictl import blobs, definitions, dtypes, families, records
from kictl.bench import wire, worker
from kictl.bench.wire import tensors

KICTL = Path(dtypes.__file__).resolve().parent


def test_every_reader_holds_the_one_table() -> None:
    assert records.DType is dtypes.DType
    assert typing.get_args(records.DType) == dtypes.NAMES
    assert wire.DTYPES == frozenset(dtypes.NAMES)
    assert wire.DTYPE_BYTES is dtypes.BYTES
    assert families.DTYPE_BYTES is dtypes.BYTES
    assert tensors.FLOAT_DTYPES is dtypes.FLOATING
    assert definitions.FP8_DTYPES is dtypes.FP8
    # the safetensors codes are another fact (kictl.blobs), of the same names
    assert set(blobs.SAFETENSORS_DTYPES) == set(dtypes.NAMES)


def test_the_table_covers_every_name_once() -> None:
    assert len(set(dtypes.NAMES)) == len(dtypes.NAMES)
    assert list(dtypes.BYTES) == list(dtypes.NAMES)
    assert dtypes.FP8 == {"float8_e4m3fn", "float8_e5m2"}
    assert dtypes.FLOATING == dtypes.FP8 | {"float64", "float32", "float16", "bfloat16"}


@pytest.mark.parametrize("name", dtypes.NAMES)
def test_torch_agrees_with_each_row(name: str) -> None:
    dtype = tensors.torch_dtype(name)
    assert isinstance(dtype, torch.dtype)
    assert torch.empty((), dtype=dtype).element_size() == dtypes.BYTES[name]
    assert dtype.is_floating_point == (name in dtypes.FLOATING)


def test_the_table_cannot_be_changed_in_place() -> None:
    """Code in the worker's process imports the table too: a size it could set would move the wire's limits."""
    with pytest.raises(TypeError):
        dtypes.BYTES["float32"] = 0  # type: ignore[index]
    assert wire.DTYPE_BYTES["float32"] == 4


def test_the_table_is_a_leaf_the_sandbox_holds() -> None:
    """It imports only the standard library (the worker holds no pydantic), and the sandbox carries it."""
    tree = ast.parse((KICTL / "dtypes.py").read_text(encoding="utf-8"))
    imported = {
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported <= {"__future__", "collections.abc", "types", "typing"}
    assert Path("dtypes.py") in set(worker.FILES)  # paths under kictl's folder


#: Modules that write many dtype names for another fact: safetensors codes, FlashInfer-Bench's own list (a third
#: party's format) and the energy per operation of each compute dtype.
OTHER_FACTS = {"blobs.py", "exporters/flashinfer_trace.py", "families/energy.py"}


def _name_tables(tree: ast.Module) -> list[int]:
    """Lines of literals (dict, set, tuple, list, a ``Literal[...]``) that name four or more dtypes."""
    names = set(dtypes.NAMES)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            items: list[ast.expr | None] = list(node.keys)
        elif isinstance(node, ast.Set | ast.Tuple | ast.List):
            items = list(node.elts)
        else:
            continue
        named = {item.value for item in items if isinstance(item, ast.Constant) and item.value in names}
        if len(named) >= 4:
            found.append(node.lineno)
    return found


def test_no_module_writes_a_second_dtype_table() -> None:
    found = {}
    for path in sorted(KICTL.rglob("*.py")):
        name = path.relative_to(KICTL).as_posix()
        if name == "dtypes.py" or name in OTHER_FACTS:
            continue
        lines = _name_tables(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[name] = lines
    assert not found, f"import kictl.dtypes instead of writing the dtypes again: {found}"


def test_the_scan_sees_a_copied_table() -> None:
    copied = (
        'S = {"float32": 4, "float16": 2, "bfloat16": 2, "int8": 1}\nD = Literal["float32", "int64", "int32", "bool"]'
    )
    assert _name_tables(ast.parse(copied)) == [1, 2]
    assert _name_tables(ast.parse('PAIR = ("float32", "int64")')) == []
