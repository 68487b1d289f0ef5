"""``kictl export flashinfer-trace`` prints what it exported as aligned columns (issue 45: the rows were not)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import RunCli
from tests.exporters.conftest import Signed


def test_the_exported_rows_are_aligned_columns(signed: Signed, tmp_path: Path, cli: RunCli) -> None:
    result = cli("export", "flashinfer-trace", tmp_path / "out", "--gpu", "H200", "--registry", signed.registry.root)
    assert result.exit_code == 0, result.output
    header, rule, *rows = result.stdout.splitlines()
    assert header.split() == ["run", "evidence", "definition", "workload", "implementation"]
    assert len(rows) == 4
    starts = [header.index(name) for name in header.split()]
    for row in rows:  # every cell starts where its header does
        cells = row.split()
        assert [row.index(cell, start) for cell, start in zip(cells, starts, strict=True)] == starts, (header, row)
        assert cells[0].startswith("sha256:")
    assert set(rule.replace("  ", "")) == {"-"}
