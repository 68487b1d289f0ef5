"""A run that did not pass says why in one line (issue 45): the reason first, then the implementation's file and line.

``statusDetail`` keeps the whole text (the traceback, the stuck worker's stack); the summary on stderr was
its last line, which for a hang was a frame of ``<frozen runpy>``.  A hanging, a non-compiling and a raising
implementation each run through the real ``kictl bench`` here, in one session.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kictl.cli.bench import failure_reason
from kictl.store.registry import Registry
from tests.bench.conftest import FAST
from tests.conftest import ASSETS, RunCli

CHEATS = ASSETS / "cheats"


@pytest.mark.slow  # one bench session that waits out a 3 s timeout: ~20 s on the 2-core VM
def test_a_hang_a_syntax_error_and_an_exception_each_end_in_one_line_with_file_and_line(
    cli: RunCli, bundled_registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    impls = ("rmsnorm_hangs", "rmsnorm_syntax_error", "rmsnorm_raises")
    args = ["bench", "rmsnorm_h4096", "--workload", "b1", *FAST, "--timeout", "3", "--out", tmp_path, "--json"]
    for name in impls:
        args += ["--impl", CHEATS / f"{name}.py"]
    result = cli(*args, "--registry", bundled_registry.root)
    assert result.exit_code == 1, result.output
    rows = {row["implementation"].rsplit("_", 1)[0]: row for row in json.loads(result.stdout)}
    summary = {
        name: next(
            line for line in result.stderr.splitlines() if line.startswith(rows[name]["implementation"] + " on ")
        )
        for name in impls
    }
    hang, syntax, raised = (summary[name] for name in impls)
    assert rows["rmsnorm_hangs"]["status"] == "timeout"
    assert hang.endswith(
        ": timeout: no answer within 3 s to check; the worker was stopped (stuck at rmsnorm_hangs.py:8 in run)"
    ), hang
    assert rows["rmsnorm_syntax_error"]["status"] == "compile_error"
    assert syntax.endswith(": compile_error: SyntaxError: expected ':' (at rmsnorm_syntax_error.py:3)"), syntax
    assert rows["rmsnorm_raises"]["status"] == "runtime_error"
    because = "ValueError: this kernel does not support a hidden size of 4096"
    assert raised.endswith(f": runtime_error: {because} (at rmsnorm_raises.py:5 in run)"), raised
    # the stack stays in statusDetail (and under --verbose), never in the summary
    assert "frozen runpy" in rows["rmsnorm_hangs"]["statusDetail"]
    assert "Traceback" in rows["rmsnorm_raises"]["statusDetail"]
    assert "frozen" not in result.stderr
    assert "Traceback" not in result.stderr
    monkeypatch.setenv("KICTL_VERBOSE", "1")
    verbose = cli(*args[: -len(impls) * 2], "--impl", CHEATS / "rmsnorm_raises.py", "--registry", bundled_registry.root)
    assert verbose.exit_code == 1, verbose.output
    assert '    File "rmsnorm_raises.py", line 5, in run' in verbose.stderr


@pytest.mark.parametrize(
    ("detail", "reason"),
    [
        (
            "kictl's worker died: killed by SIGSEGV\nFatal Python error: Segmentation fault\n\n"
            "Current thread 0x01 (most recent call first):\n"
            '  File "/usr/lib/python3.11/ctypes/__init__.py", line 9 in string_at\n'
            '  File "/tmp/kictl-sources-ab12/pkg/kernel.py", line 14 in run\n'
            '  File "/kictl-worker/kictl/bench/worker.py", line 412 in call',
            "kictl's worker died: killed by SIGSEGV (at pkg/kernel.py:14 in run)",
        ),
        (
            "Traceback (most recent call last):\n"
            '  File "main.py", line 3, in run\n    return torch.matmul(a, b)\n'
            '  File "/venv/lib/python3.11/site-packages/torch/x.py", line 7, in matmul\n    raise RuntimeError(m)\n'
            "RuntimeError: mat1 and mat2 shapes cannot be multiplied",
            "RuntimeError: mat1 and mat2 shapes cannot be multiplied (at main.py:3 in run)",
        ),
        ("max abs err 0.5 > atol 0.01 + rtol 0.01 x |ref|", "max abs err 0.5 > atol 0.01 + rtol 0.01 x |ref|"),
        ("", "no detail recorded"),
    ],
)
def test_the_reason_comes_first_and_names_the_implementations_frame(detail: str, reason: str) -> None:
    assert failure_reason(detail) == reason
